"""crashtest -- prove that nothing acknowledged is lost (issue #5).

Each round: a fresh ext4 on a loop device over a "volatile disk" (voldisk:
writes are lost unless an fsync reached it), a fresh tdax device on
/dev/shm (the persistent memory, outside the crash domain); a workload runs
under `tdax run` and records every acknowledgement in an oracle file on the
host disk. At a random instant the fault strikes; the disk comes back
(ext4 journal recovery), `tdax recover` runs, and every acknowledged record
must be there.

Fault models:
  sigkill       the application is SIGKILLed (page cache survives), `tdax run`
                too, then `tdax recover`
  sigkill-app   the application alone is SIGKILLed: checked before any recovery
                (bypass mode: `tdax run`, its parent, writes in what it deferred)
  peek          sigkill, after another program opened and read every file of the
                workload again and again while it ran (lease breaks, demotions)
  cut-all       power cut: SIGKILL everything, every unflushed disk write lost
  cut-random    power cut: a random subset of the unflushed writes survives
  cut-recovery  power cut, recovery SIGKILLed half-way and the power cut again,
                then recovery again
  cut-full      power cut with a device so small that the log fills: syncs fall
                back to the kernel while records are still being replayed
Positive control: `--control` runs cut-all with a lying tdax (TDAX_TEST_LIE=1:
syncs answered without logging, policy always, no background checkpoints); it
must lose acknowledged data every round.

The rounds run the product (build/bin/tdax); the test aids they need -- the
control's lie, cut-recovery's recovery that kills itself -- exist only in the
test build (build/test/bin/tdax, src/core/testaid.h), which those steps use.

usage: crashtest.py [--rounds N] [--apps raw,raw-always,raw-adaptive,raw-thesis,dax,sqlite-wal,sqlite-delete,
                                        sqlite-delete-always,sqlite-delete-heirs,sqlite-delete-thesis,redis,postgres,rocksdb,
                                        raw-bypass,raw-bypass-default,sqlite-wal-bypass,sqlite-delete-bypass,redis-bypass,rocksdb-bypass,
                                        redis-bypass-small,rocksdb-bypass-small,raw-intercept,sqlite-delete-intercept,rocksdb-intercept,
                                        etcd-rewrite,etcd-bypass,sqlite-delete-xfs,rocksdb-xfs]
                    [--faults sigkill,sigkill-app,peek,cut-all,cut-random,cut-recovery,cut-full] [--seed S] [--control]
                    [--jobs N] [--json FILE] [--round-seed S]
       crashtest.py --report FILE...   (one report over earlier runs' --json files)
exit status: 0 if nothing was lost (and the control lost data every round)
"""
import argparse
import base64
import concurrent.futures
import contextlib
import http.client
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib
from pathlib import Path

from workloads import etcd_ready

ROOT = Path(__file__).resolve().parents[2]
TDAX = str(ROOT / "build" / "bin" / "tdax")
TDAX_TEST = str(ROOT / "build" / "test" / "bin" / "tdax")  # with the test aids
VOLDISK = str(ROOT / "build" / "tests" / "tdax-voldisk")
ROCKSDB_CLIENT = str(ROOT / "build" / "tests" / "tdax-rocksdb-client")
DAXLOG = str(ROOT / "build" / "tests" / "tdax-daxlog")
WORKLOADS = str(Path(__file__).resolve().parent / "workloads.py")
PY = sys.executable
HDR = struct.Struct("<4sIQI")


def sh(*cmd, check=True, **kw):
    return subprocess.run([str(c) for c in cmd], check=check, capture_output=True, text=True, **kw)


