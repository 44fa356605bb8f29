"""vmtest -- tdax on real kernel DAX, in QEMU guests, with real power cuts (issue #7).

A guest of Debian's stock kernel (downloaded with apt-get download, unpacked,
never installed) boots a small busybox initramfs holding tdax, the crash
suite's C oracle workload and ndctl/cxl. The guest sees real persistent
memory, from an emulated NVDIMM (`-machine pc,nvdimm=on`) or an emulated CXL
Type-3 device behind a CXL host bridge (`-machine q35,cxl=on`), and puts the
tdax device region on it as fsdax (a file on ext4 -o dax) or devdax
(/dev/daxX.Y). The application's files live on a virtio disk (the "flash"):
the hybrid-SSD layout.

Each scenario (memory x backend) is a chain of boots of one guest with the
same pmem and disk images. A boot recovers the device and checks the
previous boot's acknowledged records, then runs the oracle workload under
`tdax run` until the host SIGKILLs QEMU at a random instant: a real power
cut, the guest's page cache is gone while the pmem backing file keeps what
reached it. The oracle lines go to the guest's second serial port, a file on
the host, outside the crash domain; the next boot gets them on a small disk.
The boot id differs each time, so `tdax recover` replays. The last cut of a
chain runs a lying tdax (TDAX_TEST_LIE=1, a test aid: the test build's tdax,
shipped beside the product): that check must lose records.

The `systemd` scenario proves recovery before start at boot (issue #22): its
check boots start systemd as PID 1 from the same initramfs, with tdax as
`make install` puts it under /usr, its tdax-recover.service enabled by
`systemctl --root=... enable`, /etc/tdax/tdax.conf naming the region, and a
database stand-in (tests/vm/units/vmtest-database.service, an ordinary
service that knows nothing of tdax) that checks the files as it starts.
Before each check the run holds every record in the device (the write-back
waits), so the files are whole only if the unit recovered them first; its
control masks the unit and must find records missing.

usage: vmtest.py [--cuts N] [--scenarios nvdimm-fsdax,...] [--seed S] [--jobs J] [--keep]
exit status: 0 when every scenario passed, 1 on any failure, 77 when QEMU is missing
"""
import argparse
import concurrent.futures
import json
import lzma
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "vm"
QEMU = "qemu-system-x86_64"
SCENARIOS = ["nvdimm-fsdax", "nvdimm-devdax", "cxl-fsdax", "cxl-devdax", "systemd"]
# What the guest runs, at the paths init expects; libraries follow via ldd.
GUEST_BINARIES = {
    "build/bin/tdax": "/opt/tdax/bin/tdax",
    "build/lib/libtdax.so": "/opt/tdax/lib/libtdax.so",
    # The test build, for the control: its tdax run preloads its sibling library.
    "build/test/bin/tdax": "/opt/tdax/test/bin/tdax",
    "build/test/lib/libtdax.so": "/opt/tdax/test/lib/libtdax.so",
    "build/tests/tdax-oracle": "/opt/tdax/tests/tdax-oracle",
    "/usr/bin/ndctl": "/usr/bin/ndctl",
    "/usr/bin/cxl": "/usr/bin/cxl",
    "/usr/sbin/mke2fs": "/usr/sbin/mke2fs",
}
# Libraries tdax loads at run time rather than links (src/core/pmem.h):
# ldd of the binaries does not name them.
RUNTIME_LIBS = ["libpmem2.so.1"]
MODULES = ["nfit", "nd_pmem", "dax_pmem", "device_dax", "ext4", "virtio_blk", "virtio_pci",
           "cxl_acpi", "cxl_pci", "cxl_mem", "cxl_pmem"]
# The systemd boots: systemd, systemctl, the generator that reads
# systemd.mask= off the kernel command line (the control) and the units that
# order a boot, from this machine; tdax installed under /usr (make install).
SYSTEMD_BINARIES = ["/lib/systemd/systemd", "/bin/systemctl",
                    "/lib/systemd/system-generators/systemd-debug-generator"]
SYSTEMD_UNITS = ["sysinit.target", "local-fs.target", "local-fs-pre.target", "basic.target",
                 "multi-user.target", "sockets.target", "timers.target", "paths.target",
                 "slices.target", "swap.target", "shutdown.target", "emergency.target"]
