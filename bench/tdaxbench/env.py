"""env -- what every suite needs: paths, devices, scratch directories on the
disk, free loopback ports, server processes that are always stopped (by
PID), and the machine description stored with the results."""
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

ROOT = Path(__file__).resolve().parents[2]
TDAX = ROOT / "build" / "bin" / "tdax"
PGBIN = Path("/usr/lib/postgresql/15/bin")

_servers = set()  # Popen objects still running, stopped on exit or Ctrl-C


# The tdax configurations a bench column may name: a policy in coherent
# mode, or bypass mode ("bypass": under the default policy, adaptive, as
# `tdax run --mode bypass` runs; "bypass-POLICY" under another).
POLICIES = ("thesis", "adaptive", "always", "never")
COLUMNS = POLICIES + ("bypass",) + tuple(f"bypass-{p}" for p in POLICIES)


def tdax_prefix(mode, device, user=None, extra=()):
    """The command prefix of a mode: 'default' runs the workload as is,
    a column of COLUMNS under `tdax run` with that policy and mode (and
    the run options in extra)."""
    mode_args = list(extra)
    if mode.startswith("bypass"):
        mode_args, mode = mode_args + ["--mode", "bypass"], mode.partition("-")[2] or "adaptive"
    pre = [] if mode == "default" else [str(TDAX), "run", "--quiet", "--device", device, *mode_args,
                                        "--policy", mode, "--"]
    if user:
        pre = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"] + pre
    return pre


def fresh_device(path, size="1G", owner=None):
    if os.path.exists(path):
        os.unlink(path)
    cmd = [str(TDAX), "device", "create", "--device", path, "--size", size]
    if owner:
        cmd += ["--owner", owner]
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
    finally:
        shutil.rmtree(d, ignore_errors=True)
        os.sync()  # the next run does not pay for this one's write-back



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
    """Run a server for the duration of the block; stop it by its PID."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
    _servers.add(p)
    try:
        yield p
    finally:
        stop(p, stop_signal)


def stop(p, sig=signal.SIGTERM):
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    _servers.discard(p)


def stop_all():
    for p in list(_servers):
        stop(p)


def machine():
    def version(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "not installed"
    return {
        "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
        "redis": version(["redis-server", "--version"]),
        "postgres": version([str(PGBIN / "postgres"), "--version"]),
        "rocksdb db_bench": version(["dpkg-query", "-W", "-f=${Version}", "rocksdb-tools"]),
        "sqlite": version(["sqlite3", "--version"]), "fio": version(["fio", "--version"]),
        "tdax": version(["git", "-C", str(ROOT), "describe", "--always", "--dirty"]),
    }
