"""Durability holes found by peer suites (issue 14): writes that reach the
kernel without tdax logging them, descriptor numbers tdax took for another
file, tdax's own descriptors in the application's way, renames tdax did not
follow. Each case writes, syncs, cuts the power (page cache lost, device
kept), recovers, and compares with what was acknowledged."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import PY, ROOT, TDAX, TDAX_ENV, info, killed_and_cut, power_cut, run, started, tdax_run

# Write A and sync, overwrite with B and sync (both lightweight), then the
# case under test writes C and syncs; the process is killed (no exit
# checkpoint), so only the device can hold what the last sync acknowledged.
PRELUDE = r"""
import ctypes, mmap, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
path = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.fsync(fd)
os.pwrite(fd, b"A" * 8192, 0); os.fsync(fd)
os.pwrite(fd, b"B" * 8192, 0); os.fsync(fd)
"""
EPILOGUE = r"""
os.fsync(fd)
print("acked", flush=True)
time.sleep(0.1)
os.kill(os.getpid(), 9)
"""

VFORKCLOSE = ROOT / "build" / "tests" / "tdax-vforkclose"


def cut_after(dev, path, case, expect):
    p = tdax_run(dev, PRELUDE + case + EPILOGUE, path, check=None)
    assert "acked" in p.stdout, p.stderr
    assert path.read_bytes() == expect, "the case did not do what it says"
    rep = power_cut(dev, path)
    assert rep["corrupt"] == 0
    assert path.read_bytes() == expect, "acknowledged data lost"


C_AT_100 = b"B" * 100 + b"C" * 50 + b"B" * (8192 - 150)


def test_pwritev2_dontcache_is_logged_or_uncovered(dev, diskdir):
    # The issue's reproduction: RWF_DONTCACHE (0x80), as xfstests' fsx uses it.
    cut_after(dev, diskdir / "f", "os.pwritev(fd, [b'C' * 50], 100, 0x80)", C_AT_100)


def test_pwritev2_noappend_on_an_append_descriptor(dev, diskdir):
    # RWF_NOAPPEND (0x20): the offset counts although the descriptor appends.
    code = PRELUDE.replace("os.O_RDWR | os.O_CREAT", "os.O_RDWR | os.O_CREAT | os.O_APPEND")
    code = code.replace("os.pwrite(fd, b\"A\" * 8192, 0)", "os.write(fd, b\"A\" * 8192)")
    code = code.replace("os.pwrite(fd, b\"B\" * 8192, 0)", "os.pwritev(fd, [b\"B\" * 8192], 0, 0x20)")
    path = diskdir / "f"
    p = tdax_run(dev, code + "os.pwritev(fd, [b'C' * 50], 100, 0x20)" + EPILOGUE, path, check=None)
    assert "acked" in p.stdout, p.stderr
    assert path.read_bytes() == C_AT_100
    power_cut(dev, path)
    assert path.read_bytes() == C_AT_100, "acknowledged data lost"


def test_pwritev2_at_the_file_position_with_a_flag(dev, diskdir):
    cut_after(dev, diskdir / "f", "os.lseek(fd, 100, 0); libc.pwritev2.argtypes = "
              "[ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_int]\n"
              "buf = ctypes.create_string_buffer(b'C' * 50, 50)\n"
              "iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 50)\n"
              "assert libc.pwritev2(fd, iov, 1, -1, 0x80) == 50", C_AT_100)


def test_syscall_write_is_seen(dev, diskdir):
    cut_after(dev, diskdir / "f", "os.lseek(fd, 100, 0)\n"
              "assert libc.syscall(1, fd, b'C' * 50, 50) == 50  # SYS_write", C_AT_100)


def test_syscall_pwrite64_is_seen(dev, diskdir):
    cut_after(dev, diskdir / "f", "assert libc.syscall(18, fd, b'C' * 50, 50, 100) == 50  # SYS_pwrite64",
              C_AT_100)


def test_copy_file_range_into_the_file(dev, diskdir):
    src = diskdir / "src"
    src.write_bytes(b"C" * 50)
    cut_after(dev, diskdir / "f", "s = os.open(%r, os.O_RDONLY)\n"
              "assert os.copy_file_range(s, fd, 50, 0, 100) == 50" % str(src), C_AT_100)


def test_sendfile_into_the_file(dev, diskdir):
    src = diskdir / "src"
    src.write_bytes(b"C" * 50)
    cut_after(dev, diskdir / "f", "s = os.open(%r, os.O_RDONLY); os.lseek(fd, 100, 0)\n"
              "assert os.sendfile(fd, s, 0, 50) == 50" % str(src), C_AT_100)


def test_splice_into_the_file(dev, diskdir):
    cut_after(dev, diskdir / "f", "r, w = os.pipe(); os.write(w, b'C' * 50)\n"
              "assert os.splice(r, fd, 50, offset_dst=100) == 50", C_AT_100)


def test_fallocate_zero_range(dev, diskdir):
    # FALLOC_FL_ZERO_RANGE | KEEP_SIZE (0x10 | 0x1): the zeros must not be
    # undone by replaying B's records.
    cut_after(dev, diskdir / "f", "libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, "
              "ctypes.c_long]\nassert libc.fallocate(fd, 0x11, 4096, 4096) == 0",
              b"B" * 4096 + b"\0" * 4096)


def test_fallocate_zero_range_growing_the_file(dev, diskdir):
    # FALLOC_FL_ZERO_RANGE (0x10) past the end: zeros, and the size with them.
    cut_after(dev, diskdir / "f", "libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, "
              "ctypes.c_long]\nassert libc.fallocate(fd, 0x10, 4096, 8192) == 0",
              b"B" * 4096 + b"\0" * 8192)


def test_fallocate_punch_hole(dev, diskdir):
    cut_after(dev, diskdir / "f", "libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, "
              "ctypes.c_long]\nassert libc.fallocate(fd, 0x3, 0, 4096) == 0",
              b"\0" * 4096 + b"B" * 4096)


# ---- descriptor numbers -----------------------------------------------

def test_close_range_then_a_directory_under_the_same_number(dev, diskdir):
    """After close_range, a directory gets the file's number; its fsync must
    neither be answered as lightweight nor release the file's records."""
    path = diskdir / "f"
    code = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.fsync(fd)
