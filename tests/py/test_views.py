"""Mappings that cannot write a managed file (src/preload/views.h): a
shared read-only mapping (LMDB's data file, SQLite's with mmap_size) or a
private one leaves the file's syncs lightweight, since every write still
comes through write() and its kin; the first call that could make a shared
one writable -- mprotect, pkey_mprotect, by libc or by syscall(2), or an
mremap tdax cannot follow -- makes the file the kernel's first, so that
stores through the mapping are made durable by the application's sync.
Power cuts keep what the last real sync made durable (conftest.power_cut)."""
import os
import subprocess

import pytest

from conftest import PY, TDAX, TDAX_ENV, info, power_cut, run

# A view of the file, synced writes through pwrite read back through it,
# then (how) the view is made writable, a store through it, a sync, a kill.
VIEW = r"""
import ctypes, mmap, os, sys
path, how = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)  # the process's mmap: tdax's hook first
for f in ("mmap", "mremap"):
    getattr(libc, f).restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.syscall.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"." * 8192, 0)
os.fsync(fd)
v = libc.mmap(None, 8192, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
assert v != ctypes.c_void_p(-1).value
for i in range(100):
    os.pwrite(fd, b"%04d" % i, 4 * i)
    os.fdatasync(fd)
    assert ctypes.string_at(v + 4 * i, 4) == b"%04d" % i  # the view sees every write
rw = mmap.PROT_READ | mmap.PROT_WRITE
if how == "mprotect":
    rc = libc.mprotect(v, 8192, rw)
elif how == "syscall":
    rc = libc.syscall(10, v, 8192, rw, 0)  # SYS_mprotect
elif how == "pkey":
    rc = libc.syscall(329, v, 8192, rw, -1)  # SYS_pkey_mprotect, no key
elif how in ("mremap-whole", "mremap-part"):
    old = 8192 if how == "mremap-whole" else 4096
    v = libc.mremap(v, old, 8192, 1)  # MREMAP_MAYMOVE; the view at its new place
    rc = libc.mprotect(v, 8192, rw)
elif how == "fork":  # a child made by fork has the views too
    pid = os.fork()
    if pid == 0:
        ok = libc.mprotect(v, 8192, rw) == 0
        ctypes.memmove(v + 6000, b"stored through the mapping", 26)
        os.fdatasync(fd)
        os._exit(0 if ok else 1)
    rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
assert rc == 0, ctypes.get_errno()
if how != "fork":
    ctypes.memmove(v + 6000, b"stored through the mapping", 26)
    os.fdatasync(fd)
print("acknowledged", flush=True)
os.kill(os.getpid(), 9)
"""


def ran(device, code, *args, policy="always", mode="coherent", kill=True):
    p = run(TDAX, "run", "--device", device, "--policy", policy, "--mode", mode, "--", PY, "-c", code,
            *args, env=TDAX_ENV)
    assert "acknowledged" in p.stdout and p.returncode == (-9 if kill else 0), p.stdout + p.stderr
    return info(device)["counters"]


@pytest.mark.parametrize("how", ["mprotect", "syscall", "pkey", "mremap-whole", "mremap-part", "fork"])
def test_a_view_made_writable_gives_its_file_to_the_kernel(dev, diskdir, how):
    f = diskdir / "f"
    ran(dev, VIEW, f, how)  # (a killed process's counters may not reach the device)
    power_cut(dev, f)
    data = f.read_bytes()
    assert data[:400] == b"".join(b"%04d" % i for i in range(100)), data[:40]
    assert data[6000:6026] == b"stored through the mapping", data[6000:6026]


# The same views, never made writable: every sync stays lightweight.
READER = r"""
import mmap, os, sys
path, kind, end = sys.argv[1], sys.argv[2], sys.argv[3]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"." * 8192, 0)
os.fsync(fd)
m = mmap.mmap(fd, 8192, flags=mmap.MAP_SHARED if kind == "shared" else mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
for i in range(200):
    os.pwrite(fd, b"%04d" % i, 4 * i)
    os.fdatasync(fd)
    assert m[4 * i:4 * i + 4] == b"%04d" % i
m.close()  # munmap: the view is gone
os.pwrite(fd, b"last", 7000)
os.fdatasync(fd)
print("acknowledged", flush=True)
if end == "kill":
    os.kill(os.getpid(), 9)
"""