GUEST_CONF = "[device]\npath = /pmem/tdax.region\n"
BOOT_TIMEOUT = 90      # seconds from QEMU start to RUNNING or DONE
RUN_MIN_ACKS = 50      # oracle lines seen before the cut may come


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


# ---- the guest kernel and initramfs -----------------------------------------

def kernel():
    """Debian's current stock kernel image, unpacked under build/vm; returns
    (its tree, the PVH-bootable vmlinux, the release)."""
    dep = sh("apt-cache", "depends", "linux-image-amd64").stdout
    pkg = re.search(r"Depends: (linux-image-[0-9][^\s]*)", dep)
    if not pkg:
        sys.exit("vmtest: apt-cache knows no linux-image-amd64; run 'apt-get update'")
    pkg = pkg.group(1)
    tree = WORK / pkg
    vmlinux = tree / "vmlinux"
    if not vmlinux.exists():
        dl = WORK / "download"
        shutil.rmtree(dl, ignore_errors=True)
        dl.mkdir(parents=True)
        get = subprocess.run(["apt-get", "download", pkg], cwd=dl, capture_output=True, text=True)
        if get.returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], check=True)
            sh("apt-get", "download", pkg, cwd=dl)
        deb = next(dl.glob("*.deb"))
        shutil.rmtree(tree, ignore_errors=True)
        sh("dpkg-deb", "-x", str(deb), str(tree))
        shutil.rmtree(dl)
        # Decompressing the bzImage takes seconds under software emulation;
        # QEMU boots the ELF vmlinux inside it directly (PVH).
        bz = next((tree / "boot").glob("vmlinuz-*")).read_bytes()
        xz = bz.find(b"\xfd7zXZ\x00")
        (tree / "vmlinux.tmp").write_bytes(lzma.LZMADecompressor().decompress(bz[xz:]))
        (tree / "vmlinux.tmp").rename(vmlinux)
    release = next((tree / "lib" / "modules").iterdir()).name
    return tree, vmlinux, release


def module_files(tree, release):
    """The .ko files MODULES need, dependencies first."""
    sh("depmod", "-b", str(tree), release)
    out, seen = [], set()
    for m in MODULES:
        deps = sh("modprobe", "-C", "/dev/null", "-d", str(tree), "-S", release, "--show-depends", m).stdout
        for line in deps.splitlines():
            f = line.split()[1] if line.startswith("insmod ") else None
            if f and f not in seen:
                seen.add(f)
                out.append(Path(f))
    return out


def runtime_lib(name):
    """Where the dynamic linker finds library `name` on this machine."""
    for line in sh("ldconfig", "-p").stdout.splitlines():
        if line.strip().startswith(name + " ") and "=>" in line:
            return Path(line.split("=>")[1].strip())
    raise RuntimeError(f"{name} is not installed here (make deps installs it)")


def copy_with_libs(src, dst_root, dst):
    target = dst_root / dst.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, target)
    copy_libs(src, dst_root)


def copy_libs(src, dst_root):
    """The shared libraries `src` loads, into dst_root's library directory."""
    for line in sh("ldd", str(src)).stdout.splitlines():
        m = re.search(r"(/\S+) \(0x", line)
        if m:
            lib = Path(m.group(1)).resolve()
            name = Path(m.group(1)).name
            where = "lib64" if name.startswith("ld-linux") else "lib/x86_64-linux-gnu"
            (dst_root / where).mkdir(parents=True, exist_ok=True)
            if not (dst_root / where / name).exists():
                shutil.copy2(lib, dst_root / where / name)


def initramfs(tree, release):
    root = WORK / "initramfs"
    shutil.rmtree(root, ignore_errors=True)
    for d in ("bin", "proc", "sys", "dev", "tmp", "lib/modules"):
        (root / d).mkdir(parents=True)
    shutil.copy2(shutil.which("busybox"), root / "bin" / "busybox")
    for i, ko in enumerate(module_files(tree, release)):
        shutil.copy2(ko, root / "lib" / "modules" / f"{i:02d}-{ko.name}")
    for src, dst in GUEST_BINARIES.items():
        copy_with_libs(ROOT / src if not src.startswith("/") else Path(src), root, dst)
    for name in RUNTIME_LIBS:
        lib = runtime_lib(name)
        copy_with_libs(lib, root, f"/lib/x86_64-linux-gnu/{name}")
    for name in ("init", "storage", "database"):
        shutil.copy2(ROOT / "tests" / "vm" / name, root / name)
    (root / "init").chmod(0o755)
    systemd_root(root)
    out = WORK / "initramfs.cpio"
    files = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
    with open(out, "wb") as f:
        subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=files, stdout=f, check=True)
    return out


