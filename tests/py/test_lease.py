"""Write leases (src/preload/lease.h): while tdax holds one on the open file
of a descriptor, a lightweight sync needs no look at the file, because no
other open of it exists. Each test here gives the file a writer tdax does
not see -- through a new open, an exec that inherits the descriptor, a
spawn, a descriptor sent over a socket -- and checks that the sync after
it is a real one (the guard is back), never a lightweight one that would
acknowledge bytes the log does not hold."""
import os
import signal
import subprocess
import time
from contextlib import contextmanager

import pytest

from conftest import PY, counters_once, info, started, tdax_run

# Opens the file (argv[1]) and appends 20 x 100 B with a sync after each:
# a lightweight sync takes the lease once the write-back thread is there.
LEASED = r"""
import os, signal, socket, subprocess, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(20):
    os.write(fd, b"a" * 100)
    os.fdatasync(fd)
    if i == 0:
        time.sleep(0.1)  # the write-back thread starts: a break needs it
"""

# LEASED, then says "ready", lets SCENARIO give the file a writer tdax does
# not see, syncs once more and says "synced".
HOLDER = LEASED + r"""
path, scenario = sys.argv[1], sys.argv[2]
if scenario == "moved":  # the open file lives on under another number
    fd2 = os.dup(fd)
    os.close(fd)
    fd = fd2
print("ready", flush=True)
plain = {"PATH": "/usr/bin:/bin"}  # no LD_PRELOAD: a program without tdax
if scenario in ("open", "moved"):
    while os.stat(path).st_size == 2000:  # the test appends from outside
        time.sleep(0.0005)
elif scenario == "exec":
    os.set_inheritable(fd, True)
    subprocess.run(["/bin/sh", "-c", "printf x >&%d" % fd], pass_fds=[fd], env=plain, check=True)
elif scenario == "spawn":
    os.set_inheritable(fd, True)
    pid = os.posix_spawn("/bin/sh", ["sh", "-c", "printf x >&%d" % fd], plain)
    os.waitpid(pid, 0)
elif scenario == "system":
    os.set_inheritable(fd, True)
    assert os.system("env -u LD_PRELOAD /bin/sh -c 'printf x >&%d'" % fd) == 0
elif scenario in ("sent", "sent-raw"):
    mine, theirs = socket.socketpair()
    recv = "import socket, os; s = socket.socket(fileno=%d); _, fds, _, _ = socket.recv_fds(s, 1, 1); " \
           "os.write(fds[0], b'x'); s.send(b'k')" % theirs.fileno()
    # Through a shell that does not wait for it: once the shell is gone no
    # child of this process shares the open file, and the lease comes back
    # before the hand-over, which alone must end its trust.
    subprocess.run(["/bin/sh", "-c", '"$0" -c "$1" &', sys.executable, recv], pass_fds=[theirs.fileno()],
                   env=plain, check=True)
    time.sleep(0.15)  # past the retry interval of a lease
    for i in range(20):
        os.write(fd, b"a" * 100)
        os.fdatasync(fd)
    if scenario == "sent":
        socket.send_fds(mine, [b"f"], [fd])
    else:  # sendmmsg through syscall(2), as a Go program rewritten would
        import ctypes, struct
        class msghdr(ctypes.Structure):
            _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.c_void_p),
                        ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p),
                        ("controllen", ctypes.c_size_t), ("flags", ctypes.c_int), ("pad", ctypes.c_int),
                        ("len", ctypes.c_uint), ("pad2", ctypes.c_uint)]  # (a struct mmsghdr)
        data = ctypes.create_string_buffer(b"f", 1)
        iov = ctypes.create_string_buffer(struct.pack("<QQ", ctypes.addressof(data), 1), 16)
        ctl = ctypes.create_string_buffer(struct.pack("<QiiiI", 20, socket.SOL_SOCKET, socket.SCM_RIGHTS, fd, 0), 24)
        m = msghdr(None, 0, ctypes.addressof(iov), 1, ctypes.addressof(ctl), 24, 0, 0, 0, 0)
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.syscall(307, mine.fileno(), ctypes.byref(m), 1, 0) == 1, ctypes.get_errno()  # SYS_sendmmsg
    assert mine.recv(1) == b"k"
elif scenario == "fork":
    pid = os.fork()
    if pid == 0:
        os.close(fd)
        os._exit(0)
    os.waitpid(pid, 0)
os.fdatasync(fd)  # right after it: the guard sees a size no tdax write left
print("synced", flush=True)
time.sleep(600)
"""


@contextmanager
def holder(dev, path, scenario, env=None):
    with started(dev, HOLDER, path, scenario, env=env) as p:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        yield p
        assert p.stdout.readline().strip() == "synced", p.stderr.read()
        time.sleep(0.1)  # the counters reach the device every write-back interval


def counters_after(dev, path, scenario, env=None, outside=None):
    with holder(dev, path, scenario, env=env):
        if outside:
            outside()
    return info(dev)["counters"]