@pytest.mark.parametrize("kind", ["shared", "private"])
def test_a_view_leaves_syncs_lightweight_and_loses_nothing(dev, diskdir, kind):
    c = ran(dev, READER, diskdir / "e", kind, "exit", kill=False)
    assert c["fallback_mmap"] == 0 and c["light_syncs"] >= 190, c
    f = diskdir / "f"
    ran(dev, READER, f, kind, "kill")
    power_cut(dev, f)
    data = f.read_bytes()
    assert data[:800] == b"".join(b"%04d" % i for i in range(200)) and data[7000:7004] == b"last", data[:40]


# Bypass mode: a file with a view is not promoted (the view reads the page
# cache, which a promoted file's writes do not reach); without one it is.
BYPASS = r"""
import mmap, os, sys, time
path, kind = sys.argv[1], sys.argv[2]
view = kind != "none"
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
os.write(fd, b"." * 4096)
os.fsync(fd)
flags = mmap.MAP_PRIVATE if kind == "private" else mmap.MAP_SHARED
m = mmap.mmap(fd, 4096, flags=flags, prot=mmap.PROT_READ) if view else None
for i in range(400):
    os.write(fd, b"%04d" % i)
    os.fdatasync(fd)
    if i == 0:
        time.sleep(0.1)  # the write-back thread starts: leases need it
    if view and i % 50 == 0:
        m2 = mmap.mmap(fd, 4096 + 4 * (i + 1), prot=mmap.PROT_READ)
        assert m2[4096 + 4 * i:] == b"%04d" % i  # a fresh look sees the write
        m2.close()
print("acknowledged", flush=True)
"""


@pytest.mark.parametrize("kind", ["shared", "private", "none"])
def test_bypass_mode_does_not_promote_a_viewed_file(dev, diskdir, kind):
    c = ran(dev, BYPASS, diskdir / "f", kind, mode="bypass", kill=False)
    if kind != "none":
        assert c["promotions"] == 0 and c["fallback_mmap"] == 0, c
    else:
        assert c["promotions"] >= 1, c  # the control: the same writer is promoted


LMDB_WRITER = r"""
import lmdb, os, sys
env = lmdb.open(sys.argv[1], map_size=64 << 20)
for i in range(int(sys.argv[2])):
    with env.begin(write=True) as t:
        t.put(b"k%06d" % i, b"v%06d" % i * 20)
    print(i, flush=True)  # acknowledged: the commit synced
if sys.argv[3] == "kill":
    os.kill(os.getpid(), 9)
"""

LMDB_READER = r"""
import lmdb, sys
env = lmdb.open(sys.argv[1], map_size=64 << 20, readonly=True, lock=False)
with env.begin() as t:
    got = [int(k[1:]) for k, v in t.cursor() if v == b"v%s" % k[1:] * 20]
print(len(got), max(got) + 1 if got else 0)
"""

SYSPY = "/usr/bin/python3"  # Debian's python3-lmdb


