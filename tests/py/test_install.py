"""Installing tdax (issue #22): `make install` / `make uninstall` with PREFIX
and DESTDIR, `make deb` (and lintian's verdict on it), an installed tdax that
runs from its own paths, the man page, bash completion and the boot-time
recovery unit (dist/)."""
import json
import os
import re
import shlex
import shutil
from pathlib import Path

from conftest import PY, ROOT, TDAX_ENV, run

VERSION = (ROOT / "VERSION").read_text().strip()
SIM = sorted(p.name for p in (ROOT / "bench" / "tdaxsim").glob("*.py"))


def installed(prefix, unitdir, man="tdax.1", conf=None):
    """What an install under prefix holds (paths relative to the root); the
    example configuration at conf (the package's /etc/tdax/tdax.conf)."""
    lib = f"{prefix}/lib/tdax"
    return {f"{prefix}/bin/tdax", f"{lib}/libtdax.so", f"{lib}/libtdaxtrack.so",
            f"{prefix}/share/man/man1/{man}", f"{prefix}/share/bash-completion/completions/tdax",
            f"{unitdir}/tdax-recover@.service", f"{unitdir}/tdax-recover.service",
            conf or f"{prefix}/share/doc/tdax/tdax.conf.example", f"{prefix}/include/tdax.h"} | {
                f"{lib}/python/tdaxsim/{n}" for n in SIM}


def files_under(root):
    return {"/" + str(p.relative_to(root)) for p in Path(root).rglob("*") if not p.is_dir()}


def make(*args):
    return run("make", "-s", "--no-print-directory", "-C", ROOT, *args, check=0)


def commands():
    """The commands `tdax --help` lists."""
    out = run(ROOT / "build" / "bin" / "tdax", "--help", check=0).stdout
    return {m.group(1) for m in re.finditer(r"^  (\w+)", out, re.M)}


def test_install_puts_every_file_under_destdir_and_uninstall_removes_them(tmp_path):
    make("install", f"DESTDIR={tmp_path}", "PREFIX=/usr")
    assert files_under(tmp_path) == installed("/usr", "/usr/lib/systemd/system")
    unit = (tmp_path / "usr/lib/systemd/system/tdax-recover@.service").read_text()
    assert "ExecStart=/usr/bin/tdax recover --device %f" in unit
    unit = (tmp_path / "usr/lib/systemd/system/tdax-recover.service").read_text()
    assert "ExecStart=/usr/bin/tdax recover --configured" in unit
    assert f'"tdax {VERSION}"' in (tmp_path / "usr/share/man/man1/tdax.1").read_text()
    make("uninstall", f"DESTDIR={tmp_path}", "PREFIX=/usr")
    assert files_under(tmp_path) == set()
    assert not (tmp_path / "usr/lib/tdax").exists()


def test_an_installed_tdax_runs_from_its_own_paths(tmp_path, device, diskdir):
    """Installed anywhere (PREFIX, no build tree beside it), tdax preloads its
    own libtdax.so, answers syncs from the device, recovers, and its
    simulator runs the installed policy code with the system's python3."""
    prefix = tmp_path / "prefix"
    make("install", f"PREFIX={prefix}")
    tdax = prefix / "bin" / "tdax"
    assert run(tdax, "--version", check=0).stdout.startswith(f"tdax {VERSION} (build ")
    run(tdax, "device", "create", "--device", device, "--size", "64M", check=0)
    trace = diskdir / "t.trace"
    code = ("import os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)\n"
            "for i in range(300):\n"
            "    os.write(fd, b'x' * 128); os.fdatasync(fd)\n"
            "print(os.environ['LD_PRELOAD'])\n")
    p = run(tdax, "run", "--device", device, "--trace", trace, "--", PY, "-c", code, diskdir / "log",
            env=TDAX_ENV, check=0)
    assert p.stdout.strip() == str(prefix / "lib" / "tdax" / "libtdax.so")
    c = json.loads(run(tdax, "status", "--device", device, "--json", check=0).stdout)["counters"]
    assert c["light_syncs"] > 250, c
    run(tdax, "recover", "--device", device, check=0)
    env = {"PATH": "/usr/bin:/bin"}  # the system's python3, not the test venv's
    sim = json.loads(run(tdax, "sim", trace, "--policy", "thesis", "--json", env=env, check=0).stdout)
    assert sim["light_syncs"] + sim["real_syncs"] == 300 and sim["light_syncs"] > 250, sim
    assert not list(prefix.rglob("__pycache__"))  # nothing that uninstall would leave
    p = run(tdax, "bench", "log")
    assert p.returncode == 1 and "runs from a tdax source tree" in p.stderr


