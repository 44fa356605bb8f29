"""What ships: the product build (build/bin/tdax, build/lib/libtdax.so) has
no test aid -- no TDAX_TEST_ name in it, and setting one changes nothing --
and its write-back tunables are clamped to sane ranges. Also: the aids of
the test build (src/core/testaid.h) are there, and the persist-order trace
neither hangs nor kills the application it traces."""
import os
import subprocess
import tempfile

import pytest

from conftest import BUILD, PY, TDAX, TDAX_PRODUCT, info, run

PRODUCT_FILES = [TDAX_PRODUCT, BUILD / "lib" / "libtdax.so"]
TEST_FILES = [TDAX, BUILD / "test" / "lib" / "libtdax.so"]
RECORDS, SIZE = 40, 128

# Appends RECORDS records of SIZE bytes, each followed by fdatasync; waits for
# the write-back thread to add the counters to the device, then dies by
# SIGKILL, so that the records stay live in the device.
APPEND = f"""
import os, signal, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range({RECORDS}):
    os.write(fd, bytes([65 + i % 26]) * {SIZE})
    os.fdatasync(fd)
time.sleep(0.3)
os.kill(os.getpid(), signal.SIGKILL)
"""


def expected():
    return b"".join(bytes([65 + i % 26]) * SIZE for i in range(RECORDS))


def append_under(tdax, device, path, env):
    e = {"TDAX_QUIET": "1", "TDAX_WB_AGE_MS": "3600000", **env}
    p = run(tdax, "run", "--device", device, "--policy", "always", "--", PY, "-c", APPEND, path, env=e)
    assert p.returncode == -9 or p.returncode == 137, p.stderr


def test_product_binaries_hold_no_test_aid():
    held = [str(f) for f in PRODUCT_FILES if b"TDAX_TEST_" in f.read_bytes()]
    assert not held, f"test aids (TDAX_TEST_...) in the product: {held}"
    # The check can see one: the test build has them.
    missing = [str(f) for f in TEST_FILES if b"TDAX_TEST_" not in f.read_bytes()]
    assert not missing, f"not the test build: {missing}"


def test_product_ignores_test_lie_and_recover_kill(dev, diskdir):
    """TDAX_TEST_LIE=1 under the product: the syncs are still light and
    their records live in the device; a power cut loses nothing, and
    TDAX_TEST_RECOVER_KILL_AFTER does not stop the recovery."""
    path = diskdir / "log"
    append_under(TDAX_PRODUCT, dev, path, {"TDAX_TEST_LIE": "1"})
    d = info(dev)
    # Every sync light, the first too (the file's creation is a record).
    assert d["counters"]["light_syncs"] == RECORDS, d["counters"]
    assert d["live_records"] >= RECORDS - 1 and d["log_used"] > 0, d
    with open(path, "r+b") as f:  # power cut: the page cache held all but the first record's bytes
        f.truncate(SIZE)
    p = run(TDAX_PRODUCT, "recover", "--device", dev, "--power-failure", "--json",
            env={"TDAX_TEST_RECOVER_KILL_AFTER": "1"})
    assert p.returncode == 0, p.stderr
    assert path.read_bytes() == expected()


def test_test_build_has_the_aids(dev, diskdir):
    """The same workload under the test build: the lie logs nothing, and the
    recovery of the records kills itself (what the product must not do)."""
    path = diskdir / "log"
    append_under(TDAX, dev, path, {"TDAX_TEST_LIE": "1"})
    assert info(dev)["live_records"] == 1  # the file's creation: the lie logs no write
    path.unlink()
    append_under(TDAX, dev, path, {})
    assert info(dev)["live_records"] >= RECORDS - 1
    p = run(TDAX, "recover", "--device", dev, "--power-failure",
            env={"TDAX_TEST_RECOVER_KILL_AFTER": "1"})
    assert p.returncode == -9


# Starts the write-back thread (a logged write), then sleeps 1 s: the CPU
# time the process used while it slept.
SLEEP = """
import os, resource, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(3):
    os.write(fd, b"x" * 64)
    os.fdatasync(fd)
r0 = resource.getrusage(resource.RUSAGE_SELF)
time.sleep(1)
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
"""


def test_wb_interval_zero_is_clamped_not_a_busy_loop(dev, diskdir):
    p = run(TDAX_PRODUCT, "run", "--device", dev, "--policy", "always", "--", PY, "-c", SLEEP,
            diskdir / "f", env={"TDAX_WB_INTERVAL_MS": "0"}, check=0)
    cpu = float(p.stdout)
    assert cpu < 0.25, f"{cpu:.2f} s of CPU time in 1 s of sleep: the write-back thread spins"
    assert p.stderr.count("TDAX_WB_INTERVAL_MS") == 1, p.stderr  # said, once


def test_wb_tunables_out_of_range_are_clamped_and_said_once(dev, diskdir):
    env = {"TDAX_WB_HIGH_PCT": "0", "TDAX_WB_AGE_MS": "99999999999", "TDAX_WB_BYTES": "1",
           "TDAX_WB_INTERVAL_MS": "soon"}
    code = "import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT); os.write(fd, b'x')"
    p = run(TDAX_PRODUCT, "run", "--device", dev, "--", PY, "-c", code, diskdir / "f", env=env, check=0)
    for name in env:
        assert p.stderr.count(name) == 1, p.stderr
    q = run(TDAX_PRODUCT, "run", "--device", dev, "--", PY, "-c", code, diskdir / "g",
            env={**env, "TDAX_QUIET": "1"}, check=0)
    assert "TDAX_WB_" not in q.stderr, q.stderr
    assert os.path.getsize(diskdir / "g") == 1


# Appends and syncs 500 records of 200 bytes, then says "done".
WRITER = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(500):
    os.write(fd, b"y" * 200)
    os.fdatasync(fd)
print("done")
"""


def test_persist_trace_on_a_managed_file_does_not_hang(dev, diskdir):
    """The trace on the disk is a file tdax manages: its writer must not go
    through the interposed write (which logged, traced and took the
    trace's lock again: a deadlock)."""
    trace = diskdir / "trace"
    p = run(TDAX, "run", "--device", dev, "--policy", "always", "--", PY, "-c", WRITER, diskdir / "f",
            env={"TDAX_QUIET": "1", "TDAX_TEST_PERSIST_TRACE": str(trace)}, check=0)
    assert p.stdout.strip() == "done" and p.stderr == ""
    assert trace.read_bytes()[:8] == b"TDXPMTR1" and trace.stat().st_size > 500 * 200


@pytest.fixture
def small_fs():
    """A 64 KiB tmpfs (needs root), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    d = tempfile.mkdtemp(prefix="tdax-pytest-full-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d], check=True)
    yield d
    subprocess.run(["umount", d], check=True)
    os.rmdir(d)


def test_persist_trace_on_a_full_file_system_stops_and_says_so(dev, diskdir, small_fs):
    trace = os.path.join(small_fs, "trace")
    p = run(TDAX, "run", "--device", dev, "--policy", "always", "--", PY, "-c", WRITER, diskdir / "f",
            env={"TDAX_QUIET": "1", "TDAX_TEST_PERSIST_TRACE": trace})
    assert p.returncode == 0 and p.stdout.strip() == "done", p.stderr
    assert p.stderr.count("tracing stopped") == 1 and "No space left" in p.stderr, p.stderr
    assert (diskdir / "f").stat().st_size == 500 * 200
