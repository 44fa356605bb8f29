"""The thesis policy inside the runtime: tunables shared through the device,
status, and decisions taken by running processes."""
import json
import os
import subprocess
import time

import crashtest
import pytest
from conftest import PY, TDAX, TDAX_ENV, info, run


@pytest.fixture
def spawn(dev):
    """Start code under `tdax run` (a session of its own); whatever the test
    started is killed at its end, passed or failed (a stream left running
    would load the machine for good)."""
    procs = []

    def start(policy, code, *args, stdout=None):
        p = subprocess.Popen([TDAX, "run", "--device", dev, "--policy", policy, "--", PY, "-c", code,
                              *args], stdout=stdout, text=True, env=dict(os.environ, **TDAX_ENV),
                             start_new_session=True)
        procs.append(p)
        return p
    yield start
    crashtest.kill_tree(procs)


def status(dev, *flags):
    return json.loads(run(TDAX, "status", "--device", dev, "--json", *flags, check=0).stdout)


def test_get_and_set_validate_and_persist(dev):
    out = run(TDAX, "get", "--device", dev, check=0).stdout
    assert "upgrade_threshold" in out and "write_window_ms" in out
    assert run(TDAX, "get", "--device", dev, "upgrade_threshold", check=0).stdout.strip() == "60"
    for bad, why in (("upgrade_threshold=101", "0..100"), ("downgrade_threshold=70", "must not exceed"),
                     ("granularity_order=21", "0..20"), ("write_window_ms=0", "longer than 0"),
                     ("write_threshold=-1", "whole number"), ("nonsense=1", "unknown tunable")):
        p = run(TDAX, "set", "--device", dev, bad, check=1)
        assert why in p.stderr, p.stderr
    assert run(TDAX, "set", "--device", dev, "noequals", check=2).returncode == 2
    run(TDAX, "set", "--device", dev, "upgrade_threshold=80", "downgrade_threshold=20", check=0)
    t = status(dev)["tunables"]
    assert t["upgrade_threshold"] == 80 and t["downgrade_threshold"] == 20


STREAM = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
def stream(seconds):
    end = time.time() + seconds
    while time.time() < end:
        os.write(fd, b"x" * 128); os.fdatasync(fd)
stream(float(sys.argv[2]))
print("phase1", flush=True)
# Keep syncing while the test looks: an idle range is re-evaluated and
# downgraded within the windows, and a loaded machine may look late.
while not os.path.exists(sys.argv[3]):
    stream(0.05)
stream(float(sys.argv[2]))
time.sleep(0.1)
"""


def test_thesis_policy_upgrades_a_sync_stream_and_status_shows_it(dev, diskdir, spawn):
    path = diskdir / "wal"
    p = spawn("thesis", STREAM, path, "0.5", diskdir / "go", stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == "phase1"
    s = status(dev, "-v")
    f = [x for x in s["files"] if x["path"] == str(path)][0]
    assert f["upgraded"] >= 1
    # The appends cross ranges (those behind decay); the details are in
    # table order: look at the upgraded ones.
    up = [r for r in f["range_detail"] if r["state"] == "upgraded"]
    assert any(r["metric"] > 60 and r["writes"] > 0 for r in up), f["range_detail"]
    (diskdir / "go").write_bytes(b"")
    p.wait()
    c = status(dev)["counters"]
    assert c["upgrades"] >= 1 and c["light_syncs"] > c["real_syncs"]
    # Reactivity: the stream's upgrade was timed from its first sync.
    assert c["upgrades_timed"] >= 1 and 0 < c["upgrade_wait_ns"] < 1e9 * c["upgrades_timed"], c
    text = run(TDAX, "status", "--device", dev, check=0).stdout
    assert "reactivity: upgraded" in text and "after the first sync of its stream" in text, text


# One thread appends, another syncs after each append (PostgreSQL's WAL
# writer and backends are the same across processes).
WRITER_AND_SYNCER = r"""
import os, sys, threading, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
wrote, synced = threading.Semaphore(0), threading.Semaphore(0)
light = 0
def syncer():
    global light
    for i in range(3000):
        wrote.acquire()
        t = time.perf_counter(); os.fdatasync(fd)
        light += time.perf_counter() - t < 50e-6
        synced.release()
