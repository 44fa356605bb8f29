"""Explicit mappings (include/tdax.h, src/preload/explicit.h): tdax_map,
tdax_persist and tdax_unmap, called through ctypes by Python programs
under `tdax run` (the preloaded libtdax.so exports them), and by a C program
linked with libtdax.so (tests/crash/daxlog.c) with and without it."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import BUILD, PY, TDAX, TDAX_ENV, info, power_cut, run, started, tdax_run

DAXLOG = BUILD / "tests" / "tdax-daxlog"  # tests/crash/daxlog.c, linked with libtdax.so

# The API through ctypes: the process's own symbols, the preloaded copy's.
API = r"""
import ctypes, os, sys, time
lib = ctypes.CDLL(None, use_errno=True)
lib.tdax_map.restype = ctypes.c_void_p
lib.tdax_map.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_size_t, ctypes.c_int]
lib.tdax_persist.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
lib.tdax_unmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
PIN = 1
SIZE = 1 << 20

def rec(i):
    return b"explicit record %06d\n" % i

def open_mapped(path, flags=PIN):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, SIZE)
    p = lib.tdax_map(fd, 0, SIZE, flags)
    assert p, os.strerror(ctypes.get_errno())
    return fd, p

def append(p, i):
    r = rec(i)
    ctypes.memmove(p + i * len(r), r, len(r))
    return p + i * len(r), len(r)
"""

# N records stored and persisted one by one; "persisted N", then a wait
# for stdin (or SIGKILL of itself with "kill").
PERSISTER = API + r"""
fd, p = open_mapped(sys.argv[1])
n = int(sys.argv[2])
for i in range(n):
    assert lib.tdax_persist(*append(p, i)) == 0, os.strerror(ctypes.get_errno())
print("persisted", n, flush=True)
if sys.argv[3:] == ["kill"]:
    os.kill(os.getpid(), 9)
sys.stdin.readline()
assert lib.tdax_unmap(p, SIZE) == 0
"""


def records(n):
    return b"".join(b"explicit record %06d\n" % i for i in range(n))


def counters(device):
    return info(device)["counters"]


def test_persisted_stores_survive_a_kill_and_a_power_cut(dev, diskdir):
    """Under the default policy: the mapping pins its range logged, each
    persist is a record, and after SIGKILL and the page cache's loss
    recovery puts every persisted byte back."""
    f = diskdir / "log"
    p = tdax_run(dev, PERSISTER, f, 500, "kill", policy="thesis", check=-9)
    assert "persisted 500" in p.stdout
    assert f.read_bytes()[:500 * 23] == records(500)  # the page cache has them
    rep = power_cut(dev, f)
    assert rep["applied"] >= 500, rep
    assert f.read_bytes()[:500 * 23] == records(500)


@pytest.mark.parametrize("policy, light", [("thesis", True), ("adaptive", True), ("always", True),
                                           ("never", False)])
def test_persists_are_answered_from_the_log_unless_the_policy_logs_nothing(dev, diskdir, policy, light):
    """No sync at all: each persist is a record, or under policy never the
    kernel's msync."""
    f = diskdir / "log"
    tdax_run(dev, PERSISTER, f, 100, policy=policy, input="\n")
    c = counters(dev)
    assert (c["persists"], c["persists_real"]) == ((100, 0) if light else (0, 100)), c
    assert c["light_syncs"] == 0, c
    assert f.read_bytes()[:100 * 23] == records(100)


def test_the_api_works_without_tdax_run(diskdir):
    """A program linked with libtdax.so, run without tdax: not under it (no
    word from tdax, no device), every persist an msync, and the bytes are
    the file's."""
    f = diskdir / "log"
    p = run(DAXLOG, "bench", f, 50, 100, env={"TDAX_CONFIG": ""}, check=0)
    assert p.stdout.startswith("persist 100 B: median") and p.stderr == "", p
    data = f.read_bytes()
    assert all(data[i * 100:(i + 1) * 100] == bytes([i]) * 100 for i in range(50))


