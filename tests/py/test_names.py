"""Names of files with records (src/preload/names.c): an unlink, a rename
of or over such a file, costs no sync; a removed file's records stay until the write-back
thread has made the removal durable (a directory sync), because until then
a power cut can bring the file back -- a replaced one must then come back
with what was acknowledged, an unlinked one is unlinked again. A created
file's creation is a record: recovery makes it again if the cut undid it.
Recovery applies records only to the very file that wrote
them: a new file on the removed one's name and inode number never takes
them. Power cuts here are real ones, of an ext4 on a volatile disk."""
import json
import os
import time

import pytest

from conftest import TDAX, info, run, started, tdax_run

# The write-back thread must not run before the crash (its first pass would
# make the removal durable and let the records go): a pass every 10 s, and
# APP waits for the one its upgrade woke before it changes a name.
HOLD = {"TDAX_WB_INTERVAL_MS": "10000"}

APP = r"""
import os, sys, time
path, how = sys.argv[1], sys.argv[2]
dfd = os.open(os.path.dirname(path), os.O_RDONLY)
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"old content on flash"); os.fsync(fd); os.fsync(dfd)  # durable, name and all
os.pwrite(fd, b"ACKED", 0); os.fdatasync(fd)                        # lightweight: acknowledged
old_ino = os.fstat(fd).st_ino
os.close(fd)
time.sleep(0.5)  # the write-back pass the upgrade woke is over (late on a loaded machine)
if how == "unlink":
    os.unlink(path)
elif how == "rename-over":
    new = os.open(path + ".new", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(new, b"the replacement"); os.fsync(new); os.close(new)
    os.rename(path + ".new", path)
elif how.startswith("rename"):
    os.rename(path, path + ".moved")                            # a record, no sync
    if how == "rename-durable":
        os.fsync(dfd)
    fd = os.open(path + ".moved", os.O_WRONLY)
    os.pwrite(fd, b"MOVED", 6); os.fdatasync(fd)                # lightweight: acknowledged
elif how == "truncate":
    os.truncate(path, 8)                                        # a record, no sync
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, b"Z", 12); os.fdatasync(fd)                   # lightweight: acknowledged
elif how == "reuse":
    os.unlink(path)
    new = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(new, b"a new file"); os.fsync(new); os.fsync(dfd)     # the removal is durable now
    print("inode reused" if os.fstat(new).st_ino == old_ino else "other inode", flush=True)
print("done", flush=True)
os.kill(os.getpid(), 9)  # before any write-back pass
"""


def killed_and_cut(dev, voldisk, code, *args, records=0):
    """code under tdax, holding its records (HOLD), to its "done" and its
    SIGKILL of itself; at least `records` of them live (nothing synced the
    files since the acknowledged writes: a sync would have released them);
    then the power cut and the reboot. The run's result."""
    p = tdax_run(dev, code, *args, env=HOLD, check=None)
    assert "done" in p.stdout, p.stdout + p.stderr
    assert info(dev)["live_records"] >= records, p.stdout + p.stderr
    voldisk.cut()
    voldisk.reboot()
    return p


def crash_after(dev, voldisk, how, records=1):
    path = voldisk.mnt / "f"
    p = killed_and_cut(dev, voldisk, APP, path, how, records=records)
    rep = json.loads(run(TDAX, "recover", "--device", dev, "--power-failure", "--json").stdout)
    return path, p.stdout, rep


def test_a_file_replaced_and_brought_back_by_a_power_cut_has_what_was_acknowledged(dev, voldisk):
    path, _, rep = crash_after(dev, voldisk, "rename-over")
    # Nothing made the rename durable (no journal commit after it): the
    # old file is back under its name, and with it its records.
    assert path.read_bytes() == b"ACKEDontent on flash", rep  # "old c" overwritten
    assert rep["applied"] >= 1


def test_a_file_unlinked_and_brought_back_by_a_power_cut_is_unlinked_again(dev, voldisk):
    """The application removed it: recovery does so again rather than let
    a power cut undo an acknowledged removal (a later directory sync may
    have been answered)."""
    path = voldisk.mnt / "f"
    killed_and_cut(dev, voldisk, APP, path, "unlink")
    assert path.exists()  # the removal was not durable: the file is back
    r = run(TDAX, "recover", "--device", dev, "--power-failure", "--json")
    rep = json.loads(r.stdout)
    assert r.returncode == 0 and not path.exists(), rep
    assert [(f["outcome"], f["reason"]) for f in rep["files"]] == \
        [("discarded", "removed again: the application had removed it")], rep
    assert info(dev)["live_records"] == 0 and info(dev)["files_registered"] == 0