def test_an_application_builds_against_the_installed_api(tmp_path, device, diskdir):
    """include/tdax.h as installed: a C program built with the header and
    the library from PREFIX alone, run under the installed tdax, has its
    persists answered from the device."""
    prefix = tmp_path / "prefix"
    make("install", f"PREFIX={prefix}")
    src = tmp_path / "app.c"
    src.write_text(
        "#include <fcntl.h>\n#include <string.h>\n#include <unistd.h>\n#include <tdax.h>\n"
        "int main(int argc, char **argv) {\n"
        "  int fd = open(argv[1], O_RDWR | O_CREAT, 0644);\n"
        "  if (fd < 0 || ftruncate(fd, 65536) != 0) return 2;\n"
        "  char *p = tdax_map(fd, 0, 65536, TDAX_MAP_PIN);\n"
        "  if (!p) return 3;\n"
        "  for (int i = 0; i < 100; i++) {\n"
        "    memcpy(p + 8 * i, \"record!\\n\", 8);\n"
        "    if (tdax_persist(p + 8 * i, 8) != 0) return 4;\n"
        "  }\n"
        "  return tdax_unmap(p, 65536) == 0 ? 0 : 5;\n}\n")
    lib = prefix / "lib" / "tdax"
    run("cc", "-Wall", "-Werror", f"-I{prefix}/include", src, "-o", tmp_path / "app", f"-L{lib}", "-ltdax",
        f"-Wl,-rpath,{lib}", check=0)
    tdax = prefix / "bin" / "tdax"
    run(tdax, "device", "create", "--device", device, "--size", "64M", check=0)
    run(tdax, "run", "--device", device, "--", tmp_path / "app", diskdir / "log", env=TDAX_ENV, check=0)
    assert (diskdir / "log").read_bytes()[:800] == b"record!\n" * 100
    c = json.loads(run(tdax, "status", "--device", device, "--json", check=0).stdout)["counters"]
    assert c["persists"] == 100 and c["persists_real"] == 0, c


def test_the_recovery_units_verify(tmp_path):
    """systemd-analyze verify: the units' keys, ordering, command and
    documentation (the template as an instance, as `systemctl enable
    tdax-recover@PATH` makes one; the man page found where it was
    installed)."""
    prefix = tmp_path / "prefix"
    make("install", f"PREFIX={prefix}")
    units = {"tdax-recover@dev-dax0.0.service": "tdax-recover@.service",
             "tdax-recover.service": "tdax-recover.service"}
    for name, source in units.items():
        unit = tmp_path / name
        shutil.copy(prefix / "lib/systemd/system" / source, unit)
        p = run("systemd-analyze", "verify", unit, env={"MANPATH": str(prefix / "share" / "man")})
        assert p.returncode == 0 and p.stderr == "", (name, p.stderr)
        text = unit.read_text()
        assert "Before=sysinit.target" in text and "After=local-fs.target" in text


