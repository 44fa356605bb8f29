"""Policy always from a file's first sync on (src/preload/manage.c may_wait,
unregistered.c, coherent.c tdax_coherent_cover_made, dirsync.c): a file
that is never synced costs no entry and no record; the first sync of a
small file the process made (and may read back) is answered from the log,
its creation and every byte it holds logged then; a directory sync after
it is answered from the log only if nothing else changed the directory.
Power cuts are real ones, of an ext4 on a volatile disk."""
import json
import shutil

import pytest

from conftest import TDAX, info, run, tdax_run

# No write-back pass before the crash: it would make everything durable.
HOLD = {"TDAX_WB_INTERVAL_MS": "10000"}

MADE = r"""
import os, sys
path, size, access, other = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
dfd = os.open(os.path.dirname(path), os.O_RDONLY)
os.close(os.open(path + ".other", os.O_RDWR | os.O_CREAT))  # tdax attaches (at a first open)
os.fsync(dfd)                            # real: the directory's guard starts here
fd = os.open(path, (os.O_RDWR if access == "rw" else os.O_WRONLY) | os.O_CREAT, 0o640)
data = bytes((i * 7 + i // 4096) % 251 for i in range(size))
for off in range(0, size, 1000):        # many small writes, none logged yet
    os.pwrite(fd, data[off:off + 1000], off)
if other == "mkdir":
    os.mkdir(os.path.join(os.path.dirname(path), "sub"))  # a change the log does not hold
os.fdatasync(fd)                         # acknowledged
if other != "no-dir-sync":
    os.fsync(dfd)                        # the name acknowledged
print("done", flush=True)
os._exit(0)  # no write-back pass (a checkpoint would make it all durable); the counters kept
"""


