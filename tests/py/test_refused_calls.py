"""Calls the kernel refuses -- a negative offset, flags it does not know, an
iovec count out of range, a buffer or iovec array that is not the caller's
memory, a negative length -- made on a file
tdax manages: each must fail as it fails without tdax, with the same errno,
and change nothing (stress-ng's hdd stressor found a pwritev2 at offset -2
that tdax made at the file position; a bad iovec array or, in bypass mode,
a bad buffer killed the process with SIGSEGV). One program makes every call and
prints what each returned; it runs without tdax and under tdax with the
file unregistered, logged (coherent mode) and promoted (bypass mode), and
the four transcripts and files must be the same."""
import pytest

from conftest import PY, TDAX, info, run, tdax_run

CALLS = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
V, L, I, P = ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_size_t
libc.pwritev2.argtypes = libc.preadv2.argtypes = [I, V, I, L, I]
libc.pwritev.argtypes = libc.preadv.argtypes = [I, V, I, L]
libc.writev.argtypes = libc.readv.argtypes = [I, V, I]
libc.pwrite.argtypes = libc.pread.argtypes = [I, V, P, L]
libc.write.argtypes = libc.read.argtypes = [I, V, P]
libc.ftruncate.argtypes = [I, L]
libc.fallocate.argtypes = [I, I, L, L]
libc.lseek.argtypes = [I, L, I]
libc.lseek.restype = L
for f in ("pwritev2", "preadv2", "pwritev", "preadv", "writev", "readv", "pwrite", "pread", "write", "read"):
    getattr(libc, f).restype = L
path, syncs = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
for i in range(syncs):  # enough synced writes for the configuration under test
    os.pwrite(fd, b"%07d\n" % i, 8 * i); os.fdatasync(fd)
    if i == 0:
        time.sleep(0.1)  # (bypass mode: leases need tdax's write-back thread)
os.lseek(fd, 16, 0)
buf = ctypes.create_string_buffer(b"Q" * 16, 16)
iov = (V * 32)(*[x for i in range(16) for x in (ctypes.addressof(buf) + i, 1)])
big = (V * 2050)(*[x for i in range(1025) for x in (ctypes.addressof(buf), 1)])
bad = (V * 2)(8, 16)  # an iovec whose buffer is at address 8
def show(name, r):
    print(name, r, ctypes.get_errno() if r < 0 else 0, libc.lseek(fd, 0, 1), flush=True)
    ctypes.set_errno(0)