def append_without_tdax(path):
    """Open the file anew from a process without tdax and append a byte;
    return how long the open and write took."""
    t = time.monotonic()
    subprocess.run(["/bin/sh", "-c", "printf x >> '%s'" % path], env={"PATH": "/usr/bin:/bin"},
                   check=True, timeout=120)
    return time.monotonic() - t


def test_a_sole_writer_holds_a_lease_and_its_syncs_stay_lightweight(dev, diskdir):
    c = counters_after(dev, diskdir / "f", "none")
    assert c["leases"] == 1 and c["lease_breaks"] == 0, c
    assert c["light_syncs"] == 21 and c["real_syncs"] == 0, c


def test_another_open_breaks_the_lease_at_once_and_the_next_sync_looks_again(dev, diskdir):
    """The kernel holds the other open until the lease goes: tdax's handler
    lets it go at once (not after lease-break-time, 45 s by default), and
    the sync after the foreign append is real. A trust of a minute leaves
    the handler alone to tell the sync path."""
    path = diskdir / "f"
    took = []
    c = counters_after(dev, path, "open", env={"TDAX_TEST_LEASE_TRUST_MS": "60000"},
                       outside=lambda: took.append(append_without_tdax(path)))
    assert took[0] < 5, took
    assert c["lease_breaks"] == 1 and c["fallback_unseen_write"] == 1 and c["real_syncs"] == 1, c
    assert path.read_bytes() == b"a" * 2000 + b"x"


@pytest.fixture
def short_lease_break_time():
    """lease-break-time at 1 s for the test (a system-wide setting)."""
    knob = "/proc/sys/fs/lease-break-time"
    old = open(knob).read()
    with open(knob, "w") as f:
        f.write("1")
    yield
    with open(knob, "w") as f:
        f.write(old)


def test_a_lost_break_signal_cannot_make_a_sync_lie(dev, diskdir, short_lease_break_time):
    """With the handler deaf, the kernel takes the lease away after
    lease-break-time and lets the other open go; the sync path's next look
    (F_GETLEASE, at least every 10 ms) finds it gone."""
    path = diskdir / "f"
    c = counters_after(dev, path, "open", env={"TDAX_TEST_LEASE_DEAF": "1"},
                       outside=lambda: append_without_tdax(path))
    assert c["lease_breaks"] == 0 and c["fallback_unseen_write"] == 1 and c["real_syncs"] == 1, c


def test_positive_control_trusting_a_lost_lease_lies(dev, diskdir, short_lease_break_time):
    """The same with the look trusted for a minute: the sync is answered
    lightweight although a writer tdax did not see appended -- what the
    two tests above rule out."""
    path = diskdir / "f"
    c = counters_after(dev, path, "open", env={"TDAX_TEST_LEASE_DEAF": "1",
                                               "TDAX_TEST_LEASE_TRUST_MS": "60000"},
                       outside=lambda: append_without_tdax(path))
    assert c["fallback_unseen_write"] == 0 and c["real_syncs"] == 0 and c["light_syncs"] == 21, c


def test_a_closed_descriptor_lets_its_lease_go(dev, diskdir, short_lease_break_time):
    """The leased number is closed while a dup keeps the open file: the
    lease goes at the close (a break would name a number that is gone, and
    the other open would wait out lease-break-time)."""
    path = diskdir / "f"
    took = []
    c = counters_after(dev, path, "moved", outside=lambda: took.append(append_without_tdax(path)))
    assert took[0] < 0.5, took
    assert c["leases"] == 1 and c["lease_breaks"] == 0 and c["real_syncs"] == 1, c


@pytest.mark.parametrize("scenario", ["exec", "spawn", "system", "sent", "sent-raw"])
def test_a_descriptor_handed_to_a_program_without_tdax_ends_the_trust(dev, diskdir, scenario):
    """The program writes through the same open file: no open, no break.
    The hand-over itself (an exec or spawn inheriting the descriptor, a
    descriptor sent over a socket, by sendmsg or by sendmmsg through
    syscall(2)) must end the lease's trust."""
    path = diskdir / "f"
    c = counters_after(dev, path, scenario, env={"TDAX_TEST_LEASE_TRUST_MS": "60000"})
    assert c["fallback_unseen_write"] == 1 and c["real_syncs"] == 1, (scenario, c)
    sent = scenario.startswith("sent")
    assert c["leases"] == 1 + sent, c  # (sent: taken again before the hand-over)
    assert path.read_bytes() == b"a" * (4000 if sent else 2000) + b"x"


def test_background_checkpoints_go_through_the_leased_open_file(dev, diskdir):
    """The write-back syncs a leased file through a copy of the leased
    descriptor (pidfd_getfd), not a new open: the lease survives them."""
    code = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
end = time.monotonic() + 1.0
while time.monotonic() < end:
    os.write(fd, b"a" * 100)
    os.fdatasync(fd)
    time.sleep(0.001)
