"""Shared fixtures: paths of the built binaries, scratch devices and files.

The suites run the test build (build/test: the product plus the test aids
of src/core/testaid.h, such as the durable shadow the power cuts need); TDAX_PRODUCT
is the product build, for the tests that check what ships (test_product.py)."""
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
TDAX = BUILD / "test" / "bin" / "tdax"        # preloads build/test/lib/libtdax.so
TDAX_PRODUCT = BUILD / "bin" / "tdax"        # preloads build/lib/libtdax.so
LOGWRITER = BUILD / "tests" / "logwriter"

# A configuration file on this machine (/etc/tdax/tdax.conf) must not steer
# the tests: none is read unless a test names one (test_config.py).
os.environ["TDAX_CONFIG"] = ""

sys.path.insert(0, str(ROOT / "tests" / "crash"))
import crashtest  # noqa: E402


def run(*args, check=None, env=None, user=None, **kw):
    """Run a command, capture text output; check=N asserts the exit status."""
    cmd = [str(a) for a in args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] + cmd
    full_env = dict(os.environ)
    full_env.pop("TDAX_DEVICE", None)
    full_env.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=120, **kw)
    if check is not None:
        assert p.returncode == check, f"{cmd} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


@pytest.fixture
def device():
    """A fresh path for a device region on /dev/shm (removed afterwards)."""
    path = f"/dev/shm/tdax-pytest-{uuid.uuid4().hex[:12]}"
    yield path
    if os.path.exists(path):
        os.unlink(path)


@pytest.fixture
def diskdir():
    """A scratch directory on the disk (not tmpfs), world-traversable."""
    d = tempfile.mkdtemp(prefix="tdax-pytest-", dir="/var/tmp")
    os.chmod(d, 0o755)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


PY = sys.executable
# Under test: quiet, no background checkpoints unless asked, and a durable
# view of every file kept beside it at each real sync (see src/core/shadow.h).
TDAX_ENV = {"TDAX_QUIET": "1", "TDAX_WB_AGE_MS": "3600000", "TDAX_TEST_DURABLE_SHADOW": "1"}


def tdax_run(device, code, *args, policy="always", env=None, check=0, **kw):
    """Run Python code under `tdax run` on the given device."""
    e = dict(TDAX_ENV)
    e.update(env or {})
    return run(TDAX, "run", "--device", device, "--policy", policy, "--", PY, "-c", code, *args,
               env=e, check=check, **kw)


def info(device):
    return json.loads(run(TDAX, "device", "info", "--device", device, "--json", check=0).stdout)


def counters_once(device, done, timeout=10.0):
    """The device's counters once done(counters) holds, or as they are after
    timeout seconds (the caller asserts): a running process's counts reach
    the device at its write-back thread's next pass, 10 ms apart, later on
    a loaded machine."""
    end = time.monotonic() + timeout
    while True:
        c = info(device)["counters"]
        if done(c) or time.monotonic() > end:
            return c
        time.sleep(0.02)


def power_cut(device, path):
    """Simulate a power failure for one file: the page cache is lost, so the
    file falls back to what its last real sync made durable (the shadow
    copy tdax kept under TDAX_TEST_DURABLE_SHADOW); the device survives.
    Then recover, as after a reboot."""
    shadow = Path(str(path) + ".tdax-durable")
    durable = shadow.read_bytes() if shadow.exists() else b""
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(durable)
    return json.loads(run(TDAX, "recover", "--device", device, "--power-failure", "--json",
                          check=0).stdout)


@pytest.fixture
def dev(device):
    """A created device region (64 MiB)."""
    run(TDAX, "device", "create", "--device", device, "--size", "64M", check=0)
    return device


@pytest.fixture
def voldisk(tmp_path):
    """ext4 on a volatile disk (tests/crash/voldisk.c) at .mnt: .cut() loses
    every write not flushed, as a power cut does; .reboot() mounts what
    survived; writing "eio" to .fuse / "ctl" makes every flush fail."""
    os.chmod(tmp_path, 0o755)
    disk = crashtest.Disk(tmp_path, "lose-all", 1)
    yield disk
    disk.destroy()


def build_both(tmp_path_factory, name, source, *flags):
    """The C program source built twice in a directory of its own: `name`
    (dynamic: the libc hooks see it) and `name-static` (only --intercept
    syscall does; TDAX_TEST_STATIC defined). The directory."""
    d = tmp_path_factory.mktemp(name)
    (d / f"{name}.c").write_text(source)
    run("cc", "-O2", "-o", d / name, d / f"{name}.c", *flags, check=0)
    run("cc", "-O2", "-static", "-DTDAX_TEST_STATIC", "-o", d / f"{name}-static", d / f"{name}.c", *flags, check=0)
    return d


# The head of a C program acked_under_tdax runs: must() fails it with the
# call's error; acked() says "acked" (what it wrote and synced) and waits
# for the kill. (_GNU_SOURCE first: it must come before any header.)
ACKED_C = r"""#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>
static void must(int ok, const char *what) { if (!ok) { perror(what); _exit(1); } }
static void acked(void) { printf("acked\n"); fflush(stdout); pause(); }
"""