libc.mmap.restype, libc.mmap.argtypes = V, [V, P, I, I, I, L]
RO = libc.mmap(None, 4096, 1, 0x22, -1, 0)  # PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS: readable only
show("write bad buffer", libc.write(fd, 8, 16))
show("pwrite bad buffer", libc.pwrite(fd, 8, 16, 0))
show("writev bad buffer", libc.writev(fd, bad, 1))
show("pwritev2 bad buffer", libc.pwritev2(fd, bad, 1, 0, 0))
show("writev bad array", libc.writev(fd, 8, 2))
show("pwritev bad array", libc.pwritev(fd, 8, 2, 0))
show("pwritev2 bad array", libc.pwritev2(fd, 8, 2, 0, 0))
show("pread bad buffer", libc.pread(fd, 8, 16, 0))
show("preadv bad array", libc.preadv(fd, 8, 2, 0))
show("pread read-only buffer", libc.pread(fd, RO, 16, 0))
show("pwritev2 -2", libc.pwritev2(fd, iov, 16, -2, 0))
show("pwritev2 -7 dsync", libc.pwritev2(fd, iov, 16, -7, 2))
show("pwritev2 flags", libc.pwritev2(fd, iov, 16, 0, 0x40000000))
show("pwritev2 -1 flags", libc.pwritev2(fd, iov, 16, -1, 0x40000000))
show("pwritev2 count", libc.pwritev2(fd, big, 1025, 0, 0))
show("pwritev2 -1 count", libc.pwritev2(fd, iov, -1, -1, 0))
show("pwritev -1", libc.pwritev(fd, iov, 16, -1))
show("pwritev count", libc.pwritev(fd, big, 1025, 0))
show("pwrite -1", libc.pwrite(fd, buf, 16, -1))
show("writev count", libc.writev(fd, big, 1025))
show("writev -1", libc.writev(fd, iov, -1))
show("preadv2 -2", libc.preadv2(fd, iov, 16, -2, 0))
show("preadv2 flags", libc.preadv2(fd, iov, 16, 0, 0x40000000))
show("preadv -1", libc.preadv(fd, iov, 16, -1))
show("pread -1", libc.pread(fd, buf, 16, -1))
show("read bad buffer", libc.read(fd, 8, 16))
show("lseek -5", libc.lseek(fd, -5, 0))
show("ftruncate -1", libc.ftruncate(fd, -1))
show("fallocate -1", libc.fallocate(fd, 0, -1, 10))
show("fallocate len 0", libc.fallocate(fd, 0, 0, 0))
show("fallocate mode", libc.fallocate(fd, 0x4000, 0, 10))
os.fdatasync(fd)
print("size", os.fstat(fd).st_size, "content", os.pread(fd, 1 << 20, 0) == open(path, "rb").read())
"""


def transcript(p):
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


# The promoted file meets the calls with bad buffers first: tdax copies
# its writes and serves its reads, so there the fault would be tdax's.
@pytest.mark.parametrize("how", ["unregistered", "logged", "promoted"])
def test_a_refused_call_fails_as_without_tdax_and_changes_nothing(dev, diskdir, how):
    syncs = {"unregistered": 0, "logged": 2, "promoted": 300}[how]
    want_f, got_f = diskdir / "without", diskdir / "under"
    want = transcript(run(PY, "-c", CALLS, want_f, syncs, env={"LD_PRELOAD": ""}, check=None))
    env = {"TDAX_MODE": "bypass"} if how == "promoted" else {}
    got = transcript(tdax_run(dev, CALLS, got_f, syncs, policy="never" if how == "unregistered" else "always",
                              env=env, check=None))
    assert got == want
    assert got_f.read_bytes() == want_f.read_bytes()
    if how == "promoted":  # promoted when the bad buffers came, which demoted it
        c = info(dev)["counters"]
        assert c["deferred_writes"] >= 250 and c["demoted_kernel"] >= 1, c


FAULT = r"""
import ctypes, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"x"); os.fdatasync(fd)  # (tdax attached: its handlers are in)
if sys.argv[2] == "kill":
    os.kill(os.getpid(), 11)
ctypes.string_at(8)  # the application's own fault
print("survived", flush=True)
"""


@pytest.mark.parametrize("how", ["fault", "faulthandler", "kill"])
def test_the_applications_own_segfault_ends_it_as_without_tdax(dev, diskdir, how):
    """tdax's SIGSEGV handler passes what is not its probe's on: to the
    handler the application had (Python's faulthandler, which reports and
    dies), or to the default action (a core-dumping SIGSEGV)."""
    opts = ["-X", "faulthandler"] if how == "faulthandler" else []
    arg = "kill" if how == "kill" else "fault"
    want = run(PY, *opts, "-c", FAULT, diskdir / "without", arg, env={"LD_PRELOAD": ""})
    got = tdax_run(dev, FAULT, diskdir / "under", arg, check=None) if not opts else \
        run(TDAX, "run", "--device", dev, "--policy", "always", "--", PY, *opts, "-c", FAULT, diskdir / "under",
            arg, env={"TDAX_QUIET": "1"})
    assert want.returncode == -11 and "survived" not in want.stdout
    assert (got.returncode, got.stdout) == (want.returncode, want.stdout), got.stderr
    assert ("Segmentation fault" in got.stderr) == ("Segmentation fault" in want.stderr), got.stderr