class Disk:
    """ext4 (or XFS, fs="xfs") on a loop device over voldisk, mounted at self.mnt."""

    def __init__(self, base, mode, seed, fs="ext4"):
        self.base, self.mode, self.seed, self.fs = base, mode, seed, fs
        self.image, self.fuse, self.mnt = base / "image", base / "fuse", base / "mnt"
        for p in (self.fuse, self.mnt):
            p.mkdir(exist_ok=True)
        sh("truncate", "-s", "512M" if fs == "xfs" else "256M", self.image)  # XFS: 300 MiB at least
        self.attach()
        # No discard: the image is new, all zeros already, and a discard of
        # the whole disk through voldisk took ~1 s a round (of ~2).
        if fs == "xfs":
            sh("mkfs.xfs", "-q", "-f", "-K", self.loop)
        else:
            sh("mkfs.ext4", "-q", "-F", "-E", "nodiscard", self.loop)
        sh("blockdev", "--flushbufs", self.loop)
        self.mount()

    def attach(self):
        self.daemon = subprocess.Popen([VOLDISK, str(self.image), str(self.fuse), self.mode, str(self.seed)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if (self.fuse / "disk").exists():
                break
            time.sleep(0.01)
        self.loop_before, self.loop = getattr(self, "loop", None), \
            sh("losetup", "-f", "--show", self.fuse / "disk").stdout.strip()
        sh("blockdev", "--flushbufs", self.loop)  # no page of an earlier attachment

    def mount(self):
        # No periodic journal commit during a round: only syncs flush the disk.
        sh("mount", *(("-o", "commit=600") if self.fs == "ext4" else ()), self.loop, self.mnt)
        os.chmod(self.mnt, 0o777)

    def cut(self):
        """The power fails: the disk's cache is gone, then the machine is torn down."""
        (self.fuse / "ctl").write_text("cut")
        self.detach()

    def holders(self):
        """PIDs with a file or directory open under the mount point."""
        out = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                links = [os.readlink(f"/proc/{pid}/cwd")] + [
                    os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
            except OSError:
                continue
            if any(link.startswith(str(self.mnt)) for link in links):
                out.append(int(pid))
        return out

    def detach(self):
        for i in range(50):  # a process that just died may still hold a file for a moment
            r = sh("umount", self.mnt, check=False)
            if r.returncode == 0 or "not mounted" in r.stderr:
                break
            if i == 20:  # something of this round outlived it: it goes, as in a power cut
                for pid in self.holders():
                    print(f"  (killing pid {pid}, still holding {self.mnt})", flush=True)
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        else:
            raise RuntimeError(f"cannot unmount {self.mnt}: {r.stderr.strip()}")
        sh("losetup", "-d", self.loop, check=False)
        # The loop device lets go of the FUSE file a moment after losetup
        # returns (later on a busy machine): until then the unmount is refused.
        for _ in range(100):
            r = sh("fusermount3", "-u", self.fuse, check=False)
            if r.returncode == 0 or self.daemon.poll() is not None:
                break
            time.sleep(0.1)
        else:
            sh("fusermount3", "-u", "-z", self.fuse, check=False)
        self.daemon.wait(timeout=30)

    def destroy(self):
        """Detach, and remove the disk's image: a test's volatile disk is
        up to 256 or 512 MiB on the host, and pytest keeps the
        temporary directories of its last three runs."""
        self.detach()
        self.image.unlink(missing_ok=True)

    def reboot(self):
        """The disk comes back -- under another device number, as a disk
        may after a real reboot (loop devices, NVMe enumeration,
        device-mapper): its old loop device is held meanwhile, so recovery
        never leans on the number (XFS's f_fsid is the number)."""
        placeholder = self.base / "placeholder"
        if not placeholder.exists():
            placeholder.write_bytes(b"\0" * 65536)
        held = sh("losetup", self.loop, placeholder, check=False).returncode == 0
        try:
            self.attach()
        finally:
            if held:
                sh("losetup", "-d", self.loop_before, check=False)
        self.mount()


def descendants(pid):
    """pid and every process below it (PostgreSQL backends leave the
    session with setsid, so a process group is not enough)."""
    children = {}
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def shm_segments(pids):
    """The POSIX shared-memory segments (/dev/shm) the processes map: the
    dynamic shared memory of a PostgreSQL server, which a server killed
    with SIGKILL leaves behind for good."""
    segs = set()
    for q in pids:
        try:
            maps = Path(f"/proc/{q}/maps").read_text().splitlines()
        except OSError:
            continue
        for line in maps:
            f = line.split(None, 5)
            if len(f) == 6 and f[5].startswith("/dev/shm/PostgreSQL."):
                segs.add(f[5])
    return segs


def kill_tree(procs, spare=None):
    """The instant of the crash: freeze the workload and everything it
    started, then SIGKILL all of it, so that nothing runs on (an exit
    handler of a surviving child would sync and hide the cut). The shared
    memory of a PostgreSQL server among them goes too (a server's shared
    memory is not what a crash test is about, and /dev/shm would fill).
    spare: a program (path) whose processes live on -- `tdax run`, which
    then ends by itself once everything below it has died; returns them."""
    procs = procs if isinstance(procs, list) else [procs]
    pids = [q for p in procs for q in descendants(p.pid)]
    kept = [q for q in pids if spare and exe_of(q) == spare]
    pids = [q for q in pids if q not in kept]
    for q in pids:
        try:
            os.kill(q, signal.SIGSTOP)
        except ProcessLookupError:
            pass
    segs = shm_segments(pids)
    for q in pids:
        try:
            os.kill(q, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            if not kept:  # (the group: what left the tree; a spared one is in it)
                os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=30)
    for seg in segs:
        Path(seg).unlink(missing_ok=True)
    # Every process killed has ended before anything looks at the files:
    # a PostgreSQL backend still on its way out holds the server's System V
    # segment, and a checker's server started meanwhile refuses the data
    # directory ("pre-existing shared memory block is still in use").
    wait_gone(pids)
    return kept


def exe_of(pid):
    try:
        return os.path.realpath(f"/proc/{pid}/exe")
    except OSError:
        return None


def ended(pid):
    """Has every thread of pid ended (a zombie of another parent counts)?
    The leader is a zombie as soon as it has exited itself, while its other
    threads may still be on their way out -- and tdax counts a thread that
    has not ended as one still writing (src/core/util.c, tdax_task_alive)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for t in tasks:
        try:
            if Path(f"/proc/{pid}/task/{t}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX":
                return False
        except (OSError, IndexError):
            pass
    return True


def wait_gone(pids, timeout=30):
    """Until every thread of every process of pids has ended."""
    deadline = time.time() + timeout
    for q in pids:
        while not ended(q):
            if time.time() >= deadline:
                raise RuntimeError(f"process {q} ({exe_of(q)}) did not end within {timeout} s")
            time.sleep(0.01)


@contextlib.contextmanager
def peeking(d):
    """peek: while the workload runs, another program (this one, without
    tdax) opens and reads every file under d, again and again: each open of
    a file tdax holds breaks its lease (in bypass mode: the file is demoted
    first). Yields a list that ends up holding the number of files read."""
    done, count = threading.Event(), [0]

    def loop():
        while not done.is_set():
            for root, _, names in os.walk(d):
                for name in names:
                    try:
                        with open(os.path.join(root, name), "rb") as f:
                            f.read()
                        count[0] += 1
                    except OSError:
                        pass  # gone meanwhile (a rotated log, a journal)
            done.wait(0.02)
    t = threading.Thread(target=loop) if d else None
    if t:
        t.start()
    try:
        yield count
    finally:
        done.set()
        if t:
            t.join()


def free_port():
    """A loopback port that no outgoing connection takes meanwhile: one
    below the kernel's ephemeral range (bind to port 0 gives one of those,
    which any connect may take before the server -- or the checker, which
    starts it again on the same port -- binds it)."""
    lo = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    pick = random.SystemRandom()
    for _ in range(1000):
        port = pick.randrange(max(1024, lo - 20000), lo)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port below the ephemeral range ({lo})")


PGBIN = "/usr/lib/postgresql/15/bin"


def pg_ready(srv, sockdir, port, log):
    """Until the server srv answers; if it does not, why (its log)."""
    for _ in range(300):
        if sh(f"{PGBIN}/pg_isready", "-h", sockdir, "-p", port, check=False).returncode == 0:
            return
        if srv.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"postgres did not come up (exit {srv.poll()}): {log.read_text()[-600:]!r}")


def pg_start(argv, d, log, **kw):
    """A PostgreSQL server of data directory d/data, its log in log."""
    with open(log, "ab") as f:
        return subprocess.Popen(as_postgres(argv + ["-D", d / "data", "-p", kw.pop("port"), "-k", d,
                                                    "-c", "listen_addresses="]),
                                stdout=subprocess.DEVNULL, stderr=f, **kw)


def as_postgres(argv):
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"] + [str(a) for a in argv]


def start(app, d, oracle, device, env, tdax):
    # APP-always: the workload with every write logged, so that its
    # truncates are records, its files are created and removed with records
    # and its directory syncs are answered from the log (under the default
    # policy, adaptive, a file synced twice gets none). APP: under the
    # default, adaptive (its thresholds fall for a steady stream, and an
    # append stream's next range is upgraded before the stream reaches it,
    # docs/policy.md); APP-thesis under the thesis' policy. APP-heirs: under
    # the thesis' policy with U = 35, so that each new rollback journal takes
    # up the upgrade of the one removed before it (docs/policy.md, "Heirs").
    # APP-bypass: bypass mode under policy always, so that every file the
    # workload holds alone is promoted after its first sync (its writes are
    # then records only, docs/durability.md "Bypass mode"). APP-bypass-default:
    # bypass mode under the default policy, where files wait for their
    # registration: descriptors in unregistered mode live beside promoted
    # files. APP-bypass-small:
    # the same with a block cache of 2 % of the device (src/preload/cache.h),
    # far smaller than what the workload writes: blocks are evicted and
    # written into the files while it runs, and when the crash comes.
    # APP-intercept:
    # under policy always with every file call trapped by the seccomp filter
    # and made by tdax's supervisor (--intercept syscall: what a Go program
    # or a static binary runs under; docs/durability.md). APP-rewrite: a Go
    # APP under policy always with its runtime's system-call function
    # rewritten to call the hooks in its own process (--intercept rewrite,
    # what auto gives a dynamically linked Go program: plain etcd is that
    # under the default policy, etcd-bypass in bypass mode; etcd-intercept
    # is etcd under the supervisor, as a Go program tdax cannot rewrite
    # runs). APP-xfs: APP on
    # XFS (its f_fsid is its device number, its creates and removals are
    # journaled as XFS does them).
    policy = []
    app = app.removesuffix("-xfs")  # (its disk's file system: round_)
    if app.endswith("-bypass-default"):
        policy, app = ["--mode", "bypass"], app.removesuffix("-bypass-default")
    if app.endswith("-bypass-small"):
        env = dict(env, TDAX_BYPASS_SHARE_PCT="2")
        app = app.removesuffix("-small")
    if app.endswith("-bypass"):
        policy, app = ["--mode", "bypass", "--policy", "always"], app.removesuffix("-bypass")
    if app.endswith("-intercept"):
        policy, app = ["--policy", "always", "--intercept", "syscall"], app.removesuffix("-intercept")
    if app.endswith("-rewrite"):
        policy, app = ["--policy", "always", "--intercept", "rewrite"], app.removesuffix("-rewrite")
    for name in ("always", "adaptive", "thesis"):
        if app.endswith("-" + name):
            policy, app = ["--policy", name], app.removesuffix("-" + name)
    if app.endswith("-heirs"):
        policy, app = ["--policy", "thesis"], app.removesuffix("-heirs")
    pre = [tdax, "run", "--quiet", "--device", device] + policy + ["--"]
    if app == "postgres":
        sh("chown", "postgres:postgres", d)
        sh(*as_postgres([f"{PGBIN}/initdb", "-D", d / "data", "-A", "trust", "--data-checksums"]))
        port = free_port()
        srv = pg_start(pre + [f"{PGBIN}/postgres"], d, d / "postgres.log", port=port, env=env,
                       start_new_session=True)
        pg_ready(srv, d, port, d / "postgres.log")
        cli = subprocess.Popen([PY, WORKLOADS, app, str(d), str(oracle), str(port)], start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return [srv, cli]
    if app == "dax":
        return subprocess.Popen(pre + [DAXLOG, "run", str(d), str(oracle)], env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if app == "rocksdb":
        return subprocess.Popen(pre + [ROCKSDB_CLIENT, str(d / "db"), str(oracle)], env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if app == "etcd":
        port, peer = free_port(), free_port()
        # For the checker, which starts it again on them; beside the
        # oracle, out of the disk a cut loses.
        Path(f"{oracle}.ports").write_text(f"{port} {peer}")
        script = (f"{' '.join(pre)} {' '.join(etcd_argv(d, port, peer))} & "
                  f"exec {PY} {WORKLOADS} etcd {d} {oracle} {port}")
        return subprocess.Popen(["sh", "-c", script], env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if app == "redis":
        port = free_port()
        script = (f"{' '.join(pre)} redis-server --port {port} --bind 127.0.0.1 --dir {d} --appendonly yes "
                  f"--appendfsync always --save '' --auto-aof-rewrite-percentage 0 & "
                  f"for i in $(seq 200); do redis-cli -p {port} ping >/dev/null 2>&1 && break; sleep 0.02; done; "
                  f"exec {PY} {WORKLOADS} redis {d} {oracle} {port}")
        return subprocess.Popen(["sh", "-c", script], env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return subprocess.Popen(pre + [PY, WORKLOADS, app, str(d), str(oracle)], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ---- checkers: (acknowledged, lost, detail) ----------------------------------

def check_raw(d, oracle):
    """Every acknowledged record in its file: under the name it was written
    to, or the one a rename gave it (the oracle notes a rename before it
    happens, so either may hold it); records acknowledged in a file before
    the oracle notes its truncation may be gone. A scratch file a power
    cut brought back holds whole records only."""
    renamed, acked, scratch = {}, [], set()
    for line in oracle.read_text().splitlines():
        parts = line.split()
        if parts[0] == "rename":
            renamed[parts[1]] = parts[2]
        elif parts[0] == "truncate":
            acked = [a for a in acked if a[0] != parts[1]]
        elif parts[0] == "scratch":
            scratch.add(int(parts[1]))
        else:
            acked.append((parts[0], int(parts[1])))
    have, records = {}, {}
    for f in d.iterdir():
        data, pos, seqs = f.read_bytes(), 0, []
        while pos + HDR.size <= len(data):
            magic, n, seq, crc = HDR.unpack_from(data, pos)
            body = data[pos + HDR.size:pos + HDR.size + n]
            if magic != b"TDXO" or len(body) != n or zlib.crc32(body) != crc:
                break  # a torn tail: only writes in flight may be here
            seqs.append(seq)
            pos += HDR.size + n
        have[f.name], records[f.name] = set(seqs), seqs
    lost = [(n, s) for n, s in acked
            if s not in have.get(n, set()) and s not in have.get(renamed.get(n, ""), set())]
    # A scratch file back from the dead: if it is one that was acknowledged
    # (its first record says which), it holds both of its records.
    back = records.get("scratch", [])
    if back and back[0] in scratch and back != [back[0]] * 2:
        lost.append(("scratch", back[0]))
    return len(acked), len(lost), f"first lost: {lost[:3]}" if lost else ""


def check_sqlite(d, oracle):
    acked = [int(x) for x in oracle.read_text().split()]
    con = sqlite3.connect(d / "db")
    try:
        ok = con.execute("PRAGMA integrity_check").fetchone()[0]
        have = {r[0] for r in con.execute("SELECT id FROM t")}
    except sqlite3.DatabaseError as err:
        ok, have = f"error: {err}", set()
    finally:
        con.close()
    lost = [a for a in acked if a not in have]
    return len(acked), len(lost) + (ok != "ok"), f"integrity_check: {ok}; first lost: {lost[:3]}" if lost or ok != "ok" else ""


def redis_lost(srv, port, acked):
    """The acknowledged records the redis-server srv on port lacks, once it
    has loaded its AOF; OSError if it exits or hangs up (it exits when it
    refuses the AOF, after it began to listen)."""
    for _ in range(300):
        if srv.poll() is not None:
            raise ConnectionRefusedError(f"redis-server exited before it listened on port {port}")
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            break
        except OSError:
            time.sleep(0.02)
    else:
        raise ConnectionRefusedError(f"nothing listens on port {port} after 6 s")
    with s, s.makefile("rb") as f:
        for _ in range(600):  # until the AOF is loaded: meanwhile every command gets -LOADING
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            if f.readline() == b"+PONG\r\n":
                break
            time.sleep(0.02)
        lost = []
        for i in acked:
            k = b"k%d" % i
            s.sendall(b"*2\r\n$6\r\nEXISTS\r\n$%d\r\n%s\r\n" % (len(k), k))
            if f.readline() != b":1\r\n":
                lost.append(i)
        return lost


def check_redis(d, oracle):
    """redis-check-aof must call the last AOF valid (or cleanly truncated),
    and a redis-server started on the directory must hold every
    acknowledged key. A server that exits instead (an AOF it refuses) is a
    failed round that shows its exit status and log, never a crash of the
    harness."""
    acked = [int(x) for x in oracle.read_text().split()]
    aofs = sorted((d / "appendonlydir").glob("*.incr.aof"))
    chk = sh("redis-check-aof", aofs[-1], check=False).stdout if aofs else "no AOF"
    valid = "is valid" in chk or "truncated" in chk.lower()
    for _ in range(3):  # again on another port if another round's server took this one
        port = free_port()
        with tempfile.TemporaryFile() as log:
            srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d),
                                    "--appendonly", "yes", "--save", ""], stdout=log, stderr=subprocess.STDOUT)
            try:
                lost, err = redis_lost(srv, port, acked), None
            except OSError as e:
                lost, err = None, e
            finally:
                srv.terminate()
                status = srv.wait()
            log.seek(0)
            text = log.read().decode(errors="replace")
        if lost is not None:
            return len(acked), len(lost) + (not valid), (f"redis-check-aof: {chk.strip()[-120:]}; first lost: {lost[:3]}"
                                                         if lost or not valid else "")
        if "Address already in use" not in text:
            break
    return len(acked), len(acked) or 1, (f"redis-server on the recovered AOF failed ({err!r}, exit status {status}): "
                                         f"{text.strip()[-400:]!r}; redis-check-aof: {chk.strip()[-200:]}")


def etcd_argv(d, port, peer):
    url = f"http://127.0.0.1:{peer}"
    return ["etcd", "--name", "crash", "--data-dir", str(d / "etcd"), "--log-level", "error",
            "--listen-client-urls", f"http://127.0.0.1:{port}",
            "--advertise-client-urls", f"http://127.0.0.1:{port}",
            "--listen-peer-urls", url, "--initial-advertise-peer-urls", url,
            "--initial-cluster", f"crash={url}"]


def check_etcd(d, oracle):
    """etcd itself is the integrity check: it must start on what is left
    (it refuses a WAL it cannot read) and hold every acknowledged key."""
    import base64
    import http.client
    acked = [int(x) for x in oracle.read_text().split()]
    port, peer = (int(x) for x in Path(f"{oracle}.ports").read_text().split())
    srv = subprocess.Popen(etcd_argv(d, port, peer), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if not etcd_ready(port):
            srv.terminate()
            return len(acked), len(acked) or 1, f"etcd did not start: {srv.communicate()[1][-300:]!r}"
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        body = json.dumps({"key": base64.b64encode(b"k").decode(), "range_end": base64.b64encode(b"l").decode(),
                           "keys_only": True})
        c.request("POST", "/v3/kv/range", body, {"Content-Type": "application/json"})
        kvs = json.loads(c.getresponse().read()).get("kvs", [])
        have = {base64.b64decode(kv["key"]) for kv in kvs}
        lost = [i for i in acked if b"k%d" % i not in have]
    finally:
        srv.terminate()
        srv.wait()
    return len(acked), len(lost), f"first lost: {lost[:3]}" if lost else ""


def check_postgres(d, oracle):
    acked = [int(x) for x in oracle.read_text().split()]
    port = free_port()
    # Every process of the crashed server is gone (kill_tree, wait_gone):
    # its lock file is stale. PostgreSQL would take it for a live server's
    # if its PID now belonged to another process of user postgres (PIDs
    # wrap at 32768 here; another line's server may have it).
    (d / "data" / "postmaster.pid").unlink(missing_ok=True)
    srv = pg_start([f"{PGBIN}/postgres"], d, d / "checker.log", port=port)
    try:
        pg_ready(srv, d, port, d / "checker.log")
        conn = ["-h", d, "-p", str(port), "-U", "postgres"]
        rows = sh("psql", *conn, "-tAc", "SELECT id FROM t", "postgres", check=False)
        have = set(int(x) for x in rows.stdout.split()) if rows.returncode == 0 else set()
        am = sh(f"{PGBIN}/pg_amcheck", *conn, "--install-missing", "postgres", check=False)
    finally:
        srv.send_signal(signal.SIGINT)
        srv.wait(timeout=60)
    sums = sh(*as_postgres([f"{PGBIN}/pg_checksums", "--check", "-D", d / "data"]), check=False)
    lost = [a for a in acked if a not in have]
    bad = (am.returncode != 0) + (sums.returncode != 0) + (rows.returncode != 0)
    return len(acked), len(lost) + bad, (f"psql: {rows.stderr.strip()[-200:]}; pg_amcheck: {am.stdout[-200:]}"
                                         f"{am.stderr[-200:]}; pg_checksums: {sums.stdout[-200:]}"
                                         f"{sums.stderr[-200:]}; first lost: {lost[:3]}" if lost or bad else "")


def check_rocksdb(d, oracle):
    """ldb, RocksDB's own tool, checks the files and reads every key back
    (opening the database replays its WAL)."""
    acked = [int(x) for x in oracle.read_text().split()]
    db = f"--db={d / 'db'}"
    cons = sh("ldb", db, "checkconsistency", check=False)
    scan = sh("ldb", db, "scan", check=False)
    have = dict(line.split(" : ", 1) for line in scan.stdout.splitlines() if " : " in line)
    lost = [i for i in acked if have.get(f"k{i}") != f"v{i}" * (1 + i % 20)]
    bad = (cons.returncode != 0) + (scan.returncode != 0)
    return len(acked), len(lost) + bad, (f"ldb: {cons.stdout.strip()[-120:]} {cons.stderr.strip()[-200:]} "
                                         f"{scan.stderr.strip()[-200:]}; first lost: {lost[:3]}" if lost or bad else "")


CHECK = {"raw": check_raw, "dax": check_raw, "sqlite": check_sqlite, "redis": check_redis, "postgres": check_postgres,
         "rocksdb": check_rocksdb, "etcd": check_etcd}


def checker(app):
    """The checker of a line: by the workload its name starts with."""
    return CHECK[app.split("-")[0]]


def evictions(device):
    """Blocks the device's block caches have evicted (the counters the
    processes on it have flushed so far)."""
    info = json.loads(sh(TDAX, "device", "info", "--device", device, "--json").stdout)
    return info["counters"].get("cache_evictions", 0)


def round_(app, fault, seed, control, base):
    rng = random.Random(seed)
    os.chmod(base, 0o755)  # PostgreSQL runs as its own user
    device = f"/dev/shm/tdax-crash-{os.getpid()}"
    size = "8M" if fault == "cut-full" else "64M"  # cut-full: the log fills up, syncs fall back
    sh(TDAX, "device", "create", "--device", device, "--size", size, "--force", "--segment-size", "256K",
       *(["--owner", "postgres"] if app == "postgres" else []))
    if app.endswith("-heirs"):  # the journals' M is 40: upgraded from U = 35 on
        sh(TDAX, "set", "--device", device, "upgrade_threshold=35")
    if app == "raw-adaptive":  # ranges of 2 pages: the appends carry every 4 KiB
        sh(TDAX, "set", "--device", device, "granularity_order=1")
    oracle = base / "oracle"
    oracle.write_bytes(b"")  # the workload opens it without O_CREAT (workloads.open_oracle)
    disk = Disk(base, "keep-random" if fault == "cut-random" else "lose-all", seed,
                fs="xfs" if app.endswith("-xfs") else "ext4")
    procs = []
    try:
        d = disk.mnt / "app"
        d.mkdir()
        env = dict(os.environ, TDAX_QUIET="1")
        if control:  # every sync lies, and no background checkpoint syncs for real
            env.update(TDAX_TEST_LIE="1", TDAX_POLICY="always", TDAX_WB_AGE_MS="3600000", TDAX_WB_BYTES="1T")
        procs = start(app, d, oracle, device, env, TDAX_TEST if control else TDAX)
        deadline = time.time() + 20
        while time.time() < deadline and (not oracle.exists() or oracle.stat().st_size < 200):
            time.sleep(0.02)
        # (A peek's opens demote the files every 20 ms; cut-full's log leaves
        # no room for arenas.)
        needs_eviction = app.endswith("-bypass-small") and fault not in ("peek", "cut-full") and not control
        while needs_eviction and time.time() < deadline + 20 and not evictions(device):
            time.sleep(0.05)  # the crash comes once the cache has evicted: the line's point
        with peeking(d if fault == "peek" else None) as peeks:
            time.sleep(rng.uniform(0.2, 1.0))
        # sigkill-app: `tdax run` lives on (in bypass mode the parent of
        # the application, cli/supervise.h), and must write what the
        # application had in the device alone into its files by itself:
        # the check comes before any `tdax recover`.
        wait_gone(kill_tree(procs, spare=os.path.realpath(TDAX) if fault == "sigkill-app" else None))
        t0 = time.time()
        early = checker(app)(d, oracle) if fault == "sigkill-app" else None
        if fault in ("sigkill", "sigkill-app", "peek"):
            # (After the early check, which may have changed the files --
            # SQLite removes its WAL at close --, recovery only tidies up.)
            rec = sh(TDAX, "recover", "--device", device, "--json",
                     *(["--discard-unmatched"] if early else []), check=False)
            if rec.returncode:  # records left (3) after a kill: say which line and which files
                raise RuntimeError(f"{app} {fault} seed {seed}: tdax recover exited {rec.returncode}: "
                                   f"{rec.stdout.strip()} {rec.stderr.strip()}")
        else:
            disk.cut()
            disk.reboot()
            if fault == "cut-recovery":
                sh(TDAX_TEST, "recover", "--device", device, "--power-failure", check=False,
                   env=dict(os.environ, TDAX_TEST_RECOVER_KILL_AFTER=str(rng.randint(1, 40))))
                disk.cut()
                disk.reboot()
            rec = sh(TDAX, "recover", "--device", device, "--power-failure", "--json", check=False)
        recovery = time.time() - t0
        acked, lost, detail = early or checker(app)(d, oracle)
        report = json.loads(rec.stdout) if rec.stdout.startswith("{") else {}
        if rec.returncode not in (0, 3):  # 3: some files keep records (renamed or gone)
            lost, detail = lost + 1, f"tdax recover failed ({rec.returncode}): {rec.stderr.strip()} {detail}"
        if fault == "peek" and not peeks[0]:
            lost, detail = lost + 1, f"the peek read no file: it proves nothing. {detail}"
        evicted = evictions(device)
        if needs_eviction and not evicted:
            lost, detail = lost + 1, f"no block of the cache was evicted: the line proves nothing. {detail}"
        if lost and not control:
            detail += keep(d, seed)
        return {"app": app, "fault": fault, "seed": seed, "acked": acked, "lost": lost, "detail": detail,
                "recovery_s": round(recovery, 3), "torn": report.get("torn", 0),
                "replayed": report.get("applied", 0), "evicted": evicted}
    finally:
        kill_tree(procs)
        disk.detach()
        os.unlink(device)
        oracle.unlink(missing_ok=True)


def keep(d, seed):
    """Copy what a round that lost data left in d where it outlives the
    round (its disk is detached at the end), and say where."""
    kept = Path(f"/var/tmp/tdax-crash-kept-{seed}")
    try:
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(d, kept, symlinks=True)
        return f" (the files are kept in {kept})"
    except OSError as e:
        return f" (could not keep the files in {kept}: {e})"


def run_line(task):
    """One round of one line, in a directory of its own (a worker of --jobs
    runs it). A round whose harness fails (an exception, not a loss) is a
    failed round, a control round too, with the traceback as its detail:
    the other rounds and the report go on."""
    app, fault, control, seed = task
    try:
        with tempfile.TemporaryDirectory(prefix="tdax-crash-", dir="/var/tmp") as base:
            res = round_(app, fault, seed, control, Path(base))
    except Exception:
        res = {"app": app, "fault": fault, "seed": seed, "acked": 0, "lost": 1, "recovery_s": 0.0,
               "torn": 0, "replayed": 0, "evicted": 0, "broke": True,
               "detail": "the round failed: " + traceback.format_exc().strip().replace("\n", " | ")[-1500:]}
    res["control"] = control
    return res


def failed(res, control):
    """Did this round fail: its harness broke, or it lost data (a control
    round: it lost none)?"""
    return res.get("broke", False) or bool(res["lost"]) != control


def report(rows):
    """Print the table of rows, {(app, fault, control): [result, ...]}, and
    the verdict; return the exit status: 1 if an acknowledged record was lost
    or a control round lost nothing."""
    print(f"{'app':<24}{'fault':<18}{'rounds':>7}{'acked':>11}{'lost':>10}{'torn':>6}{'replayed':>11}{'recovery':>10}")
    bad = failed_rounds = 0
    for (app, fault, control), xs in rows.items():
        name = fault + (" (control)" if control else "")
        print(f"{app:<24}{name:<18}{len(xs):>7}{sum(x['acked'] for x in xs):>11}{sum(x['lost'] for x in xs):>10}"
              f"{sum(x['torn'] for x in xs):>6}{sum(x['replayed'] for x in xs):>11}"
              f"{max(x['recovery_s'] for x in xs):>9.2f}s")
        wrong = sum(1 for x in xs if failed(x, control))
        failed_rounds += wrong
        bad += bool(wrong)
        broke = sum(1 for x in xs if x.get("broke"))
        if control and wrong > broke:
            print(f"  CONTROL FAILED: the lying sync lost nothing in {wrong - broke} rounds")
        if broke:
            print(f"  THE HARNESS BROKE in {broke} rounds (each one's detail says how)")
    total = sum(len(xs) for xs in rows.values())
    has_control = any(line[2] for line in rows)
    print("crashtest: " + ("FAILED" if bad else "OK: nothing acknowledged was lost; the control was caught"
                           if has_control else "OK: nothing acknowledged was lost"))
    print(f"{total - failed_rounds} passed, {failed_rounds} failed")
    return 1 if bad else 0


def read_reports(files):
    """The rows of earlier runs' --json files, for one report over them all."""
    rows = {}
    for name in files:
        with open(name) as f:
            for n, text in enumerate(f, 1):
                if not text.strip():
                    continue
                try:
                    res = json.loads(text)
                    line = (res["app"], res["fault"], bool(res["control"]))
                except (ValueError, KeyError, TypeError) as e:
                    sys.exit(f"crashtest: {name}:{n}: not a round result of crashtest --json ({e})")
                rows.setdefault(line, []).append(res)
    if not rows:
        sys.exit(f"crashtest: no round results in {', '.join(files)}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", 3)))
    ap.add_argument("--apps", default="raw,raw-always,raw-adaptive,raw-thesis,dax,sqlite-wal,sqlite-delete,"
                    "sqlite-delete-always,sqlite-delete-heirs,sqlite-delete-thesis,redis,postgres,rocksdb,"
                    "raw-bypass,raw-bypass-default,sqlite-wal-bypass,sqlite-delete-bypass,redis-bypass,rocksdb-bypass,"
                    "redis-bypass-small,rocksdb-bypass-small,raw-intercept,sqlite-delete-intercept,rocksdb-intercept,"
                    "etcd-rewrite,etcd-bypass,sqlite-delete-xfs,rocksdb-xfs")
    ap.add_argument("--faults", default="sigkill,sigkill-app,peek,cut-all,cut-random,cut-recovery,cut-full")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--control", action="store_true", help="also run the positive control")
    ap.add_argument("--jobs", type=int, default=1, help="rounds run at once, each on its own disk and device")
    ap.add_argument("--json", help="append each round's result to this file (JSON lines) as it ends")
    ap.add_argument("--round-seed", type=int, help="run one round with this seed, as a failure prints it")
    ap.add_argument("--report", nargs="+", metavar="FILE",
                    help="run nothing: one report over the --json files of earlier runs")
    a = ap.parse_args()
    if a.report:
        sys.exit(report(read_reports(a.report)))
    if a.jobs < 1:
        sys.exit("crashtest: --jobs must be at least 1")
    if os.geteuid() != 0:
        sys.exit("crashtest: needs root (loop devices, mount, FUSE)")
    plan = [(app, f, False) for app in a.apps.split(",") for f in a.faults.split(",")]
    if a.control:
        plan += [(app, "cut-all", True) for app in ("raw", "dax", "sqlite-wal", "rocksdb")]
    rounds = 1 if a.round_seed is not None else a.rounds
    print(f"crashtest: seed {a.seed}, {rounds} rounds per line, {len(plan)} lines, {a.jobs} at once", flush=True)
    rows = {line: [] for line in plan}
    # Rounds outermost: a long run that is stopped has whole rounds of every
    # line. Results are taken in that order, whichever worker ends first.
    tasks = [(app, fault, control,
              a.round_seed if a.round_seed is not None else a.seed * 1000 + r * len(plan) + i)
             for r in range(rounds) for i, (app, fault, control) in enumerate(plan)]
    t0 = time.time()
    with concurrent.futures.ProcessPoolExecutor(a.jobs) if a.jobs > 1 else contextlib.nullcontext() as pool:
        results = pool.map(run_line, tasks) if pool else map(run_line, tasks)
        for n, res in enumerate(results):
            app, fault, control, seed = tasks[n]
            r = n // len(plan)
            rows[(app, fault, control)].append(res)
            if a.json:
                with open(a.json, "a") as f:
                    f.write(json.dumps(res) + "\n")
            if failed(res, control):
                what = (f"BROKE: {res['detail']}" if res.get("broke") else "the lying sync lost nothing"
                        if control else f"LOST: {res['detail']}")
                print(f"  {app} {fault} round {r + 1}: {what}  (reproduce: --apps {app} --faults {fault} "
                      f"--round-seed {seed})", flush=True)
            if rounds > 1 and n % len(plan) == len(plan) - 1:
                lost = sum(x["lost"] for line, xs in rows.items() if not line[2] for x in xs)
                print(f"crashtest: round {r + 1}/{rounds} of every line done in {time.time() - t0:.0f} s, "
                      f"{lost} acknowledged records lost so far", flush=True)
    sys.exit(report(rows))


if __name__ == "__main__":
    main()