def test_another_process_sees_the_mapped_bytes_at_once(dev, diskdir):
    """The mapping is the file's: a reader without tdax reads what was
    stored (persisted or not), and its writes show in the mapping."""
    f = diskdir / "log"
    code = API + r"""
fd, p = open_mapped(sys.argv[1])
append(p, 0)  # stored, not persisted
print("stored", flush=True)
sys.stdin.readline()
print(ctypes.string_at(p + 100, 5).decode(), flush=True)
"""
    e = dict(os.environ, **TDAX_ENV)
    proc = subprocess.Popen([TDAX, "run", "--device", dev, "--policy", "thesis", "--", PY, "-c", code, f],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=e)
    try:
        assert proc.stdout.readline() == "stored\n"
        with open(f, "r+b") as other:
            assert other.read(23) == records(1)
            other.seek(100)
            other.write(b"hello")
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "hello\n"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("when", ["mapped", "unmapped"])
def test_a_sync_while_mapped_or_after_unmap_is_real(dev, diskdir, when):
    """Stores not persisted are not in the log: an fsync of the file while
    a mapping lives, or after it is gone, must reach the kernel, or a power
    cut would lose what it acknowledged. (Policy always: without a mapping
    such a sync would be answered from the log.)"""
    f = diskdir / "log"
    code = API + r"""
fd, p = open_mapped(sys.argv[1])
append(p, 0)
if sys.argv[2] == "unmapped":
    assert lib.tdax_unmap(p, SIZE) == 0
os.fsync(fd)
os.kill(os.getpid(), 9)
"""
    tdax_run(dev, code, f, when, policy="always", check=-9)
    rep = power_cut(dev, f)
    assert f.read_bytes()[:23] == records(1), rep


def test_the_mapped_range_stays_upgraded_and_status_shows_its_pin(dev, diskdir):
    """Thesis section 7.2: an explicit mapping has priority. Its range is
    upgraded at once (no sync stream needed), re-evaluation leaves it
    upgraded while nothing is written (a transparent range would be idle
    and downgraded), and `tdax status` says it is pinned; the pin goes with
    the process."""
    f = diskdir / "log"
    code = API + r"""
fd, p = open_mapped(sys.argv[1], 0)
print("mapped", flush=True)
time.sleep(60)
"""
    with started(dev, code, f, policy="thesis") as proc:
        assert proc.stdout.readline() == "mapped\n"
        time.sleep(2.5)  # past both windows: an idle transparent range is downgraded
        st = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
        mine = [x for x in st["files"] if x["path"] == str(f)]
        assert mine and mine[0]["pinned"] >= 1 and mine[0]["upgraded"] >= 1, st["files"]
        text = run(TDAX, "status", "--device", dev, check=0).stdout
        assert "[pinned: 1 ranges (explicit mappings, tdax pin)]" in text, text
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    st = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
    assert all(x["pinned"] == 0 for x in st["files"]), st["files"]


def test_a_pin_let_go_by_one_process_is_taken_up_by_another_that_maps_the_range(dev, diskdir):
    """A range's pin is one process's at a time: a second process mapping
    the same range finds it held. When the first unmaps, the second's
    write-back pass takes the pin up (within ~100 ms): the range stays
    pinned while any process maps it."""
    f = diskdir / "log"
    code = API + r"""
fd, p = open_mapped(sys.argv[1], 0)
print("mapped", flush=True)
sys.stdin.readline()
assert lib.tdax_unmap(p, SIZE) == 0
print("unmapped", flush=True)
time.sleep(60)
"""

    def pinned():
        st = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
        return sum(x["pinned"] for x in st["files"] if x["path"] == str(f))
    pipe = subprocess.PIPE
    with started(dev, code, f, policy="thesis", stdin=pipe) as first:
        assert first.stdout.readline() == "mapped\n"
        time.sleep(0.2)  # the first's range upgraded: the second has no upgrade job of its own
        with started(dev, code, f, policy="thesis", stdin=pipe) as second:
            assert second.stdout.readline() == "mapped\n"
            assert pinned() == 1
            first.stdin.write("\n")
            first.stdin.flush()
            assert first.stdout.readline() == "unmapped\n"
            time.sleep(0.5)  # a few write-back passes of the second
            assert pinned() == 1, "the second mapping's range lost its pin with the first's unmap"
            second.stdin.write("\n")
            second.stdin.flush()
            assert second.stdout.readline() == "unmapped\n"
            time.sleep(0.3)
            assert pinned() == 0


def test_bad_calls_fail_as_the_system_calls_would(dev, diskdir):
    f = diskdir / "log"
    code = API + r"""
import errno
def err(r):
    return errno.errorcode.get(ctypes.get_errno()) if not r or r == -1 else "ok"
fd, p = open_mapped(sys.argv[1])
ro = os.open(sys.argv[1], os.O_RDONLY)
print(err(lib.tdax_map(fd, 0, SIZE, 2)), err(lib.tdax_map(fd, 0, 0, 0)), err(lib.tdax_map(fd, 1, 4096, 0)),
      err(lib.tdax_map(fd, 0, SIZE + 4096, 0)), err(lib.tdax_map(ro, 0, 4096, 0)), err(lib.tdax_map(999, 0, 4096, 0)))
print(err(lib.tdax_persist(p + SIZE - 10, 20)), err(lib.tdax_persist(id(fd), 8)), err(lib.tdax_unmap(p, 4096)),
      err(lib.tdax_persist(p + 5, 0) + 1))
"""
    out = tdax_run(dev, code, f, policy="thesis").stdout.split("\n")
    assert out[0] == "EINVAL EINVAL EINVAL EINVAL EACCES EBADF", out
    assert out[1] == "EINVAL EINVAL EINVAL ok", out