os.pwrite(fd, b"acked" * 100, 0); os.fsync(fd)
os.closerange(fd, fd + 1)
d = os.open(os.path.dirname(sys.argv[1]), os.O_RDONLY)
assert d == fd
open(os.path.join(os.path.dirname(sys.argv[1]), "new"), "w").close()
os.fsync(d)
print("acked", flush=True); time.sleep(0.1); os.kill(os.getpid(), 9)
"""
    p = tdax_run(dev, code, path, check=None)
    assert "acked" in p.stdout, p.stderr
    c = info(dev)["counters"]
    # The file's two (its creation is a record), not the directory's.
    assert c["light_syncs"] == 2, "the directory's fsync was answered by tdax"
    assert info(dev)["live_records"] > 0, "the directory's fsync released the file's records"
    power_cut(dev, path)
    assert path.read_bytes() == b"acked" * 100


def test_syscall_close_forgets_the_descriptor(dev, diskdir):
    path = diskdir / "f"
    code = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None)
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.fsync(fd)
os.pwrite(fd, b"acked" * 100, 0); os.fsync(fd)
assert libc.syscall(3, fd) == 0  # SYS_close
d = os.open(os.path.dirname(sys.argv[1]), os.O_RDONLY)
assert d == fd
os.fsync(d)
print("acked", flush=True); time.sleep(0.1); os.kill(os.getpid(), 9)
"""
    p = tdax_run(dev, code, path, check=None)
    assert "acked" in p.stdout, p.stderr
    assert info(dev)["counters"]["light_syncs"] == 2  # the file's two, not the directory's
    power_cut(dev, path)
    assert path.read_bytes() == b"acked" * 100


def test_a_vfork_child_does_not_change_the_parents_table(dev, diskdir):
    """CPython's subprocess vforks; the child's close_range and dup2 must not
    make the parent forget (or mistake) its own descriptors."""
    path = diskdir / "f"
    code = r"""
import os, subprocess, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.fsync(fd)
os.pwrite(fd, b"x" * 100, 0); os.fsync(fd)
subprocess.run(["/bin/true"], close_fds=True, stdout=subprocess.DEVNULL)
os.pwrite(fd, b"y" * 100, 0); os.fsync(fd)
"""
    tdax_run(dev, code, path)
    assert info(dev)["counters"]["light_syncs"] == 3