@pytest.mark.parametrize("how", ["rename", "rename-durable"])
def test_a_renamed_file_is_found_under_whichever_name_the_power_cut_left(dev, voldisk, how):
    """A rename of a file with records syncs nothing: a record holds both
    names, and recovery looks under each."""
    path, _, rep = crash_after(dev, voldisk, how, records=3)  # write, rename, write
    where = path.with_name("f.moved") if how == "rename-durable" else path
    assert not (path.with_name("f.moved") if where == path else path).exists()
    assert where.read_bytes() == b"ACKEDoMOVED on flash", rep
    assert rep["files"][0]["path"] == str(where) and rep["files"][0]["outcome"] == "recovered", rep


def test_a_truncate_by_name_is_replayed_in_order_after_a_power_cut(dev, voldisk):
    path, _, rep = crash_after(dev, voldisk, "truncate", records=3)  # write, truncate, write
    assert path.read_bytes() == b"ACKEDont" + b"\0" * 4 + b"Z", rep


def test_a_new_file_on_a_removed_files_name_and_inode_never_takes_its_records(dev, voldisk):
    path, out, rep = crash_after(dev, voldisk, "reuse")
    print(out)  # whether ext4 gave the new file the old inode number
    assert path.read_bytes() == b"a new file", rep
    old = [f for f in rep["files"] if f["outcome"] != "recovered"]
    new = [f for f in rep["files"] if f["outcome"] == "recovered"]
    # Removed by the application (tdax saw it): let go, not reported as unmatched.
    assert old and old[0]["outcome"] == "discarded", rep
    # What was applied is the new file's own: its creation and its write.
    assert [f["bytes"] for f in new] == [len(b"a new file")] and rep["applied"] == 2, rep


def test_records_of_a_file_created_and_never_synced_go_if_the_cut_undid_it(dev, voldisk):
    """Every sync of a new entry up to its first real one is real, so none of
    these records was acknowledged: recovery lets them go (found in
    tests/vm: before, such a file was "unmatched" until someone passed
    --discard-unmatched, and every recovery after failed)."""
    path = voldisk.mnt / "new"
    code = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"written, never synced")
print("done", flush=True)
os.kill(os.getpid(), 9)
"""
    killed_and_cut(dev, voldisk, code, path, records=1)
    r = run(TDAX, "recover", "--device", dev, "--power-failure", "--json")
    rep = json.loads(r.stdout)
    assert r.returncode == 0 and not path.exists(), rep
    assert [f["outcome"] for f in rep["files"]] == ["discarded"], rep


@pytest.mark.parametrize("how", ["created", "created-renamed"])
def test_a_created_file_synced_lightly_is_made_anew_if_the_cut_undid_it(dev, voldisk, how):
    """A new file's creation is a record: its first sync is lightweight
    (no real sync made the name durable), and recovery makes the file
    again, where it was last renamed to, with what was acknowledged."""
    path = voldisk.mnt / "new"
    code = r"""
import os, sys
path, how = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o640)
os.write(fd, b"created, written"); os.fdatasync(fd)  # lightweight: acknowledged
if how == "created-renamed":
    os.rename(path, path + ".moved")
os.write(fd, b", synced"); os.fsync(fd)
print("done", flush=True)
os.kill(os.getpid(), 9)
"""
    killed_and_cut(dev, voldisk, code, path, how, records=3)
    where = path.with_name("new.moved") if how == "created-renamed" else path
    # No real sync made the creation durable: the cut undid it.
    assert not path.exists() and not where.exists()
    r = run(TDAX, "recover", "--device", dev, "--power-failure", "--json")
    rep = json.loads(r.stdout)
    assert r.returncode == 0 and where.read_bytes() == b"created, written, synced", rep
    assert where.stat().st_mode & 0o7777 == 0o640, oct(where.stat().st_mode)
    f = rep["files"][0]
    assert f["outcome"] == "recovered" and "made anew" in f["reason"] and f["path"] == str(where), rep
    assert info(dev)["live_records"] == 0 and info(dev)["files_registered"] == 0


@pytest.mark.parametrize("born", ["before", "after"])
def test_a_file_made_anew_moves_aside_an_older_one_the_cut_brought_back(dev, voldisk, born):
    """A file tdax never held records of is unlinked (no sync makes that
    durable) and a new one is made at its name and synced lightly: the cut
    undoes both, bringing the old file back to the name. Recovery makes the
    acknowledged file again at its name and keeps the old one, born before
    it, beside it (never deleted, never overwritten); a file born after it
    is never moved."""
    path = voldisk.mnt / "scratch"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)  # made and durable without tdax
    os.write(fd, b"the old file"); os.fsync(fd); os.close(fd)
    dfd = os.open(voldisk.mnt, os.O_RDONLY); os.fsync(dfd); os.close(dfd)
    old_ino = path.stat().st_ino
    code = r"""