def systemd_root(root):
    """What the systemd boots add to the initramfs: busybox's applets as
    commands (the units run shell scripts), systemd, tdax installed the way
    an operator installs it, its boot unit enabled, the configuration file,
    and the vmtest units."""
    for applet in sh("busybox", "--list").stdout.split():
        if not (root / "bin" / applet).exists():
            (root / "bin" / applet).symlink_to("busybox")
    for b in SYSTEMD_BINARIES:
        copy_with_libs(b, root, b)
    units = root / "lib" / "systemd" / "system"
    units.mkdir(parents=True, exist_ok=True)
    for u in SYSTEMD_UNITS:
        shutil.copy2(Path("/lib/systemd/system") / u, units / u)
    sh("make", "-C", str(ROOT), "--no-print-directory", "-s", "install", f"DESTDIR={root}",
       "PREFIX=/usr", "UNITDIR=/lib/systemd/system")
    copy_libs(root / "usr" / "bin" / "tdax", root)
    for u in (ROOT / "tests" / "vm" / "units").glob("*.service"):
        shutil.copy2(u, units / u.name)
    etc = root / "etc"
    (etc / "tdax").mkdir(parents=True)
    (etc / "tdax" / "tdax.conf").write_text(GUEST_CONF)
    shutil.copy2("/etc/os-release", etc / "os-release")
    (etc / "machine-id").write_text("")
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (etc / "group").write_text("root:x:0:\n")
    sh("systemctl", f"--root={root}", "enable", "tdax-recover.service", "vmtest-storage.service",
       "vmtest-database.service")


# ---- one guest ------------------------------------------------------------

def qemu_argv(mem, d, vmlinux, initrd, cmdline):
    argv = [QEMU, "-nodefaults", "-no-reboot", "-display", "none", "-cpu", "max,la57=off", "-smp", "1",
            "-kernel", str(vmlinux), "-initrd", str(initrd), "-append", cmdline,
            "-serial", f"file:{d / 'console.log'}", "-serial", f"file:{d / 'oracle.log'}",
            # cache=unsafe: a guest flush is not passed on as an fsync of the
            # host's file. The host never crashes; killing QEMU (the cut)
            # keeps every write the guest's disk completed either way, and
            # loses what the guest's page cache held.
            "-drive", f"file={d / 'disk.img'},if=none,id=flash,format=raw,cache=unsafe",
            "-drive", f"file={d / 'oracle.img'},if=none,id=oracle,format=raw,readonly=on"]
    bus = "pci.0" if mem == "nvdimm" else "pcie.0"
    argv += ["-device", f"virtio-blk-pci,drive=flash,bus={bus}", "-device", f"virtio-blk-pci,drive=oracle,bus={bus}"]
    pmem = f"memory-backend-file,id=pm0,share=on,mem-path={d / 'pmem.img'},size=256M"
    if mem == "nvdimm":
        argv += ["-bios", "/usr/share/qemu/qboot.rom", "-machine", "pc,nvdimm=on",
                 "-m", "512M,slots=2,maxmem=2G", "-object", pmem, "-device", "nvdimm,id=nv0,memdev=pm0"]
    else:
        # A CXL host bridge with one root port drops memory writes under QEMU 7.2:
        # a second, empty root port avoids it.
        argv += ["-machine", "q35,cxl=on", "-m", "512M,slots=2,maxmem=2G", "-object", pmem,
                 "-object", f"memory-backend-file,id=lsa0,share=on,mem-path={d / 'lsa.img'},size=1M",
                 "-device", "pxb-cxl,bus_nr=12,bus=pcie.0,id=cxl.1",
                 "-device", "cxl-rp,port=0,bus=cxl.1,id=rp0,chassis=0,slot=2",
                 "-device", "cxl-rp,port=1,bus=cxl.1,id=rp1,chassis=0,slot=3",
                 "-device", "cxl-type3,bus=rp0,memdev=pm0,lsa=lsa0,id=cxl-pmem0",
                 "-M", "cxl-fmw.0.targets.0=cxl.1,cxl-fmw.0.size=4G"]
    return argv