t = threading.Thread(target=syncer); t.start()
for i in range(3000):
    os.write(fd, b"z" * 100); wrote.release(); synced.acquire()
t.join()
print(light)
"""


def test_a_stream_written_by_one_thread_and_synced_by_another_is_upgraded(dev, diskdir):
    """A writer's counts reach its range in batches (tracking.c); the
    syncer's syncs must still see the range dirty and count its writebacks."""
    p = run(TDAX, "run", "--device", dev, "--policy", "thesis", "--", PY, "-c", WRITER_AND_SYNCER,
            diskdir / "wal", env=TDAX_ENV, check=0)
    assert int(p.stdout) > 2500, (p.stdout, info(dev)["counters"])


# A page rewritten and synced N times (each sync writes one page back),
# then a wait for the test's look, then the exit.
REWRITES = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(int(sys.argv[2])):
    os.pwrite(fd, b"r" * 100, 0); os.fdatasync(fd)
    if i == 19:
        time.sleep(0.5)  # (the upgrade decided, carried out by the write-back thread)
print("synced", flush=True)
while not os.path.exists(sys.argv[3]):
    time.sleep(0.01)
"""


def test_the_syncs_of_an_upgraded_range_held_back_are_all_counted(dev, diskdir, spawn):
    """The lightweight syncs of a range already upgraded are counted in
    batches (tracking.c, "held"): a batch waits for at most 64 of them, and
    the last one is counted at the exit. None is lost: each sync of the
    rewritten page is one writeback in the range's window. (An upgrade is
    carried out by the write-back thread, late on a loaded machine: the
    program pauses after its 20th sync, and every sync after is light.)"""
    run(TDAX, "set", "--device", dev, "writeback_window_ms=60000", "write_window_ms=60000", check=0)
    n = 3000
    p = spawn("thesis", REWRITES, diskdir / "page", str(n), diskdir / "go", stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == "synced"

    def writebacks():
        f = [x for x in status(dev, "-v")["files"] if x["path"] == str(diskdir / "page")][0]
        assert [r["state"] for r in f["range_detail"]] == ["upgraded"], f
        return f["range_detail"][0]["writebacks"]
    mid = writebacks()
    assert n - 64 - 2 <= mid <= n, mid  # (the first write may come before the file's registration)
    (diskdir / "go").write_bytes(b"")
    assert p.wait(timeout=30) == 0
    c = status(dev)["counters"]
    assert c["light_syncs"] >= n - 20, c
    assert mid <= writebacks() and n - 2 <= writebacks() <= n


# A journal as SQLite's rollback mode makes one in every transaction:
# created at the same name, written, synced, its header written, synced
# (synchronous=FULL; NORMAL makes the first sync only), closed and
# unlinked; N journals, each written as argv[3] says (JSON: the (offset,
# length) of each write before the first sync), with argv[4] syncs each.
JOURNALS = r"""
import json, os, sys, time
d, n, writes, syncs, light = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4]), 0
j = os.path.join(d, "db-journal")
for i in range(n):
    fd = os.open(j, os.O_RDWR | os.O_CREAT, 0o644)
    for off, size in writes:
        os.pwrite(fd, b"j" * size, off)
    t = time.perf_counter(); os.fdatasync(fd); light += time.perf_counter() - t < 50e-6
    if syncs == 2:
        os.pwrite(fd, b"h" * 12, 0)
        t = time.perf_counter(); os.fdatasync(fd); light += time.perf_counter() - t < 50e-6
    os.close(fd)
    os.unlink(j)
print(light)
"""


def journals(dev, diskdir, policy, n, writes, syncs=2):
    """Light syncs of n journals, and the device's counters."""
    p = run(TDAX, "run", "--device", dev, "--policy", policy, "--", PY, "-c", JOURNALS, diskdir, n,
            json.dumps(writes), syncs, env=TDAX_ENV, check=0)
    return int(p.stdout), info(dev)["counters"]