import os, sys
path = sys.argv[1]
os.unlink(path)                                         # no record: tdax never held it
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"ACKED"); os.fdatasync(fd)                # lightweight: acknowledged
print("done", flush=True)
os.kill(os.getpid(), 9)
"""
    killed_and_cut(dev, voldisk, code, path, records=2)
    assert path.read_bytes() == b"the old file"  # the cut undid the unlink and the creation
    if born == "after":
        # Made at the name after the acknowledged file was (by someone
        # tdax did not see): not tdax's to move. Reported, records kept.
        path.unlink()
        path.write_bytes(b"a newer file")
        r = run(TDAX, "recover", "--device", dev, "--power-failure", "--json")
        rep = json.loads(r.stdout)
        assert r.returncode == 3 and path.read_bytes() == b"a newer file", rep
        assert [f["outcome"] for f in rep["files"]] == ["unmatched"], rep
        assert sorted(os.listdir(voldisk.mnt)) == ["lost+found", "scratch"]
        return
    r = run(TDAX, "recover", "--device", dev, "--power-failure", "--json")
    rep = json.loads(r.stdout)
    aside = path.with_name("scratch.tdax-displaced.%d" % old_ino)
    assert r.returncode == 0 and path.read_bytes() == b"ACKED", rep
    assert aside.read_bytes() == b"the old file", sorted(os.listdir(voldisk.mnt))
    f = rep["files"][0]
    assert f["outcome"] == "recovered" and "made anew" in f["reason"] and str(aside) in f["reason"], rep


def after_let_go(dev, seconds=4):
    """The device once a write-back pass has let removed files go (records
    released, then the counters flushed), or as it is after `seconds`."""
    for _ in range(seconds * 100):
        i = info(dev)
        if i["live_records"] == 0 and i["counters"]["dir_syncs"]:
            break
        time.sleep(0.01)
    return i


def test_an_unlink_costs_no_sync_and_the_write_back_lets_the_records_go(dev, diskdir):
    """The default write-back makes the removal durable within a pass and
    releases the records and the entry; the application never waits."""
    path = diskdir / "f"
    code = r"""
import os, sys, time
path = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.fsync(fd)
os.write(fd, b"x" * 5000); os.fdatasync(fd); os.close(fd)
os.unlink(path)
print("unlinked", flush=True)
time.sleep(60)
"""
    with started(dev, code, path) as p:
        assert p.stdout.readline().strip() == "unlinked"
        i = after_let_go(dev)
        c = i["counters"]
        assert i["live_records"] == 0 and i["files_registered"] == 0, i
        # Its creation is a record: no sync of it was real.
        assert c["dir_syncs"] == 1 and c["checkpoints"] == 0 and c["real_syncs"] == 0, c
        assert c["logged_creates"] == 1 and c["light_syncs"] == 2, c
    assert not path.exists()


def test_removals_in_one_directory_cost_one_directory_sync(dev, diskdir):
    """SQLite's rollback journal is created and removed at every transaction:
    the write-back pass lets go of every removed file of a directory after
    one sync of it, not one each."""
    code = r"""
import os, sys, time
d = sys.argv[1]
for i in range(8):
    fd = os.open(os.path.join(d, "j%d" % i), os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, b"x" * 100); os.fdatasync(fd); os.close(fd)
for i in range(8):
    os.unlink(os.path.join(d, "j%d" % i))