def expected(size):
    return bytes((i * 7 + i // 4096) % 251 for i in range(size))


def made_and_cut(dev, voldisk, size, access="rw", other="none"):
    """MADE under policy always, the power cut and the reboot: the
    counters as the run left them."""
    path = voldisk.mnt / "made"
    p = tdax_run(dev, MADE, path, size, access, other, env=HOLD, check=None)
    assert "done" in p.stdout, p.stdout + p.stderr
    counters = info(dev)["counters"]
    voldisk.cut()
    voldisk.reboot()
    return path, counters


def recover(dev):
    r = run(TDAX, "recover", "--device", dev, "--power-failure", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def test_a_file_never_synced_costs_no_entry_and_no_record(dev, diskdir):
    """SQLite's rollback journal with synchronous=OFF, a temporary file:
    made, written, removed, never synced. Written to an existing file
    without a sync, the same. (A file made write-only is registered at its
    open: its first sync could not read it back.)"""
    code = r"""
import os, sys
d = sys.argv[1]
for i in range(50):
    fd = os.open(os.path.join(d, "journal"), os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, b"j" * 4096); os.pwrite(fd, b"k" * 512, 0)
    os.close(fd)
    os.unlink(os.path.join(d, "journal"))
fd = os.open(os.path.join(d, "old"), os.O_RDWR)
os.write(fd, b"after"); os.close(fd)
"""
    (diskdir / "old").write_bytes(b"before")
    tdax_run(dev, code, diskdir, check=0)
    c = info(dev)["counters"]
    assert c["logged_writes"] == 0 and c["logged_creates"] == 0 and c["logged_bytes"] == 0, c
    assert info(dev)["files_registered"] == 0
    tdax_run(dev, code.replace("os.O_RDWR | os.O_CREAT", "os.O_WRONLY | os.O_CREAT"), diskdir, check=0)
    c = info(dev)["counters"]
    assert c["logged_creates"] == 50 and c["logged_writes"] == 100, c


def test_a_file_at_the_inode_number_of_a_removed_one_with_an_entry_waits_all_the_same(dev, diskdir):
    """A synced stream's entry stays after its file is closed (files.h); a
    program without tdax removes the file, and the file system gives its
    inode number to the next file made -- here at once, in a directory made
    anew. That file has no entry: it waits for its first sync like any
    other (manage.c has_entry), and never synced, it costs no entry and no
    record (it was registered at its open, its creation logged and every
    write on the registered path, because an entry had that number). The
    removed file's entry, which held nothing, goes at that open: the next
    file at the number pays no look at its identity."""
    stream = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
for i in range(10):
    os.write(fd, b"s" * 100); os.fdatasync(fd)
print(os.fstat(fd).st_ino)
"""
    fresh = r"""
import os, sys
os.mkdir(os.path.dirname(sys.argv[1]))
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"f" * 4096); os.close(fd)
print(os.stat(sys.argv[1]).st_ino)
"""
    for attempt in range(10):
        # (a path of its own each time: an earlier try's entry stays, and
        # names its own path)
        path = diskdir / f"d{attempt}" / "f"
        path.parent.mkdir()
        old = int(tdax_run(dev, stream, path).stdout)
        before = info(dev)
        assert str(path) in [f["path"] for f in status_files(dev)], "the stream's entry did not stay"
        shutil.rmtree(path.parent)
        if int(tdax_run(dev, fresh, path).stdout) == old:
            break
    else:
        pytest.fail("ext4 gave no new file the inode number of the removed one in 10 tries")
    after = info(dev)
    assert after["files_registered"] == before["files_registered"] - 1, (before, after)
    assert str(path) not in [f["path"] for f in status_files(dev)]
    for k in ("logged_creates", "logged_writes", "unlogged_writes"):
        assert after["counters"][k] == before["counters"][k], k


def test_a_file_whose_stream_is_over_waits_for_its_first_sync_when_opened_again(dev, diskdir):
    """A database synced under tdax, then run without syncs: its entry
    stayed (a stream's, files.h), and every write of the second run took
    the registered path. Opened again a second after its last sync
    (TDAX_FILE_QUIET_NS), the entry goes unless a descriptor of the
    opener's holds it, and the file waits for its first sync (its writes
    the kernel's alone, not counted); held, it keeps its entry and tdax
    sees every write."""
    stream = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
for i in range(10):
    os.write(fd, b"s" * 100); os.fdatasync(fd)
"""
    cold = r"""
import os, sys, time
held = os.open(sys.argv[1], os.O_RDWR) if sys.argv[2:] else None
time.sleep(1.2)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
for i in range(100):
    os.write(fd, b"c" * 100)
os.close(fd)
"""
    path = diskdir / "db"

    def second_run(*args):
        before = info(dev)
        tdax_run(dev, cold, path, *args)
        after = info(dev)
        seen = [sum(i["counters"][k] for k in ("logged_writes", "unlogged_writes")) for i in (before, after)]
        return seen[1] - seen[0], after["files_registered"] - before["files_registered"]

    tdax_run(dev, stream, path)
    # The stream is over (more than a second since the last sync): gone.
    assert second_run() == (0, -1)
    assert str(path) not in [f["path"] for f in status_files(dev)]
    # Held by a descriptor of the opener's, opened while the stream was not
    # over: the entry stays, every write is seen.
    tdax_run(dev, stream, path)
    assert second_run("held") == (100, 0)
    assert str(path) in [f["path"] for f in status_files(dev)]
    assert path.stat().st_size == 10 * 100 + 2 * 100 * 100  # (the second stream wrote over the first)


def status_files(dev):
    return json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)["files"]


@pytest.mark.parametrize("size", [0, 10, 4096, 9000, 256 << 10])
def test_the_first_sync_of_a_made_file_is_answered_from_the_log(dev, voldisk, size):
    """Its creation and every byte are records: the cut undid the creation
    (no real sync made anything durable), recovery makes the file again
    with what was acknowledged -- bytes, size, mode."""
    path, c = made_and_cut(dev, voldisk, size)
    assert c["light_syncs"] == 1 and c["real_syncs"] == 0, c
    assert c["logged_creates"] == 1 and c["logged_bytes"] == size and c["logged_writes"] == 0, c
    assert c["light_dir_syncs"] == 1, c
    assert not path.exists()
    rep = recover(dev)
    assert path.read_bytes() == expected(size), rep
    assert path.stat().st_mode & 0o7777 == 0o640
    assert "made anew" in rep["files"][0]["reason"], rep


def test_a_made_file_larger_than_the_copy_bound_is_synced_for_real(dev, voldisk):
    """Past TDAX_COHERENT_COVER_MAX (256 KiB) the copy would cost more than
    the sync: the kernel's, which makes the bytes and the name durable."""
    size = (256 << 10) + 1
    path, c = made_and_cut(dev, voldisk, size, other="no-dir-sync")
    assert c["real_syncs"] == 1 and c["light_syncs"] == 0 and c["logged_bytes"] == 0, c
    assert path.read_bytes() == expected(size)  # without recovery: the kernel had it


def test_a_made_file_synced_without_a_directory_sync_is_made_anew(dev, voldisk):
    """The file's sync alone answers for its name as an ext4 fsync does:
    recovery makes it again."""
    path, c = made_and_cut(dev, voldisk, 5000, other="no-dir-sync")
    assert c["light_syncs"] == 1 and c["real_syncs"] == 0, c
    assert not path.exists()
    recover(dev)
    assert path.read_bytes() == expected(5000)


def test_a_directory_changed_by_something_else_is_synced_for_real(dev, voldisk):
    """A mkdir between the file's open and its first sync: the log holds
    the file's creation then, but not the new directory, so the directory
    sync must be the kernel's -- after the cut both are there."""
    path, c = made_and_cut(dev, voldisk, 5000, other="mkdir")
    assert c["light_syncs"] == 1 and c["light_dir_syncs"] == 0, c
    assert (voldisk.mnt / "sub").is_dir() and path.exists()  # the real directory sync had both
    recover(dev)
    assert path.read_bytes() == expected(5000)


def test_a_made_file_opened_write_only_is_registered_at_its_open(dev, voldisk):
    """Its first sync could not read it back: its creation and its writes
    are records from the open on, as before."""
    path, c = made_and_cut(dev, voldisk, 5000, access="wo")
    assert c["light_syncs"] == 1 and c["logged_creates"] == 1 and c["logged_writes"] == 5, c
    assert not path.exists()
    recover(dev)
    assert path.read_bytes() == expected(5000)


def test_writes_of_another_thread_during_the_first_sync_are_kept(dev, voldisk):
    """A writer thread keeps writing while the first sync copies the file;
    a second sync after the writer is done answers for every write. All of
    them are there after the cut, in each of 20 files: a write logged while
    the copy ran may be older in the log than the bytes the copy read
    before it, and a copy answered from the log then would replay those
    over it (the guards make that sync real)."""
    code = r"""
import os, sys, threading
d = sys.argv[1]
def chunk(f, i):
    return (b"%02d:%05d|" % (f, i)) * 10
os.close(os.open(os.path.join(d, "other"), os.O_RDWR | os.O_CREAT))
dfd = os.open(d, os.O_RDONLY); os.fsync(dfd)
acked = []
for f in range(20):
    fd = os.open(os.path.join(d, "f%d" % f), os.O_RDWR | os.O_CREAT, 0o644)
    done = [0]
    started = threading.Event()
    def writer():
        for i in range(1500):
            os.pwrite(fd, chunk(f, i), i * 100)
            done[0] = i + 1
            if i == 20:
                started.set()
    t = threading.Thread(target=writer); t.start()
    started.wait()
    os.fdatasync(fd)            # the first: copies the file while the writer writes
    t.join()
    os.fdatasync(fd)            # every write acknowledged
    acked.append(done[0])
os.fsync(dfd)
print("acked", " ".join(map(str, acked)), flush=True)
os._exit(0)
"""
    p = tdax_run(dev, code, voldisk.mnt, env=HOLD, check=None)
    assert "acked" in p.stdout, p.stdout + p.stderr
    acked = [int(x) for x in p.stdout.split("acked")[1].split()]
    c = info(dev)["counters"]
    assert c["light_syncs"] + c["real_syncs"] == 40 and c["logged_creates"] >= 1, c  # copies ran
    voldisk.cut()
    voldisk.reboot()
    recover(dev)
    for f, n in enumerate(acked):
        data = (voldisk.mnt / ("f%d" % f)).read_bytes()
        for i in range(n):  # 90 bytes at every 100th
            assert data[i * 100:i * 100 + 90] == (b"%02d:%05d|" % (f, i)) * 10, (f, i, n, len(data))


def test_a_write_that_raced_the_registration_of_its_file_makes_the_next_sync_real(dev, voldisk):
    """A thread's pwrite enters unregistered mode; before its bytes reach the
    kernel, another thread's first sync registers the file and copies it
    (without them). The write's look after the kernel's call must see that
    the descriptor has an entry now -- its gen is then the entry's, equal to
    the device's count of registrations here (both 1), which alone says
    "nothing moved" -- and make the next sync real, or the bytes would be
    in no record and that sync answered from the log."""
    flag = voldisk.mnt.parent / "pause"
    code = r"""
import os, sys, threading, time
d, flag = sys.argv[1], sys.argv[2]
fd = os.open(os.path.join(d, "f"), os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"first" + b"." * 195, 0)          # (RACED lands inside: the size guard cannot see it)
os.close(os.open(flag, os.O_RDWR | os.O_CREAT))   # pwrites in unregistered mode wait from now on
t = threading.Thread(target=os.pwrite, args=(fd, b"RACED", 100))
t.start()
time.sleep(0.2)                                  # it waits before the kernel's call
os.fdatasync(fd)                                 # registers and copies the file
os.unlink(flag); t.join()                        # the write lands, in unregistered mode
os.fdatasync(fd)                                 # acknowledges it
os.fsync(os.open(d, os.O_RDONLY))
print("done", flush=True)
os._exit(0)
"""
    p = tdax_run(dev, code, voldisk.mnt, flag, check=None,
                 env=dict(HOLD, TDAX_TEST_UNREGISTERED_PAUSE_IF=str(flag)))
    assert "done" in p.stdout, p.stdout + p.stderr
    c = info(dev)["counters"]
    voldisk.cut()
    voldisk.reboot()
    recover(dev)
    data = (voldisk.mnt / "f").read_bytes()
    assert data[:5] == b"first" and data[100:105] == b"RACED" and len(data) == 200, data
    assert c["real_syncs"] == 1 and c["light_syncs"] == 1, c  # the second is the kernel's