def test_device_pressure_downgrades_transparent_ranges_and_keeps_the_pinned_one(device, diskdir):
    """Thesis section 7.2: when the log fills past the high watermark, the
    ranges with the lowest metric are downgraded first -- but a pinned range
    stays, although its metric (nothing written through write()) is the
    lowest of all."""
    run(TDAX, "device", "create", "--device", device, "--size", "16M", check=0)
    code = API + r"""
fd, p = open_mapped(sys.argv[1], 0)
y = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(400):                      # a synced stream: upgraded, logged
    os.write(y, b"y" * 32768)
    os.fdatasync(y)
print("filled", flush=True)
time.sleep(60)
"""
    # Pressure from 1 % of the log on (the high watermark), not 90 %: at
    # every pass, as the process's own segment is more than that.
    with started(device, code, diskdir / "x", diskdir / "y", policy="thesis",
                 env={"TDAX_WB_HIGH_PCT": "1"}) as proc:
        assert proc.stdout.readline() == "filled\n"
        deadline = time.time() + 10
        while time.time() < deadline:
            st = json.loads(run(TDAX, "status", "--device", device, "--json", "-v", check=0).stdout)
            if st["counters"]["downgrades"] >= 1:
                break
            time.sleep(0.1)
        files = {x["path"]: x for x in st["files"]}
        x, y = files[str(diskdir / "x")], files[str(diskdir / "y")]
        assert st["counters"]["downgrades"] >= 1, st["counters"]
        assert x["pinned"] == 1 and [r["state"] for r in x["range_detail"]] == ["upgraded"], x
        assert any(r["state"] != "upgraded" for r in y["range_detail"]), y


@pytest.mark.parametrize("reserve, transparent", [("100", False), ("0", True)])
def test_the_reserve_keeps_transparent_upgrades_out_and_explicit_mappings_in(dev, diskdir, reserve,
                                                                          transparent):
    """TDAX_EXPLICIT_RESERVE_PCT: past 100 - it % of the log in use no
    transparent upgrade is taken (at 100, none ever: a synced stream stays
    on the kernel path), while a mapping's ranges are upgraded whatever the
    fill and its persists stay light. (An upgrade is decided at a sync and
    carried out by the write-back thread: the pause after the first 20
    gives it time on a loaded machine; every sync after it is light.)"""
    code = API + r"""
import time
fd, p = open_mapped(sys.argv[1])
y = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(200):
    os.write(y, b"y" * 128)
    os.fdatasync(y)
    assert lib.tdax_persist(*append(p, i)) == 0
    if i == 19:
        time.sleep(0.5)
"""
    tdax_run(dev, code, diskdir / "x", diskdir / "y", policy="thesis",
             env={"TDAX_EXPLICIT_RESERVE_PCT": reserve})
    c = counters(dev)
    assert c["persists"] == 200 and c["persists_real"] == 0, c
    if transparent:
        assert c["light_syncs"] >= 180 and c["upgrades_reserved"] == 0, c
    else:
        assert c["light_syncs"] == 0 and c["real_syncs"] == 200 and c["upgrades_reserved"] >= 190, c


APPEND_SYNC = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
for i in range(200):
    os.write(fd, b"a" * 128)
    os.fdatasync(fd)