print("unlinked", flush=True)
time.sleep(60)
"""
    with started(dev, code, diskdir, env={"TDAX_WB_INTERVAL_MS": "1000"}) as p:
        assert p.stdout.readline().strip() == "unlinked"
        i = after_let_go(dev)
        c = i["counters"]
        assert i["live_records"] == 0 and i["files_registered"] == 0, i
        assert c["dir_syncs"] == 1 and c["real_syncs"] == 0 and c["logged_creates"] == 8, c


# A directory sync is answered from the log only where a change of the
# directory after a look at its change time gets a later one (Linux 6.13+
# fine-grained timestamps): elsewhere it is real (src/preload/dirsync.c).
FINE_TIMES = tuple(int(x) for x in os.uname().release.split(".")[:2]) >= (6, 13)

DIRSYNC_APP = r"""
import os, subprocess, sys
d, how = sys.argv[1], sys.argv[2]
dfd = os.open(d, os.O_RDONLY)
fd = os.open(os.path.join(d, "old"), os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"old, with records"); os.fsync(fd)
os.fsync(dfd)                                          # real: the first of the directory
if how.startswith("logged"):
    fd = os.open(os.path.join(d, "new"), os.O_WRONLY | os.O_CREAT, 0o644)  # a create record
    os.write(fd, b"created")                           # (no sync of the file: the directory's
                                                       # promises its name)
    if how == "logged-remove":                         # the C library's remove(), its own unlink
        import ctypes
        assert ctypes.CDLL(None).remove(os.path.join(d, "old").encode()) == 0
    else:
        os.unlink(os.path.join(d, "old"))              # recovery unlinks it again
elif how == "foreign":
    subprocess.run(["touch", os.path.join(d, "x")], env={})  # a process without tdax
else:                                                  # no record: the next sync is real
    {"mkdir": lambda: os.mkdir(os.path.join(d, "x")),
     "rmdir": lambda: os.rmdir(os.path.join(d, "made-before")),
     "link": lambda: os.link(os.path.join(d, "old"), os.path.join(d, "x")),
     "symlink": lambda: os.symlink("old", os.path.join(d, "x")),
     "mkfifo": lambda: os.mkfifo(os.path.join(d, "x")),
     "mknod": lambda: os.mknod(os.path.join(d, "x"), 0o600 | 0o010000),  # S_IFIFO
     "rename": lambda: os.rename(os.path.join(d, "old"), os.path.join(d, "x")),
     "unlink-unregistered": lambda: os.unlink(os.path.join(d, "made-before-file")),
     }[how]()
os.fsync(dfd)
print("done", flush=True)
os.kill(os.getpid(), 9)
"""


@pytest.mark.parametrize("how", ["logged", "logged-remove"])
def test_a_directory_sync_after_changes_the_log_holds_is_lightweight(dev, voldisk, how):
    """A create and an unlink of a file with records are in the log: the
    directory's sync after them is answered from it, and recovery after a
    power cut makes the one again and removes the other. The unlink made by
    the C library's remove() too: before 2026-11-28 no hook saw it, and
    recovery made the removed file again from its records."""
    d = voldisk.mnt
    killed_and_cut(dev, voldisk, DIRSYNC_APP, d, how)
    if not FINE_TIMES:  # the kernel's sync made both changes durable
        assert (d / "new").exists() and not (d / "old").exists()
        return
    # Lightweight: nothing made the changes durable.
    assert not (d / "new").exists() and (d / "old").exists()
    rep = json.loads(run(TDAX, "recover", "--device", dev, "--power-failure", "--json").stdout)
    assert (d / "new").read_bytes() == b"created" and not (d / "old").exists(), rep


@pytest.mark.parametrize("how", ["foreign", "mkdir", "rmdir", "link", "symlink", "mkfifo", "mknod",
                                 "rename", "unlink-unregistered"])
def test_a_directory_sync_after_a_change_the_log_does_not_hold_is_real(dev, voldisk, how):
    """A file created by a process without tdax, or a change the log holds
    nothing of (a directory made or removed, a link, a symlink, a FIFO by
    mkfifo or mknod, a rename, an unlink of a file without records): the
    log cannot bring it back, so the directory's sync is the kernel's and
    the change survives a power cut as it is."""
    d = voldisk.mnt
    (d / "made-before").mkdir()
    (d / "made-before-file").write_bytes(b"")
    os.sync()
    killed_and_cut(dev, voldisk, DIRSYNC_APP, d, how)
    gone = {"rmdir": "made-before", "rename": "old", "unlink-unregistered": "made-before-file"}
    if how in gone:
        assert not (d / gone[how]).exists()
    if how not in ("rmdir", "unlink-unregistered"):
        assert os.path.lexists(d / "x")


def test_a_writer_killed_between_a_rename_and_its_record_leaves_its_file_found(dev, diskdir):
    """The rename is a record before the kernel's rename: a process killed
    right after the kernel's (a test aid) leaves recovery the name to look
    under -- its records written into the file there, none kept for a file
    it cannot find (it used to: unmatched, exit 3)."""
    code = r"""