def test_a_vfork_child_of_a_process_not_attached_leaves_its_inherited_descriptors(dev, diskdir):
    """A process that has not attached vforks for real; a child that closes
    an inherited descriptor on its way to exec must not clear the parent's
    note of it, or the parent's writes through it would go unseen. With
    policy always, the parent's first write through it attaches, its first
    sync registers the file, and its second write is logged."""
    path = diskdir / "f"
    p = run(TDAX, "run", "--device", dev, "--policy", "thesis", "--", "/bin/sh", "-c",
            'exec 5>>"$1"; TDAX_POLICY=always exec "$2" 5 x', "sh", path, VFORKCLOSE,
            env=TDAX_ENV, check=None)
    assert p.returncode == 0, p.stderr
    assert path.read_bytes() == b"xx"
    assert info(dev)["counters"]["logged_writes"] == 1, "the inherited descriptor was forgotten"


# ---- tdax's own descriptors -------------------------------------------

def test_a_program_started_with_stdout_closed_gets_ebadf(dev, diskdir):
    code = r"""
import os, sys
try:
    os.write(1, b"x")
    sys.stderr.write("wrote\n")
except OSError as e:
    sys.stderr.write("errno %d\n" % e.errno)
"""
    e = dict(os.environ, **TDAX_ENV)
    p = subprocess.run(["/bin/sh", "-c", 'exec 1>&-; exec "$@"', "sh", TDAX, "run", "--device", dev,
                        "--", PY, "-c", code], capture_output=True, text=True, env=e, timeout=60)
    assert p.stderr.strip().endswith("errno 9"), p.stderr  # EBADF, as without tdax
    assert info(dev)["state"]  # the device is still a device


def test_no_descriptor_of_tdax_is_visible(dev, diskdir):
    code = "import os; print(sorted(int(x) for x in os.listdir('/proc/self/fd')))"
    without = run(PY, "-c", code, check=0).stdout
    assert tdax_run(dev, code).stdout == without


def test_the_trace_survives_the_application_closing_everything(dev, diskdir):
    path, trace = diskdir / "f", diskdir / "trace"
    code = r"""
import os, sys
os.closerange(3, 4096)
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
for i in range(10):
    os.write(fd, b"x" * 100); os.fsync(fd)
"""
    e = dict(os.environ, **TDAX_ENV)
    run(TDAX, "run", "--device", dev, "--trace", trace, "--", PY, "-c", code, path, env=e, check=0)
    out = run(TDAX, "trace", "info", trace, check=0).stdout
    assert "1000 bytes written" in out and "write 10, sync 10" in out, out


# ---- renames ------------------------------------------------------------

def test_renaming_the_directory_of_a_file_with_records(dev, diskdir):
    (diskdir / "d1").mkdir()
    path = diskdir / "d1" / "f"
    code = r"""
import os, sys, time
d = os.path.dirname(sys.argv[1])
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.fsync(fd); os.fsync(os.open(d, os.O_RDONLY))
os.pwrite(fd, b"one" * 100, 0); os.fsync(fd)
os.rename(d, d[:-1] + "2")
os.fsync(os.open(os.path.dirname(d), os.O_RDONLY))
os.pwrite(fd, b"two" * 100, 300); os.fsync(fd)
print("acked", flush=True); time.sleep(0.1); os.kill(os.getpid(), 9)
"""
    p = tdax_run(dev, code, path, check=None)
    assert "acked" in p.stdout, p.stderr
    moved = diskdir / "d2" / "f"
    assert moved.read_bytes() == b"one" * 100 + b"two" * 100
    rep = power_cut(dev, moved)
    assert rep["applied"] > 0 and rep["corrupt"] == 0
    assert moved.read_bytes() == b"one" * 100 + b"two" * 100


def test_rename_exchange_follows_both_files(dev, diskdir):
    a, b = diskdir / "a", diskdir / "b"
    code = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b = sys.argv[1], sys.argv[2]
