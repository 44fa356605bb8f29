"""Many files (issue 17): a file's entry in the device is let go when the
last descriptor of it closes and it keeps nothing (no records, never
synced), so a device serves any number of files over time; a process that
still holds an entry another one let go registers the file again before its
write returns, so a sync anybody makes afterwards is not fooled."""
import json
import os

import pytest

from conftest import PY, TDAX, TDAX_ENV, info, power_cut, run, started, tdax_run

SMALL_FILES = r"""
import os, sys
d = sys.argv[1]
for i in range(1500):
    fd = os.open(f"{d}/f{i}.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"%05d" % i * 800)
    os.close(fd)
    os.rename(f"{d}/f{i}.tmp", f"{d}/f{i}")
"""


def test_more_files_than_the_table_holds_leave_no_entries(dev, diskdir):
    assert info(dev)["max_files"] < 1500
    p = tdax_run(dev, SMALL_FILES, diskdir, policy="thesis", env={"TDAX_QUIET": "0"})
    assert "file table is full" not in p.stderr, p.stderr
    after = info(dev)
    assert after["files_registered"] == 0, "entries of closed files that kept nothing stayed"
    assert after["counters"]["fallback_unregistered"] == 0
    assert all((diskdir / f"f{i}").read_bytes() == b"%05d" % i * 800 for i in range(1500))


HOLDER = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
os.pwrite(fd, b"P1" * 2048, 0)
if sys.argv[3] == "sync":
    os.fsync(fd)  # registers the file (a real sync)
print("p1", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.005)
os.pwrite(fd, b"P2" * 2048, 4096)
print("p2", flush=True)
time.sleep(60)
"""

SYNCER = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
os.pwrite(fd, b"Q1" * 2048, 8192); os.fsync(fd)
print("q1", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.005)
os.pwrite(fd, b"Q2" * 2048, 12288); os.fsync(fd)
print("acked", flush=True)
time.sleep(0.1)
os.kill(os.getpid(), 9)
"""


@pytest.mark.parametrize("holder", ["sync", "nosync"])
def test_a_write_of_another_process_counts_in_the_files_next_entry(dev, diskdir, holder):
    """P writes; Q0 opens and closes the file; Q registers the file anew
    and syncs (logged, lightweight once covered); P writes again, then Q
    writes and syncs. Q's sync must make P's second write durable too: P's
    write has to count in Q's entry, or Q's lightweight sync leaves it in
    the page cache only. With "sync", P synced once (its file has an
    entry) and Q0's close lets that entry go under P: P must register the
    file again after its write. With "nosync", P's file never had an entry
    (unregistered mode): P must see Q's registration after its write."""
    path, go1, go2 = diskdir / "shared", diskdir / "go1", diskdir / "go2"
    path.write_bytes(b"\0" * 16384)
    with started(dev, HOLDER, path, go1, holder, policy="thesis") as p:
        assert p.stdout.readline().strip() == "p1"
        tdax_run(dev, "import os, sys; os.close(os.open(sys.argv[1], os.O_RDWR))", path,
                 policy="thesis")
        assert info(dev)["files_registered"] == 0, "the entry was not let go: the test tests nothing"
        with started(dev, SYNCER, path, go2, policy="always") as q:
            assert q.stdout.readline().strip() == "q1"
            go1.write_bytes(b"")
            assert p.stdout.readline().strip() == "p2"
            go2.write_bytes(b"")
            assert q.stdout.readline().strip() == "acked", q.stderr.read()
            q.wait(timeout=30)
    expect = b"P1" * 2048 + b"P2" * 2048 + b"Q1" * 2048 + b"Q2" * 2048
    assert path.read_bytes() == expect
    rep = power_cut(dev, path)
    assert rep["corrupt"] == 0
    assert path.read_bytes() == expect, "a write acknowledged by another process's sync was lost"


WRITER = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.fsync(fd)  # its creation, once: the kernel's
for i in range(100):
    os.write(fd, b"w" * 128)
print("written", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.005)
end = time.monotonic() + 1.0
while time.monotonic() < end:
    os.write(fd, b"s" * 128)
    os.fdatasync(fd)