import os, sys
old, new = sys.argv[1] + "/log", sys.argv[1] + "/log.old"
fd = os.open(old, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(50):
    os.write(fd, b"%04d\n" % i); os.fdatasync(fd)
print("synced", flush=True)
os.environ["TDAX_TEST_KILL_AFTER_RENAME"] = "1"
os.rename(old, new)
"""
    p = tdax_run(dev, code, diskdir, check=-9)
    assert "synced" in p.stdout
    assert not (diskdir / "log").exists() and (diskdir / "log.old").exists()
    r = run(TDAX, "recover", "--device", dev, "--json", check=0)
    rep = json.loads(r.stdout)
    assert [(f["path"], f["outcome"]) for f in rep["files"]] == [(str(diskdir / "log.old"), "recovered")], rep
    assert (diskdir / "log.old").read_bytes() == b"".join(b"%04d\n" % i for i in range(50))


WATCH = 64  # TDAX_DIRSYNC_WATCH, src/core/dirs.h


@pytest.mark.skipif(not FINE_TIMES, reason="every directory sync is real without fine-grained times")
def test_the_watch_on_a_directory_lapses_after_many_changes_and_the_next_sync_is_real(dev, diskdir):
    """A directory sync keeps the next WATCH changes of names looked at
    (two statx each), so that the one after may be answered from the log;
    past them nothing is looked at -- a program that creates and removes
    files far more often than it syncs a directory pays nothing -- and the
    next directory sync is real, which sets the watch again."""
    code = r"""
import os, sys
d, watch = sys.argv[1], int(sys.argv[2])
dfd = os.open(d, os.O_RDONLY)
def made(name):
    fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT, 0o644)  # a create record
    os.write(fd, b"x"); os.close(fd)
made("first"); os.fsync(dfd)                  # real: the directory's first
made("held"); os.fsync(dfd)                   # light: the log holds the create
for i in range(watch + 8):                    # the watch lapses
    made("f%d" % i)
os.fsync(dfd)                                 # real: changes went unlooked at
made("again"); os.fsync(dfd)                  # light again
"""
    before = info(dev)["counters"]
    tdax_run(dev, code, diskdir, WATCH)
    c = info(dev)["counters"]
    assert c["light_dir_syncs"] - before["light_dir_syncs"] == 2, c
    assert c["logged_creates"] - before["logged_creates"] >= WATCH + 11, c


SAME_NAME = r"""
import os, sys
a, b, link = sys.argv[1:4]
for d, data in ((a, b"in a"), (b, b"in b")):  # "j" in each: the name the last file was opened by
    os.chdir(d)
    fd = os.open("j", os.O_WRONLY | os.O_CREAT, 0o644)
    os.fsync(fd); os.fsync(os.open(".", os.O_RDONLY))   # durable, name and all
    os.write(fd, data); os.fdatasync(fd)                # lightweight: acknowledged
os.chdir(a)
for target, data in (("t1", b"one"), ("t2", b"two")):   # the same link, to another file
    os.open(target, os.O_WRONLY | os.O_CREAT, 0o644)
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(os.path.join(a, target), link)
    os.fsync(os.open(".", os.O_RDONLY))
    fd = os.open(link, os.O_WRONLY)
    os.fsync(fd)
    os.write(fd, data); os.fdatasync(fd)
print("done", flush=True)
os.kill(os.getpid(), 9)
"""


def test_files_opened_by_one_name_are_each_found_at_their_own_path(dev, voldisk):
    """A thread tries the path it registered a file at for the next file
    opened by the same name (manage.c: the readlink it saves); another
    directory, or a link now leading elsewhere, gives another file, which
    must be recorded at its own path: recovery finds each there."""
    a, b = voldisk.mnt / "a", voldisk.mnt / "b"
    a.mkdir()
    b.mkdir()
    killed_and_cut(dev, voldisk, SAME_NAME, a, b, a / "link", records=4)
    rep = json.loads(run(TDAX, "recover", "--device", dev, "--power-failure", "--json").stdout)
    got = {f["path"]: f["outcome"] for f in rep["files"]}
    want = [a / "j", b / "j", a / "t1", a / "t2"]
    assert all(got.get(str(p)) == "recovered" for p in want), rep
    assert [p.read_bytes() for p in want] == [b"in a", b"in b", b"one", b"two"], rep
