"""env -- what every suite needs: paths, devices, scratch directories on the
disk, free loopback ports, server processes that are always stopped (by
PID, their whole tree, within a bounded time), the signals that interrupt a
run (SIGINT and SIGTERM, even when inherited as ignored), and the machine
description stored with the results."""
import ctypes
import os
import platform
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)
ROOT = Path(__file__).resolve().parents[2]
TDAX = ROOT / "build" / "bin" / "tdax"
PGBIN = Path("/usr/lib/postgresql/15/bin")

_servers = set()  # Popen objects still running, stopped on exit or Ctrl-C
GRACE = 30      # seconds a server has to stop on its signal before it is killed
QUICK_GRACE = 3  # the same, once the run was interrupted: its data is thrown away


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM: raised where KeyboardInterrupt would be, so that
    subprocess.run kills the client it was waiting for."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_deferred = []  # signals that arrived while a server was being registered


def catch_signals():
    """SIGINT and SIGTERM interrupt the run (Interrupted), whatever their
    inherited disposition: a shell without job control starts background
    jobs with SIGINT ignored, and Python then leaves it ignored, so that
    `kill -INT` did nothing and every server went on running."""
    def handler(signum, frame):
        if _deferred and _deferred[0] is None:
            _deferred.append(signum)  # raised once the server is registered
            return
        raise Interrupted(signum)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)


def ignore_signals():
    """While every server is being stopped: a second Ctrl-C must not cut
    that short (it is bounded by QUICK_GRACE and SIGKILL)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


# The tdax configurations a bench column may name: a policy in coherent
# mode, or bypass mode ("bypass": under the default policy, adaptive, as
# `tdax run --mode bypass` runs; "bypass-POLICY" under another).
POLICIES = ("thesis", "adaptive", "always", "never")
COLUMNS = POLICIES + ("bypass",) + tuple(f"bypass-{p}" for p in POLICIES)


def tdax_prefix(mode, device, user=None):
    """The command prefix of a mode: 'default' runs the workload as is,
    a column of COLUMNS under `tdax run` with that policy and mode."""
    mode_args = []
    if mode.startswith("bypass"):
        mode_args, mode = ["--mode", "bypass"], mode.partition("-")[2] or "adaptive"
    pre = [] if mode == "default" else [str(TDAX), "run", "--quiet", "--device", device, *mode_args,
                                        "--policy", mode, "--"]
    if user:
        pre = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"] + pre
    return pre


def fresh_device(path, size="1G", owner=None, persistence=None):
    if os.path.exists(path):
        os.unlink(path)
    cmd = [str(TDAX), "device", "create", "--device", path, "--size", size]
    if owner:
        cmd += ["--owner", owner]
    if persistence:
        cmd += ["--persistence", persistence]
    subprocess.run(cmd, check=True, capture_output=True)
    return path


def set_tunables(device, **kv):
    if kv:
        subprocess.run([str(TDAX), "set", "--device", device] + [f"{k}={v}" for k, v in kv.items()],
                       check=True, capture_output=True)


@contextmanager
def scratch(prefix="tdax-bench-", owner=None):
    """A fresh directory on the disk (/var/tmp), removed afterwards, and
    everything written back before the next run starts."""
    d = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
    if owner:
        os.chmod(d, 0o755)
        shutil.chown(d, owner, owner)
    try:
        yield Path(d)
    except BaseException:
        shutil.rmtree(d, ignore_errors=True)  # interrupted: no sync, nothing runs next
        raise
    shutil.rmtree(d, ignore_errors=True)
    syncfs(d)  # the next run does not pay for this one's write-back


def syncfs(path):
    """Write back the file system holding path (the scratch directories'),
    not every file system of the machine as sync(2) would."""
    fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        if _libc.syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)



def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


@contextmanager
def server(argv, stop_signal=signal.SIGTERM, **kw):
    """Run a server for the duration of the block; stop it by its PID. A
    signal arriving while it starts is raised once it is registered, so
    that stop_all() knows every server there is."""
    _deferred[:] = [None]
    try:
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
        p.stop_signal = stop_signal
        _servers.add(p)
    finally:
        pending = _deferred[1:]
        _deferred.clear()
    if pending:
        stop(p, quick=True)
        raise Interrupted(pending[0])
    try:
        yield p
    finally:
        stop(p)


def descendants(pid):
    """Every process below pid (a server's workers), through /proc."""
    out, todo = [], [pid]
    while todo:
        q = todo.pop()
        for task in os.listdir(f"/proc/{q}/task") if os.path.isdir(f"/proc/{q}/task") else []:
            try:
                kids = [int(k) for k in open(f"/proc/{q}/task/{task}/children").read().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def stop(p, sig=None, quick=False):
    """Stop a server by its PID: its stop signal, then, after a grace
    period, SIGKILL to it and every process below it (collected first: a
    killed PostgreSQL leaves its backends to init)."""
    if p.poll() is None:
        p.send_signal(sig or getattr(p, "stop_signal", signal.SIGTERM))
        try:
            p.wait(timeout=QUICK_GRACE if quick else GRACE)
        except subprocess.TimeoutExpired:
            for q in [p.pid] + descendants(p.pid):
                try:
                    os.kill(q, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait()
    _servers.discard(p)


def stop_all(quick=True):
    for p in list(_servers):
        stop(p, quick=quick)


def scratch_fs(path="/var/tmp"):
    """The file system the scratch directories are on: its type and source
    (the mount with the longest mount point above path)."""
    best = ("", "?", "?")
    for line in open("/proc/mounts"):
        src, mnt, fstype = line.split()[:3]
        if (path + "/").startswith(mnt.rstrip("/") + "/") and len(mnt) >= len(best[0]):
            best = (mnt, fstype, src)
    return f"{best[1]} on {best[2]}"


def machine():
    def version(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "not installed"
    return {
        "scratch": scratch_fs(),
        "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
        "redis": version(["redis-server", "--version"]),
        "postgres": version([str(PGBIN / "postgres"), "--version"]),
        "rocksdb db_bench": version(["dpkg-query", "-W", "-f=${Version}", "rocksdb-tools"]),
        "sqlite": version(["sqlite3", "--version"]), "fio": version(["fio", "--version"]),
        "tdax": version(["git", "-C", str(ROOT), "describe", "--always", "--dirty"]),
    }
