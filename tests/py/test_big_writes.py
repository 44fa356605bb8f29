"""The size-aware dual path (issue #21, RomeFS): a write of TDAX_BIG_WRITE
bytes or more takes the block path even where its range is logged; the
sync that covers it is real (a checkpoint, which releases the file's older
records), and syncs that cover only small writes stay lightweight."""
import json

from conftest import TDAX, info, power_cut, run, tdax_run

BIG = 128 << 10
# A small write (a record), a big one over it, a small one after: each synced.
WRITER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"a" * 4096, 0)
os.fdatasync(fd)
os.pwrite(fd, b"b" * int(sys.argv[2]), 0)
os.fdatasync(fd)
os.pwrite(fd, b"c" * 4096, 200 << 10)
os.fdatasync(fd)
print("acknowledged", flush=True)
if sys.argv[3] == "kill":
    os.kill(os.getpid(), 9)
"""


def written(dev, f, big_write, end="exit", check=0):
    env = {"TDAX_BIG_WRITE": str(big_write)} if big_write is not None else {}
    p = tdax_run(dev, WRITER, f, BIG, end, env=env, check=check)
    assert "acknowledged" in p.stdout, p.stderr
    return info(dev)["counters"]


def test_a_big_write_is_not_logged_and_its_sync_is_real(dev, diskdir):
    c = written(dev, diskdir / "f", "64K")
    assert (c["light_syncs"], c["real_syncs"]) == (2, 1), c
    assert c["fallback_big_write"] == 1 and c["logged_bytes"] == 2 * 4096, c


def test_without_the_setting_every_write_of_a_logged_range_is_logged(dev, diskdir):
    """The default (0): no write is too big for the log."""
    c = written(dev, diskdir / "f", None)
    assert (c["light_syncs"], c["real_syncs"]) == (3, 0), c
    assert c["fallback_big_write"] == 0 and c["logged_bytes"] == 2 * 4096 + BIG, c


def test_a_write_below_the_size_is_logged(dev, diskdir):
    c = written(dev, diskdir / "f", BIG + 1)
    assert (c["light_syncs"], c["real_syncs"]) == (3, 0), c


def test_what_was_acknowledged_survives_a_kill_and_a_power_cut(dev, diskdir):
    """The big write's bytes are durable by its real sync, and the older
    record of the small write under them is never replayed over them (the
    real sync released it); the small write after them comes back from the
    log."""
    f = diskdir / "f"
    written(dev, f, "64K", end="kill", check=-9)
    rep = power_cut(dev, f)
    data = f.read_bytes()
    assert data[:BIG] == b"b" * BIG, (rep, data[:8], data.count(b"a"))
    assert data[200 << 10:(200 << 10) + 4096] == b"c" * 4096, rep


def test_the_simulator_takes_the_same_decision(dev, diskdir):
    """tdax sim --big-write on the trace of a run: the run's counts, and the
    bytes logged per byte written."""
    trace = diskdir / "t.bin"
    env = {"TDAX_QUIET": "1", "TDAX_WB_AGE_MS": "3600000", "TDAX_BIG_WRITE": "64K"}
    run(TDAX, "run", "--device", dev, "--policy", "always", "--trace", trace, "--", "python3", "-c", WRITER,
        diskdir / "f", BIG, "exit", env=env, check=0)

    def sim(*more):
        return json.loads(run(TDAX, "sim", trace, "--policy", "always", "--json", *more, check=0).stdout)
    dual, whole = sim("--big-write", "64K"), sim()
    assert (dual["light_syncs"], dual["real_syncs"], dual["big_writes"]) == (2, 1, 1), dual
    assert dual["logged_bytes"] == 2 * 4096 and whole["logged_bytes"] == 2 * 4096 + BIG, (dual, whole)
    assert dual["device_bytes_per_byte"] < 0.1 < whole["device_bytes_per_byte"], (dual, whole)
    assert dual["disagreements"] == 0, dual
