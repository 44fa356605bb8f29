"""A background write-back that fails (the disk returns EIO): the next sync
of the file must report it, the records must stay in the device, and after
a power cut recovery must still bring back every acknowledged write -- the
PostgreSQL "fsyncgate" case, on a real ext4 over a failing volatile disk."""
import json

from conftest import TDAX, info, power_cut, run, started, tdax_run


APP = r"""
import os, sys, time
path, go = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.fsync(fd)
dfd = os.open(os.path.dirname(path), os.O_RDONLY); os.fsync(dfd)
for i in range(200):
    os.write(fd, b"acked %04d\n" % i)
    os.fdatasync(fd)
print("written", flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
time.sleep(0.5)  # the write-back thread checkpoints (age 100 ms) and fails
try:
    os.fdatasync(fd)
    print("sync ok", flush=True)
except OSError as e:
    print("sync error", e.errno, flush=True)
time.sleep(60)
"""


def test_failed_writeback_is_reported_and_nothing_is_lost(dev, voldisk, tmp_path):
    path, go = voldisk.mnt / "wal", tmp_path / "go"
    with started(dev, APP, path, go, env={"TDAX_WB_AGE_MS": "100"}) as p:
        assert p.stdout.readline().strip() == "written"
        (voldisk.fuse / "ctl").write_text("eio")  # from now on the disk fails every flush
        go.write_bytes(b"")
        line = p.stdout.readline().split()
        assert line[:2] == ["sync", "error"] and int(line[2]) == 5, line  # EIO, reported once
        i = info(dev)
        assert i["live_records"] > 0, "the records must stay until a sync succeeds"
        assert i["counters"]["fallback_writeback_error"] >= 1 and i["counters"]["sync_errors"] >= 1
    voldisk.cut()
    voldisk.reboot()
    rep = json.loads(run(TDAX, "recover", "--device", dev, "--power-failure", "--json").stdout)
    assert rep["applied"] > 0
    assert path.read_bytes() == b"".join(b"acked %04d\n" % i for i in range(200))


def test_a_directory_rename_whose_checkpoint_fails_fails_and_the_next_one_writes_the_records_again(dev, diskdir):
    """A directory is renamed with a file with records below it: the file is
    checkpointed first (no rename record names it), and that sync fails
    (TDAX_TEST_FAIL_SYNC, test build): the rename must fail too, not move
    records recovery would then look for under the old name. The next
    rename writes the records to the file again (through a descriptor it
    can write: a read-only one failed with EBADF) and succeeds, and so do
    the syncs after it; nothing acknowledged is lost in a power cut."""
    sub, moved = diskdir / "sub", diskdir / "moved"
    sub.mkdir()
    code = r"""
import os, sys, time
sub, moved = sys.argv[1], sys.argv[2]
fd = os.open(sub + "/f", os.O_RDWR | os.O_CREAT, 0o644)
os.fsync(fd)                                    # lightweight (its creation is a record)
os.pwrite(fd, b"x" * 4096, 0); os.fdatasync(fd)  # lightweight
try:
    os.rename(sub, moved)                       # real sync 1 fails
    print("first rename succeeded", flush=True)
except OSError as e:
    print("first rename", e.errno, os.path.exists(sub), flush=True)
os.rename(sub, moved)                           # real sync 2
os.pwrite(fd, b"y" * 10, 0)
try:
    os.fdatasync(fd)                            # the failed sync, reported once (as Linux does)
except OSError as e:
    print("sync reports", e.errno, flush=True)
os.fdatasync(fd)
print("acked", flush=True); time.sleep(0.1); os.kill(os.getpid(), 9)
"""
    p = tdax_run(dev, code, sub, moved, env={"TDAX_TEST_FAIL_SYNC": "1"}, check=None)
    assert "first rename 5 True" in p.stdout, p.stdout + p.stderr  # EIO, nothing renamed
    assert "sync reports 5" in p.stdout and "acked" in p.stdout, p.stdout + p.stderr
    power_cut(dev, moved / "f")
    assert (moved / "f").read_bytes() == b"y" * 10 + b"x" * 4086