"""
    # (the durable shadow of the test build reads each file through a new
    # open at each real sync: off here)
    r = tdax_run(dev, code, diskdir / "f", env={"TDAX_WB_AGE_MS": "50", "TDAX_TEST_DURABLE_SHADOW": "0"})
    assert r.returncode == 0, r.stderr
    c = info(dev)["counters"]
    assert c["checkpoints"] >= 5 and c["leases"] == 1 and c["lease_breaks"] == 0, c


def test_a_fork_child_holds_the_lease_off_until_it_is_gone(dev, diskdir):
    """A child of fork (Redis's background save) shares the open file: the
    lease goes at the fork and comes back once the child is gone; the
    syncs stay lightweight all along (the guard answers meanwhile)."""
    c = counters_after(dev, diskdir / "f", "fork")
    assert c["leases"] == 2 and c["lease_breaks"] == 0, c
    assert c["light_syncs"] == 21 and c["real_syncs"] == 0, c


@pytest.mark.parametrize("who", ["child", "grandchild"])
def test_a_lease_never_outlives_its_holder_in_a_fork_child(dev, diskdir, short_lease_break_time, who):
    """The holder dies while a child of its fork (or a grandchild, whose
    parent exited) still has the open file: no lease is left on it with
    nobody to answer a break, so another open does not wait out
    lease-break-time."""
    code = LEASED + r"""
child = os.fork()
if child == 0:
    if sys.argv[2] == "grandchild" and os.fork() != 0:
        os._exit(0)
    time.sleep(600)  # keeps the open file
    os._exit(0)
if sys.argv[2] == "grandchild":
    os.waitpid(child, 0)
    time.sleep(0.15)  # past the retry interval of a lease
for i in range(20):  # the guard answers
    os.write(fd, b"a" * 100)
    os.fdatasync(fd)
print("forked", flush=True)
time.sleep(600)
"""
    path = diskdir / "f"
    with started(dev, code, path, who) as p:
        assert p.stdout.readline().strip() == "forked", p.stderr.read()
        time.sleep(0.2)  # past the retry interval of a lease
        counters_once(dev, lambda c: c["light_syncs"] >= 40)  # (a kill loses what is not there)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        assert append_without_tdax(path) < 0.5
    c = info(dev)["counters"]
    assert c["leases"] == 1 and c["light_syncs"] == 40, c


def test_a_process_that_takes_the_lease_signal_gets_no_more_leases(dev, diskdir,
                                                                    short_lease_break_time):
    """The signal of a break is the application's once it sets a handler for
    it: tdax lets its leases go first and takes no more, so a break never
    calls the application's handler (nor waits for it to answer)."""
    code = LEASED + r"""
got = []
signal.signal(signal.SIGRTMAX - 2, lambda *a: got.append(1))
print("ready", flush=True)
while os.stat(sys.argv[1]).st_size == 2000:
    time.sleep(0.0005)
os.fdatasync(fd)
os.kill(os.getpid(), signal.SIGRTMAX - 2)
print(got, flush=True)
time.sleep(600)
"""
    path = diskdir / "f"
    with started(dev, code, path) as p:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        assert append_without_tdax(path) < 0.5
        assert p.stdout.readline().strip() == "[1]", p.stderr.read()  # its own signal only
        time.sleep(0.1)
    c = info(dev)["counters"]
    assert c["leases"] == 1 and c["lease_breaks"] == 0 and c["real_syncs"] == 1, c


def test_tdax_leases_0_turns_them_off(dev, diskdir):
    c = counters_after(dev, diskdir / "f", "none", env={"TDAX_LEASES": "0"})
    assert c["leases"] == 0 and c["light_syncs"] == 21, c


# A transaction's journal, 200 times: created, written, synced twice and
# removed (SQLite's rollback journal at synchronous=FULL).
JOURNALS = r"""
import os, sys
for i in range(200):
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for j in range(2):
        os.write(fd, b"j" * 512)
        os.fdatasync(fd)
    os.close(fd)
    os.unlink(sys.argv[1])
"""


def test_a_file_synced_and_closed_at_once_takes_no_lease(dev, diskdir):
    """A lease costs four fcntl calls and spares a statx at each later sync:
    a descriptor takes one at its third sync through the guard
    (TDAX_LEASE_AFTER_SYNCS, lease.h). 200 journals, each synced twice: no
    lease, every sync lightweight still (through the guard); the writer
    above, which syncs on, takes its lease."""
    before = info(dev)["counters"]
    tdax_run(dev, JOURNALS, diskdir / "j", check=0)
    c = info(dev)["counters"]
    assert c["leases"] - before["leases"] == 0, c
    assert c["light_syncs"] - before["light_syncs"] >= 390, c
    c2 = counters_after(dev, diskdir / "log", "none")
    assert c2["leases"] - c["leases"] >= 1, c2