"""


@pytest.mark.parametrize("pinned", [True, False])
def test_tdax_pin_upgrades_a_file_for_an_unmodified_application(dev, diskdir, pinned):
    """`tdax pin FILE`: an operator's explicit mapping. With U = 100 the
    policy upgrades nothing, so an application's synced appends all go to
    the kernel -- unless the file is pinned: then every sync but the first
    (the file's registration makes it uncovered) is answered from the log.
    The pins show in `tdax status` and go with the command."""
    run(TDAX, "set", "--device", dev, "upgrade_threshold=100", check=0)
    f = diskdir / "log"
    f.write_bytes(b"")
    pin = subprocess.Popen([TDAX, "pin", "--device", dev, f], stdout=subprocess.PIPE, text=True,
                           env=dict(os.environ, TDAX_CONFIG="")) if pinned else None
    try:
        if pin:
            line = pin.stdout.readline()
            assert line.startswith(f"tdax pin: 1 ranges of {f} (bytes 0..2097151) pinned, 1 upgraded"), line
            st = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
            assert [x["pinned"] for x in st["files"] if x["path"] == str(f)] == [1], st["files"]
        tdax_run(dev, APPEND_SYNC, f, policy="thesis")
        c = counters(dev)
        if pinned:
            assert c["light_syncs"] >= 198 and c["logged_writes"] >= 198, c
        else:
            assert c["light_syncs"] == 0 and c["real_syncs"] == 200, c
    finally:
        if pin:
            pin.send_signal(signal.SIGTERM)
            assert pin.wait(timeout=10) == 0
    st = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
    assert all(x["pinned"] == 0 for x in st["files"]), st["files"]


def test_tdax_pin_says_what_is_wrong(dev, diskdir):
    p = run(TDAX, "pin", "--device", dev, diskdir / "missing")
    assert p.returncode == 1 and "cannot pin" in p.stderr and "No such file" in p.stderr, p.stderr
    p = run(TDAX, "pin", "--device", dev, diskdir)
    assert p.returncode == 1 and "not a regular file" in p.stderr, p.stderr
    (diskdir / "f").write_bytes(b"x")
    p = run(TDAX, "pin", "--device", dev, "--range", "8k:4k", diskdir / "f")
    assert p.returncode == 2 and "START:END" in p.stderr, p.stderr
    p = run(TDAX, "pin", "--device", dev, "--for", "1", "--range", "0:6M", diskdir / "f")
    assert p.returncode == 0 and "3 ranges" in p.stdout, p


def test_bypass_mode_demotes_a_file_before_mapping_it(dev, diskdir):
    """In bypass mode a file written and synced alone is promoted (its bytes
    in the log, not the kernel's copy); tdax_map must show the mapping the
    bytes written before (it demotes the file first), and the file is not
    promoted again while it is mapped: a write and sync after show in the
    mapping at once, and everything acknowledged survives a power cut."""
    f = diskdir / "log"
    code = API + r"""
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
for i in range(400):
    os.write(fd, rec(i))
    os.fdatasync(fd)
    if i == 0:
        time.sleep(0.1)  # the write-back thread starts: leases need it
time.sleep(0.05)  # a write-back pass adds the promotion to the device's counts
p = lib.tdax_map(fd, 0, 8192, 0)
assert p, os.strerror(ctypes.get_errno())
assert ctypes.string_at(p, 8192) == b"".join(rec(i) for i in range(400))[:8192]
ctypes.memmove(p, b"X" * 100, 100)
assert lib.tdax_persist(p, 100) == 0
for i in range(10):
    os.pwrite(fd, b"Y" * 10, 5000 + 10 * i)
    os.fdatasync(fd)
    assert ctypes.string_at(p + 5000, 10 * (i + 1)) == b"Y" * 10 * (i + 1)
print("done", flush=True)
os.kill(os.getpid(), 9)
"""
    p = tdax_run(dev, code, f, env={"TDAX_MODE": "bypass"}, check=-9)
    assert "done" in p.stdout, p.stderr
    assert counters(dev)["promotions"] >= 1
    power_cut(dev, f)
    want = bytearray(records(400))
    want[:100] = b"X" * 100
    want[5000:5100] = b"Y" * 100
    assert f.read_bytes() == bytes(want)


def test_a_fork_while_another_thread_maps_leaves_the_child_able_to_map(dev, diskdir):
    """A thread maps and unmaps in a loop (the table of mappings is locked
    meanwhile) while another forks: each child maps and unmaps too. A child
    made while the lock was held used to inherit it held by a thread it
    does not have, and hung at its first tdax_map."""
    code = API + r"""
import threading
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 8192)
stop = False
def churn():
    while not stop:
        p = lib.tdax_map(fd, 0, 8192, 0)
        assert p and lib.tdax_unmap(p, 8192) == 0
t = threading.Thread(target=churn)
t.start()
hung = 0
for i in range(60):
    pid = os.fork()
    if pid == 0:
        p = lib.tdax_map(fd, 4096, 4096, 0)
        os._exit(0 if p and lib.tdax_unmap(p, 4096) == 0 else 1)
    deadline = time.time() + 5
    while time.time() < deadline and os.waitpid(pid, os.WNOHANG) == (0, 0):
        time.sleep(0.005)
    if time.time() >= deadline:
        hung += 1
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        break
stop = True
t.join()
print("hung", hung, flush=True)
"""
    p = tdax_run(dev, code, diskdir / "f", check=0)
    assert "hung 0" in p.stdout, p.stdout + p.stderr