def guest_lines(d):
    p = d / "console.log"
    text = p.read_text(errors="replace") if p.exists() else ""
    return [ln.strip()[7:] for ln in text.splitlines() if ln.startswith("TDAXVM ")]


def boot(d, mem, vmlinux, initrd, args, cut_after, extra=""):
    """One boot. With cut_after set, SIGKILL QEMU that many seconds after the
    workload has acknowledged RUN_MIN_ACKS records; `extra` goes on the
    kernel command line. Returns the guest's TDAXVM lines and how the boot
    ended."""
    for f in ("console.log", "oracle.log"):
        (d / f).unlink(missing_ok=True)
    cmdline = " ".join(["console=ttyS0 quiet panic=-1", extra] + [f"tdax.{k}={v}" for k, v in args.items()])
    with open(d / "qemu.err", "w") as err:
        q = subprocess.Popen(qemu_argv(mem, d, vmlinux, initrd, cmdline), stdout=subprocess.DEVNULL,
                             stderr=err, start_new_session=True)
    deadline, cut_at = time.time() + BOOT_TIMEOUT, None
    try:
        while q.poll() is None:
            now = time.time()
            if cut_at and now >= cut_at:
                os.kill(q.pid, signal.SIGKILL)  # the power cut
                q.wait()
                return guest_lines(d), "cut"
            if now > deadline:
                return guest_lines(d) + ["FAIL the guest did not finish within %d s" % BOOT_TIMEOUT], "timeout"
            lines = guest_lines(d)
            if any(ln.startswith("FAIL") for ln in lines):
                q.wait(timeout=30)
                break
            if cut_after is not None and cut_at is None and "RUNNING" in lines:
                o = d / "oracle.log"
                if o.exists() and o.read_bytes().count(b"\n") >= RUN_MIN_ACKS:
                    cut_at = now + cut_after
            time.sleep(0.05)
        return guest_lines(d), "exit %d" % q.returncode
    finally:
        if q.poll() is None:
            os.kill(q.pid, signal.SIGKILL)
            q.wait()


def log_tail(d):
    """The end of the guest's console, and what QEMU itself said."""
    tail = (d / "console.log").read_text(errors="replace").splitlines()[-40:] if (d / "console.log").exists() else []
    return tail + [f"qemu: {ln}" for ln in (d / "qemu.err").read_text(errors="replace").splitlines()[-5:]]


def parse_check(lines):
    for ln in lines:
        m = re.match(r"CHECK acked (\d+) lost (\d+)", ln)
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def images(name):
    """A scenario's directory with fresh pmem, label, oracle and disk images."""
    d = WORK / "run" / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    for img, size in (("pmem.img", 256 << 20), ("lsa.img", 1 << 20), ("oracle.img", 1 << 20)):
        with open(d / img, "wb") as f:
            f.truncate(size)
    sh("mke2fs", "-q", "-F", "-t", "ext4", str(d / "disk.img"), "128M")
    return d


def keep_acks(d):
    """The acknowledged records of the boot that just ended, on the oracle
    disk the next boot checks them from."""
    oracle = (d / "oracle.log").read_bytes() if (d / "oracle.log").exists() else b""
    with open(d / "oracle.img", "wb") as f:  # NUL-padded to whole MiBs, a disk image
        f.write(oracle)
        f.truncate((len(oracle) >> 20) + 1 << 20)


def drop_images(d, rows):
    if not any("fail" in r for r in rows):  # keep the logs, not the images
        for img in ("pmem.img", "lsa.img", "disk.img", "oracle.img"):
            (d / img).unlink()