fa = os.open(a, os.O_RDWR | os.O_CREAT, 0o644); fb = os.open(b, os.O_RDWR | os.O_CREAT, 0o644)
os.fsync(fa); os.fsync(fb); os.fsync(os.open(os.path.dirname(a), os.O_RDONLY))
os.pwrite(fa, b"a1" * 50, 0); os.fsync(fa); os.pwrite(fb, b"b1" * 50, 0); os.fsync(fb)
assert libc.renameat2(-100, a.encode(), -100, b.encode(), 2) == 0, ctypes.get_errno()  # RENAME_EXCHANGE
os.fsync(os.open(os.path.dirname(a), os.O_RDONLY))
os.pwrite(fa, b"a2" * 50, 100); os.fsync(fa); os.pwrite(fb, b"b2" * 50, 100); os.fsync(fb)
print("acked", flush=True); time.sleep(0.1); os.kill(os.getpid(), 9)
"""
    p = tdax_run(dev, code, a, b, check=None)
    assert "acked" in p.stdout, p.stderr
    want = {b: b"a1" * 50 + b"a2" * 50, a: b"b1" * 50 + b"b2" * 50}  # a's file is at b now
    assert {k: k.read_bytes() for k in want} == want
    for k in want:  # the power cut: both files back to their durable view
        shadow = Path(str(k) + ".tdax-durable")
        k.write_bytes(shadow.read_bytes() if shadow.exists() else b"")
    rep = json.loads(run(TDAX, "recover", "--device", dev, "--power-failure", "--json", check=0).stdout)
    assert rep["corrupt"] == 0
    assert {k: k.read_bytes() for k in want} == want, "acknowledged data lost"


# ---- O_SYNC / O_DSYNC go wherever the descriptor goes ---------------------

def test_an_inherited_o_dsync_descriptor_stays_synchronous(dev, diskdir):
    """After exec (policy thesis: the range is not upgraded, so the kernel
    must sync each write) every acknowledged write survives the cut, and a
    program without tdax sees O_DSYNC on the descriptor."""
    path = diskdir / "f"
    code = r"""
import os, subprocess, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_DSYNC, 0o644)
os.write(fd, b"parent\n")
flags = subprocess.run(["/usr/bin/python3", "-c", "import fcntl, os; print(fcntl.fcntl(%d, fcntl.F_GETFL) & os.O_DSYNC)" % fd],
                       pass_fds=(fd,), env={}, capture_output=True, text=True).stdout.strip()
print("kernel flag", flags, flush=True)
os.set_inheritable(fd, True)
os.execv(sys.executable, [sys.executable, "-c",
    "import os, time; fd=%d\nfor i in range(20): os.write(fd, b'exec %%d\\n' %% i)\nprint('acked', flush=True); time.sleep(0.1); os.kill(os.getpid(), 9)" % fd])
"""
    p = tdax_run(dev, code, path, policy="thesis", check=None)
    assert "kernel flag 4096" in p.stdout, p.stdout + p.stderr  # O_DSYNC
    assert "acked" in p.stdout, p.stderr
    want = b"parent\n" + b"".join(b"exec %d\n" % i for i in range(20))
    assert path.read_bytes() == want
    power_cut(dev, path)
    assert path.read_bytes() == want, "an acknowledged O_DSYNC write was lost"


def test_o_dsync_writes_at_the_file_position_keep_the_offset(dev, diskdir):
    """Through the twin, the application's descriptor still moves."""
    path = diskdir / "f"
    code = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_DSYNC, 0o644)
os.write(fd, b"abc"); os.write(fd, b"def")
assert os.lseek(fd, 0, os.SEEK_CUR) == 6
os.lseek(fd, 1, os.SEEK_SET); os.write(fd, b"X")
d = os.dup(fd); os.close(fd); os.write(d, b"Y")
assert os.lseek(d, 0, os.SEEK_CUR) == 3
print("ok")
"""
    assert tdax_run(dev, code, path).stdout.strip() == "ok"
    assert path.read_bytes() == b"aXYdef"


# LMDB's layout: its data file through a plain descriptor, its meta page
# through one opened with O_DSYNC (under MDB_NOSYNC never written). Phase 1
# writes through the plain one only; phase 2 (after a line on stdin) writes
# through the O_DSYNC one, each write acknowledged when it returns.
LMDB_LIKE = r"""
import os, sys, time
path = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
meta = os.open(path, os.O_WRONLY | os.O_DSYNC)
for i in range(300):
    os.pwrite(fd, b"d%05d" % i, 8192 + 6 * i)