def test_a_file_made_anew_at_a_removed_streams_name_takes_up_its_upgrade(dev, diskdir):
    """Each journal alone never reaches F writes: without heirs every sync
    is real. A new file at the name of one removed after a sync stream
    takes up its counts and its upgrade (policy/track.h: heirs), so the
    journals after the first few are logged from their creation."""
    light, c = journals(dev, diskdir, "thesis", 300, [(0, 4096), (4096, 4096)])
    assert light > 550, (light, c)
    assert c["logged_creates"] >= 290 and c["upgrades"] >= 290, c


@pytest.mark.parametrize("policy", ["thesis", "adaptive"])
def test_the_adaptive_policy_takes_up_a_steady_stream_the_thesis_leaves(dev, diskdir, policy):
    """SQLite's journal as it writes it (a trace of bench/sqlite_tx.py
    --journal delete): small writes that touch 3 pages ten times in all --
    4 pages written back for 10 written, M = 35, under U = 60. The journals
    form one steady stream (heirs), but the thesis policy never upgrades
    it: every sync is real. The adaptive policy lowers the thresholds of a
    steady stream (tdax_track_adapt), so the journals after the first few
    are logged from their creation. Under the thesis no journal's creation
    is a record either: a record would cost a directory sync in the
    write-back per journal for syncs that are real anyway (0.94 of SQLite's
    speed without tdax) -- while the journals not yet upgraded under
    adaptive take up the counts all the same (their stream's syncs add up
    to the upgrade)."""
    small = [(0, 512), (512, 4), (516, 4096), (4612, 4), (4616, 4), (4620, 4096), (8716, 4)]
    light, c = journals(dev, diskdir, policy, 600, small)
    if policy == "thesis":
        assert light < 60 and c["upgrades"] == 0 and c["logged_creates"] == 0, (light, c)
    else:
        assert light > 1000 and c["upgrades"] >= 500 and c["logged_creates"] >= 500, (light, c)


def test_journals_synced_once_and_closed_before_their_unlink_leave_heirs(dev, diskdir):
    """SQLite's journal under synchronous=NORMAL: one sync each, then its
    close, then its unlink. A file synced once has no entry (registered at
    a stream's second sync, design.md "Files"), so its unlink found nothing
    to leave an heir and every journal's sync was real. Its close keeps
    what it was by inode number (tracking.c: departed), and the unlink of
    that inode leaves its name an heir: the journals form one stream, which
    the adaptive policy upgrades after a few."""
    small = [(0, 512), (512, 4), (516, 4096), (4612, 4), (4616, 4), (4620, 4096), (8716, 4)]
    light, c = journals(dev, diskdir, "adaptive", 600, small, syncs=1)
    assert light > 500 and c["upgrades"] >= 500 and c["logged_creates"] >= 500, (light, c)