def scenario(name, cuts, seed, vmlinux, initrd):
    """One chain of boots; returns a list of result rows."""
    if name == "systemd":
        return systemd_scenario(cuts, seed, vmlinux, initrd)
    mem, backend = name.split("-")
    rng = random.Random(seed)
    d = images(name)
    rows, plan = [], ["cut"] * cuts + ["control", "final"]
    for i, step in enumerate(plan):
        args = {"mem": mem, "backend": backend, "first": int(i == 0), "check": int(i > 0),
                "run": int(step != "final"), "lie": int(step == "control"),
                "policy": "thesis" if i % 2 and step == "cut" else "always",  # tracked ranges, or every one
                "mode": "bypass" if i in (2, 4) and step == "cut" else "coherent"}  # promoted files too
        cut_after = rng.uniform(0.2, 2.0) if step != "final" else None
        t0 = time.time()
        lines, how = boot(d, mem, vmlinux, initrd, args, cut_after)
        shutil.copy2(d / "console.log", d / f"console-{i}.log")
        secs = time.time() - t0
        fail = next((ln[5:] for ln in lines if ln.startswith("FAIL")), None)
        if fail is None and how != ("cut" if step != "final" else "exit 0"):
            fail = f"boot ended by {how}"
        if i > 0:  # this boot checked the previous boot's cut
            prev = plan[i - 1]
            got = parse_check(lines)
            rec = next((ln for ln in lines if ln.startswith("RECOVER")), "RECOVER missing")
            row = {"scenario": name, "cut": i, "control": prev == "control", "recover": rec,
                   "acked": got[0] if got else 0, "lost": got[1] if got else 0, "boot_s": round(secs, 1)}
            if not got:
                row["fail"] = fail or "no CHECK line"
            elif prev == "control" and got[1] == 0:
                row["fail"] = "the lying tdax lost nothing: the check cannot see a loss"
            elif prev != "control" and (got[1] or not rec.startswith("RECOVER rc=0")):
                row["fail"] = f"{got[1]} acknowledged records lost; {rec}"
            if "fail" in row:
                row["tail"] = log_tail(d)
            rows.append(row)
        if fail and not (rows and rows[-1]["cut"] == i and "fail" in rows[-1]):
            rows.append({"scenario": name, "cut": i + 1, "control": step == "control", "acked": 0, "lost": 0,
                         "fail": fail, "tail": log_tail(d)})
        if fail:
            break
        keep_acks(d)
    drop_images(d, rows)
    return rows


def parse_unit(lines):
    """tdax-recover.service as the database stand-in saw it when it started."""
    ln = next((ln for ln in lines if ln.startswith("UNIT ")), "")
    return dict(kv.split("=", 1) for kv in ln.split()[1:] if "=" in kv)