# After ACKED_C, for the cases of a write tdax cannot see (aio, io_uring, a
# Go library): synced_ab(path) makes the file and writes A then B over its
# first 8 KiB, each synced (light under policy always), and returns its
# descriptor; the case then writes 50 C at 100 its own way and syncs.
# OVER_AB is what the file then holds.
SYNCED_AB_C = r"""
#include <fcntl.h>
#include <string.h>
static char buf[8192];
static int synced_ab(const char *path) {
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	must(fd >= 0 && fsync(fd) == 0, "open");
	memset(buf, 'A', sizeof(buf));
	must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fsync(fd) == 0, "A");
	memset(buf, 'B', sizeof(buf));
	must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fsync(fd) == 0, "B");
	return fd;
}
"""
OVER_AB = b"B" * 100 + b"C" * 50 + b"B" * (8192 - 150)


def made_durable(directory, files):
    """Files {path: bytes} in directory, made durable without tdax (each
    synced, then the directory): their creation is not what a test is
    about."""
    for path, data in files.items():
        with open(path, "wb") as out:
            out.write(data)
            os.fsync(out.fileno())
    dirfd = os.open(directory, os.O_RDONLY)
    os.fsync(dirfd)
    os.close(dirfd)


def acked_under_tdax(dev, progs, name, intercept, *args, mode="coherent", shell=None):
    """Program `name` of build_both's directory progs (its static build
    under --intercept syscall) run with args under tdax, --policy always,
    in a session of its own, once it has printed "acked" (what it wrote
    and synced): the process, for killed_and_cut (a failure saying what it
    does if it has not within 60 s). shell: a script for sh -c that runs
    the program ("$0", its arguments "$@") its own way."""
    exe = progs / (f"{name}-static" if intercept == "syscall" else name)
    command = [str(exe), *map(str, args)]
    if shell:
        command = ["sh", "-c", shell, *command]
    p = subprocess.Popen([str(TDAX), "run", "--device", dev, "--policy", "always", "--intercept", intercept,
                          "--mode", mode, "--", *command],
                         env={**os.environ, **TDAX_ENV, "TDAX_TEST_DURABLE_SHADOW": "0"},
                         stdout=subprocess.PIPE, text=True, start_new_session=True)
    if not select.select([p.stdout], [], [], 60)[0]:
        try:
            hung(p, 60)
        finally:
            crashtest.kill_tree([p])
    line = p.stdout.readline()
    assert line == "acked\n", line
    return p


def killed_and_cut(p, dev, voldisk):
    """SIGKILL the process group of p (started with start_new_session), cut
    the power of voldisk and boot it again, then recover the device as
    after a power failure."""
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    voldisk.cut()
    voldisk.reboot()
    r = run(TDAX, "recover", "--device", dev, "--power-failure", "--json")
    assert r.returncode == 0, r.stdout + r.stderr


def waited(p, timeout):
    """p's exit status, or a failure saying what every process of its tree
    was doing (state, kernel wait, signal masks, per thread) when the
    timeout ran out: a hang seen once is a hang explained."""
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        hung(p, timeout)


def hung(p, timeout):
    """A failure saying what every process of p's tree is doing (state,
    kernel wait, signal masks, per thread): the timeout ran out."""
    lines = []
    for q in crashtest.descendants(p.pid):
        for t in sorted(os.listdir(f"/proc/{q}/task")) if os.path.isdir(f"/proc/{q}/task") else []:
            base = f"/proc/{q}/task/{t}"
            try:
                status = dict(ln.split(":\t", 1) for ln in Path(base, "status").read_text().splitlines()
                              if ":\t" in ln)
                wchan = Path(base, "wchan").read_text()
                cmd = Path(f"/proc/{q}/cmdline").read_bytes().replace(b"\0", b" ")[:80].decode()
            except OSError:
                continue
            lines.append(f"{q}/{t} {status.get('Name')} {status.get('State')} wchan={wchan} "
                         + " ".join(f"{k}={status.get(k)}" for k in ("SigPnd", "ShdPnd", "SigBlk", "SigCgt"))
                         + f" [{cmd}]")
    pytest.fail(f"still running after {timeout} s:\n" + "\n".join(lines))


@contextmanager
def started(device, code, *args, env=None, policy="always", stdin=None):
    """Python code under `tdax run` in a session of its own, stdout and
    stderr piped (stdin too with stdin=subprocess.PIPE); the whole tree is
    killed on the way out."""
    e = dict(os.environ, **{**TDAX_ENV, **(env or {})})
    p = subprocess.Popen([TDAX, "run", "--device", device, "--policy", policy, "--", PY, "-c", code,
                          *[str(a) for a in args]], stdin=stdin, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=e, start_new_session=True)
    try:
        yield p
    finally:
        crashtest.kill_tree([p])