print("plain", flush=True)
sys.stdin.readline()
for i in range(60):
    os.pwrite(meta, b"m%03d" % i, 4 * i)
print("acked", flush=True)
time.sleep(30)
"""


@pytest.mark.parametrize("policy", ["always", "thesis"])
def test_an_o_dsync_descriptor_waits_for_its_first_write(dev, voldisk, policy):
    """Opened and never written, an O_DSYNC descriptor leaves its file
    unregistered: the file's other descriptors write as without tdax (LMDB
    without syncs ran at 0.91 of itself while it registered the file at the
    open). Its first write registers the file; every write through it is
    durable when it returns, across a power cut."""
    path = voldisk.mnt / "data.mdb"
    with started(dev, LMDB_LIKE, path, policy=policy, env={"TDAX_WB_INTERVAL_MS": "10000"},
                 stdin=subprocess.PIPE) as p:
        assert p.stdout.readline().strip() == "plain", p.stderr.read()
        assert info(dev)["files_registered"] == 0, "a descriptor that never wrote registered its file"
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "acked", p.stderr.read()
        c = info(dev)
        assert c["files_registered"] == 1
        if policy == "always":  # the first write's sync is real (the file was unknown), the rest logged
            assert c["live_records"] >= 59, c
        killed_and_cut(p, dev, voldisk)
    data = path.read_bytes()
    assert data[:240] == b"".join(b"m%03d" % i for i in range(60)), "an acknowledged O_DSYNC write was lost"


def test_threads_writing_through_an_o_dsync_descriptor_as_it_registers_lose_nothing(dev, voldisk):
    """Four threads' first O_DSYNC writes race to register the file (and to
    give the descriptor its twin, manage.c): whichever way each write goes
    (the kernel's, synced by it; or coherent mode's, through the twin),
    each is durable when it returns."""
    code = r"""
import os, sys, threading, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_DSYNC, 0o644)
go = threading.Barrier(4)
def writer(t):
    go.wait()
    for i in range(150):
        os.pwrite(fd, b"%d%04d" % (t, i), 5 * (t * 150 + i))
ts = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print("acked", flush=True)
time.sleep(30)
"""
    path = voldisk.mnt / "f"
    want = b"".join(b"%d%04d" % (t, i) for t in range(4) for i in range(150))
    for attempt in range(3):
        path.unlink(missing_ok=True)
        with started(dev, code, path, env={"TDAX_WB_INTERVAL_MS": "10000"}) as p:
            assert p.stdout.readline().strip() == "acked", p.stderr.read()
            assert path.read_bytes() == want
            killed_and_cut(p, dev, voldisk)
        assert path.read_bytes() == want, f"attempt {attempt}: an acknowledged O_DSYNC write was lost"


def test_a_rename_finds_the_file_not_an_old_entry_of_its_inode_number(dev, diskdir):
    """A file removed by a program without tdax keeps its entry; a new file
    on the same inode number (ext4 reuses it at once) is another file, told
    apart by the inode generation. A rename of the new file must follow the
    new file's entry, or its records are unmatched after a power cut (the VM
    suite's append logs, after `rm -rf` between boots)."""
    code = r"""
import os, sys, time
b = sys.argv[1]
fd = os.open(b, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
print("ino", os.fstat(fd).st_ino, flush=True)
os.fsync(fd); os.fsync(os.open(os.path.dirname(b), os.O_RDONLY))
for i in range(20):
    os.write(fd, b"one %02d\n" % i); os.fdatasync(fd)
os.rename(b, b + ".old"); os.fsync(os.open(os.path.dirname(b), os.O_RDONLY))
for i in range(20):
    os.write(fd, b"two %02d\n" % i); os.fdatasync(fd)
print("acked", flush=True); time.sleep(0.1); os.kill(os.getpid(), 9)
"""
    for attempt in range(8):  # ext4 reuses a freed inode number at once, mostly
        a, b = diskdir / f"a{attempt}", diskdir / f"b{attempt}"
        tdax_run(dev, "import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644); "
                 "os.fsync(fd); os.write(fd, b'old'); os.fsync(fd)", a)
        ino = a.stat().st_ino
        a.unlink()  # without tdax: the entry stays
        p = tdax_run(dev, code, b, check=None)
        assert "acked" in p.stdout, p.stderr
        if f"ino {ino}\n" in p.stdout:
            break
    else:
        raise AssertionError("the inode number was never reused: nothing tested")
    moved = diskdir / f"b{attempt}.old"
    want = b"".join(b"one %02d\n" % i for i in range(20)) + b"".join(b"two %02d\n" % i for i in range(20))
    assert moved.read_bytes() == want
    rep = power_cut(dev, moved)
    assert all(f["outcome"] != "unmatched" for f in rep["files"]), rep
    assert moved.read_bytes() == want, "acknowledged data lost"