print("synced", flush=True)
while not os.path.exists(sys.argv[3]):
    time.sleep(0.005)
"""


def test_a_file_gets_an_entry_at_its_first_sync_not_at_its_open(dev, diskdir):
    """A file opened for writing, synced once and written has no entry;
    the stream of syncs that follows registers it (a real sync), and is
    then upgraded as before."""
    path, go, done = diskdir / "log", diskdir / "go", diskdir / "done"
    with started(dev, WRITER, path, go, done, policy="thesis") as p:
        assert p.stdout.readline().strip() == "written"
        assert info(dev)["files_registered"] == 0, "registered at open or at a lone sync"
        go.write_bytes(b"")
        assert p.stdout.readline().strip() == "synced"
        assert info(dev)["files_registered"] == 1, "not registered by its sync"
        done.write_bytes(b"")
        p.wait(timeout=30)
    c = info(dev)["counters"]
    assert c["real_syncs"] >= 1 and c["light_syncs"] > 0, c
    data = path.read_bytes()
    assert data.startswith(b"w" * 12800) and data[12800:] == b"s" * (len(data) - 12800)
    assert power_cut(dev, path)["corrupt"] == 0
    assert path.read_bytes() == data


SEQUENTIAL = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"u" * 65536)  # 16 pages before the file has an entry
for i in range(20):
    os.write(fd, b"s" * 4096); os.fdatasync(fd)  # the second sync registers the file
"""


def test_a_file_registered_late_is_tracked_where_its_writes_land(dev, diskdir):
    """Writes at the file position made before the file had an entry keep
    no estimate of where the next one lands; registering takes it from the
    kernel, so the policy counts the writes that follow in their own
    ranges (1-page ranges here), not from offset 0."""
    run(TDAX, "set", "--device", dev, "granularity_order=0", check=0)
    path = diskdir / "seq"
    with started(dev, SEQUENTIAL + "\nprint('done', flush=True)\nimport time; time.sleep(60)\n",
                 path, policy="thesis") as p:
        assert p.stdout.readline().strip() == "done"
        st = json.loads(run(TDAX, "status", "--device", dev, "--json", "-v", check=0).stdout)
    ranges = [r["range"] for f in st["files"] if f["path"] == str(path) for r in f["range_detail"]]
    assert ranges and min(ranges) >= 16, ranges


def test_ranges_of_files_removed_without_tdax_are_taken_back_when_the_range_table_is_full(dev, diskdir):
    """Files written and synced under tdax, then removed by a program
    without it (a benchmark's scratch directory): their entries stay, and
    with them their ranges, until the range table (8192) is full -- after
    which no range of any new file could be tracked or upgraded, every
    sync real for good (tdax bench's fio suite fell to the kernel's rate so).
    The entries of gone files are freed then, and the next file's syncs are
    lightweight again."""
    run(TDAX, "set", "--device", dev, "granularity_order=0", check=0)  # a range per page
    code = r"""
import os, sys
for f in sys.argv[2:]:
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for i in range(int(sys.argv[1])):
        os.write(fd, b"x" * 128)
        os.fdatasync(fd)
    os.close(fd)
"""
    # (no durable shadow: a copy of the whole file at each real sync)
    env = {k: v for k, v in TDAX_ENV.items() if k != "TDAX_TEST_DURABLE_SHADOW"}

    def appends(n, *files):
        run(TDAX, "run", "--device", dev, "--policy", "adaptive", "--", PY, "-c", code, n, *files,
            env=env, check=0)
    # One process, 5 x 1875 pages, each a range: more than the table holds,
    # and none of its files gone while it runs, so nothing is taken back yet.
    files = [diskdir / f"f{i}" for i in range(5)]
    appends(60000, *files)
    for f in files:
        os.unlink(f)  # not under tdax: their entries and ranges stay, the table full
    before = info(dev)["counters"]["light_syncs"]
    appends(2000, diskdir / "last")
    light = info(dev)["counters"]["light_syncs"] - before
    assert light > 1900, f"{light} of 2000 syncs lightweight after the range table filled"