def systemd_scenario(cuts, seed, vmlinux, initrd):
    """Recovery before start at boot: pairs of boots on an emulated NVDIMM,
    fsdax. A busybox boot runs the oracle under `tdax run` with the
    write-back holding every record in the device, and is cut; then systemd
    boots, tdax-recover.service recovers the configured region, and the
    database stand-in, an ordinary service, checks the files as it starts.
    The last pair masks the unit (the control): the stand-in must find
    records missing, so the files were whole only by the unit's work."""
    rng = random.Random(seed)
    d = images("systemd")
    base = {"mem": "nvdimm", "backend": "fsdax", "check": 0, "lie": 0, "hold": 1, "mode": "coherent"}
    systemd = ("rdinit=/lib/systemd/systemd systemd.unit=multi-user.target systemd.show_status=0 "
               "systemd.default_standard_output=tty systemd.default_standard_error=tty")
    rows = []
    for i in range(cuts + 1):
        control = i == cuts
        args = dict(base, first=int(i == 0), run=1, policy="always" if i % 2 == 0 else "thesis")
        lines, how = boot(d, "nvdimm", vmlinux, initrd, args, rng.uniform(0.2, 2.0))
        shutil.copy2(d / "console.log", d / f"console-{2 * i}.log")
        fail = next((ln[5:] for ln in lines if ln.startswith("FAIL")), None)
        if fail or how != "cut":
            rows.append({"scenario": "systemd", "cut": i + 1, "control": control, "acked": 0, "lost": 0,
                         "fail": fail or f"the run boot ended by {how}", "tail": log_tail(d)})
            break
        keep_acks(d)
        t0 = time.time()
        mask = " systemd.mask=tdax-recover.service" if control else ""
        lines, how = boot(d, "nvdimm", vmlinux, initrd, dict(base, first=0, run=0, policy="always"), None,
                          systemd + mask)
        shutil.copy2(d / "console.log", d / f"console-{2 * i + 1}.log")
        got, unit = parse_check(lines), parse_unit(lines)
        row = {"scenario": "systemd", "cut": i + 1, "control": control, "acked": got[0] if got else 0,
               "lost": got[1] if got else 0, "boot_s": round(time.time() - t0, 1),
               "recover": "tdax-recover.service " + " ".join(f"{k}={v}" for k, v in unit.items())}
        fail = next((ln[5:] for ln in lines if ln.startswith("FAIL")), None)
        if fail is None and (how != "exit 0" or "DONE" not in lines):
            fail = f"the systemd boot ended by {how} before the database stand-in was DONE"
        elif fail is None and not got:
            fail = "no CHECK line"
        elif fail is None and control:
            if unit.get("state") == "active":
                fail = "the masked tdax-recover.service ran"
            elif row["lost"] == 0:
                fail = "the unit was masked and no record was missing: the check cannot tell a recovered boot"
        elif fail is None:
            ok = (unit.get("state") == "active" and unit.get("result") == "success" and unit.get("status") == "0"
                  and 0 < int(unit.get("exited_at") or 0) <= int(unit.get("started_at") or 0))
            if not ok:
                fail = f"tdax-recover.service did not end well before the database started: {row['recover']}"
            elif row["lost"]:
                fail = f"{row['lost']} acknowledged records lost; {row['recover']}"
        if fail:
            row.update(fail=fail, tail=log_tail(d))
        rows.append(row)
        if fail:
            break
    drop_images(d, rows)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuts", type=int, default=int(os.environ.get("CUTS", 5)),
                    help="power cuts per scenario, besides the control (default 5)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="guests at once")
    ap.add_argument("--json", help="write every row here")
    a = ap.parse_args()
    names = a.scenarios.split(",")
    if set(names) - set(SCENARIOS):
        sys.exit(f"vmtest: unknown scenario {sorted(set(names) - set(SCENARIOS))}; known: {','.join(SCENARIOS)}")
    if not shutil.which(QEMU):
        print("vmtest: SKIPPED: qemu-system-x86_64 is not installed "
              "(scripts/deps.sh qemu-system-x86 ndctl busybox-static cpio installs it)")
        sys.exit(77)
    if os.geteuid() != 0:
        sys.exit("vmtest: needs root (apt-get download, depmod on the unpacked kernel)")
    t0 = time.time()
    tree, vmlinux, release = kernel()
    initrd = initramfs(tree, release)
    print(f"vmtest: kernel {release}, seed {a.seed}, {a.cuts} cuts + 1 control per scenario, "
          f"{a.jobs} guests at once", flush=True)
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        futs = {n: ex.submit(scenario, n, a.cuts, a.seed * 100 + SCENARIOS.index(n), vmlinux, initrd)
                for n in names}
        rows = {n: f.result() for n, f in futs.items()}
    print(f"{'scenario':<16}{'cuts':>5}{'acked':>9}{'lost':>6}  {'control':<10}{'result':<6}")
    failed = passed = 0
    for n in names:
        real = [r for r in rows[n] if not r["control"]]
        ctl = [r for r in rows[n] if r["control"]]
        bad = [r for r in rows[n] if "fail" in r]
        ok = not bad and len(real) == a.cuts and len(ctl) == 1
        passed, failed = passed + ok, failed + (not ok)
        print(f"{n:<16}{len(real):>5}{sum(r['acked'] for r in real):>9}{sum(r['lost'] for r in real):>6}  "
              f"{('lost %d' % ctl[0]['lost']) if ctl else '-':<10}{'PASS' if ok else 'FAIL':<6}")
        for r in bad:
            print(f"  cut {r['cut']}: {r['fail']}\n    guest log tail:")
            print("\n".join("      " + ln for ln in r.get("tail", [])))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    print(f"vmtest: {sum(len([r for r in rows[n] if not r['control']]) for n in names)} real power cuts "
          f"in {time.time() - t0:.0f} s; logs in {WORK / 'run'}")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