@pytest.mark.parametrize("attr", ["+a", "+i"])
@pytest.mark.parametrize("mode", ["coherent", "bypass"])
def test_an_append_only_or_immutable_file_is_left_to_the_kernel(dev, diskdir, attr, mode):
    """chattr +a lets a file be written only at its end, through O_APPEND;
    +i not at all. Recovery's replay at an offset would fail there (an
    open for writing without O_APPEND is refused: acknowledged records
    stranded in the device after a power cut), and so would bypass mode's
    write-ins (the application's 5th write failed with EPERM). tdax does not
    register such a file: its syncs are the kernel's, its writes only the
    application's."""
    f = diskdir / "log"
    f.write_bytes(b"")
    subprocess.run(["chattr", attr, str(f)], check=True)
    code = r"""
import os, sys, time
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
except OSError as e:
    print("open", e.errno); sys.exit(0)
for i in range(300):
    try:
        os.write(fd, b"%06d\n" % i); os.fdatasync(fd)
    except OSError as e:
        print("write", i, e.errno); break
    if i == 0:
        time.sleep(0.1)
print("done")
"""
    try:
        env = {"TDAX_MODE": "bypass"} if mode == "bypass" else {}
        want = run(PY, "-c", code, f, env={"LD_PRELOAD": ""}).stdout
        got = tdax_run(dev, code, f, env=env, check=None)
        assert got.stdout == want, got.stderr
        c = info(dev)
        assert c["counters"]["light_syncs"] == 0 and c["live_records"] == 0 and c["counters"]["promotions"] == 0, c
        if attr == "+a":
            assert f.read_bytes() == 2 * b"".join(b"%06d\n" % i for i in range(300))
    finally:
        subprocess.run(["chattr", attr.replace("+", "-"), str(f)], check=True)


def test_a_file_made_append_only_after_its_records_is_recovered_once_the_flag_goes(dev, diskdir):
    """Made append-only after tdax registered it, a file cannot be opened
    for recovery's writes: `tdax recover` says why and what to do, keeps
    the records, and a second run after `chattr -a` brings every
    acknowledged append back."""
    f = diskdir / "log"
    code = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(100):
    os.write(fd, b"%06d\n" % i); os.fdatasync(fd)
print("acked", flush=True); time.sleep(0.1); os.kill(os.getpid(), 9)
"""
    p = tdax_run(dev, code, f, check=None)
    assert "acked" in p.stdout, p.stderr
    assert info(dev)["counters"]["light_syncs"] >= 90
    shadow = Path(str(f) + ".tdax-durable")
    f.write_bytes(shadow.read_bytes() if shadow.exists() else b"")  # the power cut
    subprocess.run(["chattr", "+a", str(f)], check=True)
    try:
        out = run(TDAX, "recover", "--device", dev, "--power-failure", check=3).stdout  # (3: records kept)
        assert "not-permitted" in out and "chattr -a" in out, out
        assert info(dev)["live_records"] > 0
    finally:
        subprocess.run(["chattr", "-a", str(f)], check=True)
    run(TDAX, "recover", "--device", dev, "--power-failure", check=0)
    assert f.read_bytes() == b"".join(b"%06d\n" % i for i in range(100))