def test_man_page_and_completion_know_every_command():
    want = commands()
    assert {"run", "recover", "status", "device", "sim"} <= want
    man = (ROOT / "dist" / "tdax.1").read_text()
    assert not (want - set(re.findall(r"^\.B (\w+)", man, re.M))), want
    p = run("groff", "-man", "-ww", "-z", ROOT / "dist" / "tdax.1")
    assert p.returncode == 0 and p.stderr == "", p.stderr

    def complete(line):
        words = line.split(" ")
        script = ("source /usr/share/bash-completion/bash_completion; source %s; "
                  "COMP_WORDS=(%s); COMP_CWORD=%d; COMP_LINE='%s'; COMP_POINT=%d; _tdax; "
                  "echo \"${COMPREPLY[*]}\"" % (ROOT / "dist" / "tdax.bash",
                                                " ".join(shlex.quote(w) for w in words),
                                                len(words) - 1, line, len(line)))
        return set(run("bash", "-c", script, check=0).stdout.split())

    assert want | {"--version", "--help"} == complete("tdax ")
    assert complete("tdax ru") == {"run"}
    assert complete("tdax device c") == {"create"}
    assert complete("tdax run --policy a") == {"adaptive", "always"}


def debian_package():
    """make deb; the package it builds."""
    make("deb")
    arch = run("dpkg", "--print-architecture", check=0).stdout.strip()
    return ROOT / "build" / f"tdax_{VERSION}_{arch}.deb"


def test_the_debian_package_holds_the_install_and_installs_and_removes_cleanly(tmp_path):
    """make deb; the package unpacked by dpkg into a root of its own (the
    system's dpkg database untouched): the installed tdax runs, and removal
    leaves nothing."""
    deb = debian_package()
    fields = run("dpkg-deb", "--field", deb, "Package", "Version", "Depends", check=0).stdout
    assert f"Version: {VERSION}" in fields and "libisal2" in fields
    listed = {line.split()[-1][1:] for line in run("dpkg-deb", "-c", deb, check=0).stdout.splitlines()
              if not line.startswith("d")}
    assert listed == installed("/usr", "/lib/systemd/system", man="tdax.1.gz",
                               conf="/etc/tdax/tdax.conf") | {
                                   "/usr/share/doc/tdax/copyright", "/usr/share/doc/tdax/changelog.gz",
                                   "/usr/share/lintian/overrides/tdax"}
    conffiles = run("dpkg-deb", "--info", deb, "conffiles", check=0).stdout.split()
    assert conffiles == ["/etc/tdax/tdax.conf"]
    root = tmp_path / "root"
    for d in ("var/lib/dpkg/updates", "var/lib/dpkg/info"):
        (root / d).mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text("")
    dpkg = ["dpkg", f"--root={root}", "--force-depends", "--force-script-chrootless",
            "--force-not-root"]
    env = {"PATH": os.environ["PATH"]}
    run(*dpkg, "-i", deb, env=env, check=0)
    assert run(root / "usr/bin/tdax", "--version", check=0).stdout.startswith(f"tdax {VERSION}")
    # The shipped configuration is valid and sets nothing.
    p = run(root / "usr/bin/tdax", "config", "check", root / "etc/tdax/tdax.conf", check=0)
    assert p.stdout.splitlines()[1:] == [], p.stdout
    run(*dpkg, "--purge", "tdax", env=env, check=0)
    left = {f for f in files_under(root) if not f.startswith("/var/lib/dpkg/")}
    assert left == set(), left
    assert not (root / "usr/lib/tdax").exists()


def test_lintian_finds_no_error_or_warning_in_the_debian_package():
    """lintian on the package make deb builds: no error (E:) and no warning
    (W:), and no override in usr/share/lintian/overrides/tdax (what is so by
    design, each with its reason) that no longer matches anything. lintian
    comes with scripts/deps.sh: its absence is a failure, not a skip."""
    lintian = shutil.which("lintian")
    assert lintian, "lintian is not installed: run scripts/deps.sh (as root), which installs it"
    deb = debian_package()
    p = run(lintian, "--info", "--display-info", deb)
    out = p.stdout + p.stderr
    bad = [line for line in out.splitlines()
           if re.match(r"[EW]: ", line) or re.match(r"I: \S+: (unused|mismatched)-override", line)]
    assert p.returncode == 0 and not bad, f"lintian {deb} -> {p.returncode}\n{out}"