def test_lmdb_commits_are_lightweight_and_survive_a_power_cut(dev, diskdir):
    """LMDB maps its data file read-only and writes it with pwrite: each
    commit's two syncs are answered from the device; after a kill and a
    power cut every acknowledged commit is there, and mdb_stat reads the
    environment."""
    db = diskdir / "db"
    db.mkdir()
    p = run(TDAX, "run", "--device", dev, "--", SYSPY, "-c", LMDB_WRITER, db, 500, "exit", env=TDAX_ENV)
    assert p.returncode == 0, p.stderr
    c = info(dev)["counters"]
    assert c["light_syncs"] >= 900 and c["real_syncs"] <= 20, c
    db2 = diskdir / "db2"
    db2.mkdir()
    p = run(TDAX, "run", "--device", dev, "--", SYSPY, "-c", LMDB_WRITER, db2, 500, "kill", env=TDAX_ENV)
    acked = len(p.stdout.split())
    assert p.returncode == -9 and acked == 500, p.stderr
    power_cut(dev, db2 / "data.mdb")
    out = subprocess.run([SYSPY, "-c", LMDB_READER, db2], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["500", "500"], out
    st = subprocess.run(["mdb_stat", "-e", str(db2)], capture_output=True, text=True)
    assert st.returncode == 0 and "Entries: 500" in st.stdout, st.stdout + st.stderr


# Threads making and dropping views of one file while others mprotect
# their own memory writable and fork: the table's lock is taken by each,
# and by fork (a child must not find it held).
CHURN = r"""
import ctypes, mmap, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"." * 65536, 0)
os.fsync(fd)
errors = []

def viewer():
    for i in range(2000):
        v = libc.mmap(None, 4096 * (1 + i % 4), mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if v == ctypes.c_void_p(-1).value or libc.munmap(v, 4096 * (1 + i % 4)) != 0:
            errors.append(ctypes.get_errno())

def protector():
    for i in range(2000):
        a = libc.mmap(None, 8192, mmap.PROT_READ, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        if libc.mprotect(a, 8192, mmap.PROT_READ | mmap.PROT_WRITE) != 0 or libc.munmap(a, 8192) != 0:
            errors.append(ctypes.get_errno())

def forker():
    for i in range(30):
        pid = os.fork()
        if pid == 0:
            v = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            os._exit(0 if libc.munmap(v, 4096) == 0 else 1)
        if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
            errors.append("child")

ts = [threading.Thread(target=f) for f in (viewer, viewer, protector, forker)]
for t in ts: t.start()
for t in ts: t.join()
for i in range(50):
    os.pwrite(fd, b"%04d" % i, 4 * i)
    os.fdatasync(fd)
print("acknowledged", errors, flush=True)
"""


def test_views_made_and_dropped_by_threads_and_forks_alongside_mprotect(dev, diskdir):
    p = run(TDAX, "run", "--device", dev, "--policy", "always", "--", PY, "-c", CHURN, diskdir / "f",
            env=TDAX_ENV)  # (a hang: run's timeout)
    assert p.returncode == 0 and "acknowledged []" in p.stdout, p.stdout + p.stderr
    c = info(dev)["counters"]
    assert c["fallback_mmap"] == 0 and c["light_syncs"] >= 45, c


# The process holds a POSIX lock on the file (SQLite's locking) and maps it
# read-only; tdax closes no descriptor of the file for the view (a close
# drops every POSIX lock the process has on it): another process still
# finds the lock held after the view is unmapped, and after it is made
# writable.
LOCKED = r"""
import ctypes, fcntl, mmap, os, subprocess, sys
path, how = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"." * 8192, 0)
os.fsync(fd)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
v = libc.mmap(None, 8192, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
if how == "munmap":
    assert libc.munmap(v, 8192) == 0
else:
    assert libc.mprotect(v, 8192, mmap.PROT_READ | mmap.PROT_WRITE) == 0
probe = "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\ntry:\n    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('free')\nexcept OSError:\n    print('held')"
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
print(subprocess.run([sys.executable, "-c", probe, path], capture_output=True, text=True, env=env).stdout.strip())
"""


@pytest.mark.parametrize("how", ["munmap", "mprotect"])
def test_a_view_drops_no_posix_lock_of_the_process(dev, diskdir, how):
    # (No durable shadow: the test build's copy at each real sync opens
    # and closes the file, as no product code does.)
    p = run(TDAX, "run", "--device", dev, "--policy", "always", "--", PY, "-c", LOCKED, diskdir / "f", how,
            env={**TDAX_ENV, "TDAX_TEST_DURABLE_SHADOW": "0"})
    assert p.returncode == 0 and p.stdout.strip() == "held", p.stdout + p.stderr


# A view made writable after the process closed every descriptor of its
# file: the file goes to the kernel by its entry (policy always: the sync
# before registered it) or, with no entry yet (the default policy: one sync
# is no stream), it is tainted, and its registration later makes it the
# kernel's. Either way the store through the mapping is made durable by the
# sync after it.
CLOSED = r"""
import ctypes, mmap, os, sys
path = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"." * 8192, 0)
os.fsync(fd)
v = libc.mmap(None, 8192, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
os.close(fd)
assert libc.mprotect(v, 8192, mmap.PROT_READ | mmap.PROT_WRITE) == 0
ctypes.memmove(v + 6000, b"stored through the mapping", 26)
fd = os.open(path, os.O_RDWR)
for i in range(20):  # a stream of syncs: registered under any policy
    os.pwrite(fd, b"%04d" % i, 4 * i)
    os.fdatasync(fd)
print("acknowledged", flush=True)
os.kill(os.getpid(), 9)
"""


@pytest.mark.parametrize("policy", ["always", "adaptive"])
def test_a_view_made_writable_with_no_descriptor_left(dev, diskdir, policy):
    f = diskdir / "f"
    ran(dev, CLOSED, f, policy=policy)
    power_cut(dev, f)
    data = f.read_bytes()
    assert data[6000:6026] == b"stored through the mapping", data[6000:6026]
    assert data[:80] == b"".join(b"%04d" % i for i in range(20)), data[:80]