def test_tunable_change_reaches_a_running_process(dev, diskdir, spawn):
    """U=100 can never be exceeded: nothing is upgraded. Lowered while the
    process runs, its next syncs upgrade the range."""
    run(TDAX, "set", "--device", dev, "upgrade_threshold=100", check=0)
    path = diskdir / "wal"
    p = spawn("thesis", STREAM, path, "0.5", diskdir / "go", stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == "phase1"
    time.sleep(0.05)
    before = status(dev)["counters"]
    assert before["upgrades"] == 0 and before["light_syncs"] == 0
    run(TDAX, "set", "--device", dev, "upgrade_threshold=60", check=0)
    (diskdir / "go").write_bytes(b"")
    p.wait()
    after = status(dev)["counters"]
    assert after["upgrades"] >= 1 and after["light_syncs"] > 100


def test_a_file_synced_every_5_seconds_is_never_upgraded(dev, diskdir, spawn):
    code = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
t0 = time.time(); n = 0
while time.time() - t0 < 11:
    os.pwrite(fd, b"y" * 4096, (n % 256) * 4096); n += 1
    if n % 50 == 0:
        os.fdatasync(fd)
    time.sleep(0.1)
"""
    p = spawn("thesis", code, diskdir / "slow")
    seen = []
    while p.poll() is None:
        s = status(dev)
        seen += [f["upgraded"] for f in s["files"] if f["path"].endswith("/slow")]
        time.sleep(0.5)
    # Its syncs are no stream: the file does not even get an entry.
    assert p.returncode == 0 and seen == []
    c = status(dev)["counters"]
    assert c["upgrades"] == 0 and c["light_syncs"] == 0 and c["real_syncs"] >= 2


def test_policy_never_tracks_but_never_upgrades(dev, diskdir, spawn):
    p = spawn("never", STREAM, diskdir / "wal", "0.3", diskdir / "go", stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == "phase1"
    s = status(dev, "-v")
    f = [x for x in s["files"] if x["path"].endswith("/wal")][0]
    assert f["ranges"] >= 1 and f["range_detail"][0]["writes"] > 0
    (diskdir / "go").write_bytes(b"")
    p.wait()
    assert status(dev)["counters"]["light_syncs"] == 0


APPENDS = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(4000):
    os.write(fd, b"%0127d" % i); os.fdatasync(fd)
"""


@pytest.mark.parametrize("policy", ["thesis", "adaptive"])
def test_policy_adaptive_carries_an_append_stream_into_each_new_range(dev, diskdir, spawn, policy):
    """Ranges of 4 pages (16 KiB): 4,000 synced 128 B appends cross 31 of
    them. Under the thesis policy each new range starts on the kernel path
    (writes unlogged, syncs real until its upgrade); under "adaptive" an
    append over the last quarter of an upgraded range upgrades the next one
    before the stream gets there."""
    run(TDAX, "set", "--device", dev, "granularity_order=2", check=0)
    p = spawn(policy, APPENDS, str(diskdir / "log"))
    assert p.wait(timeout=120) == 0
    c = info(dev)["counters"]
    assert c["light_syncs"] + c["real_syncs"] >= 4000
    assert (diskdir / "log").read_bytes() == b"".join(b"%0127d" % i for i in range(4000))
    if policy == "thesis":
        assert c["real_syncs"] > 100, "the thesis policy should pay at every new range: the test tests nothing"
    else:
        assert c["real_syncs"] < 40, f"{c['real_syncs']} real syncs: the stream was not carried ahead"


def test_top_refreshes_status(dev):
    out = run(TDAX, "top", "--device", dev, "--interval", "10", "--count", "2", check=0).stdout
    assert out.count("tdax top --") == 2 and "syncs:" in out


def test_a_removed_files_upgraded_range_is_downgraded_not_retried_forever(dev, diskdir, spawn):
    """A file removed by a program without tdax leaves its upgraded range in
    the device. The next process's re-evaluation downgrades it: there is
    nothing to write back. (It used to fail to open the file, roll the
    downgrade back and try again on every pass, thousands of times a second.)"""
    gone = diskdir / "gone"
    p = spawn("thesis", STREAM, gone, "0.5", diskdir / "go", stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == "phase1"
    (diskdir / "go").write_bytes(b"")
    p.wait()
    upgraded = [f["upgraded"] for f in status(dev)["files"] if f["path"] == str(gone)]
    assert len(upgraded) == 1 and upgraded[0] >= 1
    # "other" is made first: made after the unlink, ext4 gives it the
    # removed file's inode number, and its open frees the entry (files.h
    # tdax_files_let_go_others) before any re-evaluation could look at it.
    (diskdir / "other").write_bytes(b"")
    gone.unlink()
    t0 = os.times()
    run(TDAX, "run", "--device", dev, "--policy", "thesis", "--", PY, "-c", STREAM, diskdir / "other", "1.5",
        diskdir / "go", env=TDAX_ENV, check=0)  # "go" exists: two 1.5 s streams
    t1 = os.times()
    assert [f["upgraded"] for f in status(dev)["files"] if f["path"] == str(gone)] == [0]
    # Reactivity: the downgrade was timed from the removed file's last sync.
    c = status(dev)["counters"]
    assert c["downgrades_timed"] >= 1 and c["downgrade_wait_ns"] > 0, c
    cpu = t1.children_system + t1.children_user - t0.children_system - t0.children_user
    assert cpu < 4.5  # 3 s of syncing, not a second thread spinning on failed opens
