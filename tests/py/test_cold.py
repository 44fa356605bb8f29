"""Cold writes (src/preload/coherent_ops.c): a write at the file position
to a range that is not logged goes to the kernel without the position lock
and without asking where it landed. What that must never cost: a logged
write whose offset is read back wrong, and the policy's view of the writes."""
import os

from conftest import TDAX, info, power_cut, run, tdax_run

# Phase 1: append + fdatasync until the syncs are lightweight (range 0 is
# upgraded). Phase 2: a second descriptor of the same open file, moved far
# away (its writes are cold), appends while the first descriptor's logged
# write waits between its real write and the read-back of its offset
# (TDAX_TEST_PAUSE_IF): the kernel's position then says where the cold
# write ended. Then the process is killed with its records live.
RACE = r"""
import os, sys, threading, time
path, flag = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.fsync(fd)
light = i = 0
while light < 20:
    os.write(fd, b"A%06d\n" % i); i += 1
    t = time.perf_counter(); os.fdatasync(fd)
    light += time.perf_counter() - t < 50e-6
    assert i < 50000, "the stream was never upgraded"
fd2 = os.dup(fd)
os.lseek(fd2, 1 << 30, os.SEEK_SET)
open(flag, "w").close()
def cold():
    time.sleep(0.03)
    os.write(fd2, b"B" * 64)
t = threading.Thread(target=cold); t.start()
os.write(fd, b"W" * 32)
t.join()
os.unlink(flag)
print("done", flush=True); time.sleep(0.1); os.kill(os.getpid(), 9)
"""


def test_a_logged_write_a_cold_write_overtook_is_not_logged_at_the_wrong_offset(dev, diskdir):
    path, flag = diskdir / "log", diskdir / "pause"
    p = tdax_run(dev, RACE, path, flag, policy="thesis", env={"TDAX_TEST_PAUSE_IF": str(flag)},
                 check=None)
    assert p.returncode == -9 and "done" in p.stdout, p.stderr
    before = path.read_bytes()
    # The cold write landed inside the logged write's window: W, then B.
    assert before.endswith(b"W" * 32 + b"B" * 64), before[-120:]
    rep = power_cut(dev, path)
    assert rep["corrupt"] == 0
    after = path.read_bytes()
    # What recovery rebuilt is the file as it was, less what no sync
    # covered: every byte is the one written there, or a hole (0).
    assert len(after) <= len(before)
    wrong = [i for i in range(len(after)) if after[i] not in (before[i], 0)]
    assert not wrong, f"bytes replayed at the wrong offset: {after[wrong[0]:wrong[0] + 40]!r} " \
                      f"at {wrong[0]}, was {before[wrong[0]:wrong[0] + 40]!r}"


# Appends with no sync (cold: tracked where they are estimated to land),
# then a sync stream until its syncs are lightweight: the stream's range is
# upgraded although every write before the upgrade was cold.
TRACKED = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(2000):
    os.write(fd, b"x" * 100)
os.fsync(fd)
light, t0 = 0, time.time()
while light < 100 and time.time() - t0 < 20:
    os.write(fd, b"y" * 100)
    t = time.perf_counter(); os.fdatasync(fd)
    light += time.perf_counter() - t < 50e-6
print(light)
"""


def test_cold_writes_at_the_file_position_feed_the_policy(dev, diskdir):
    path = diskdir / "wal"
    p = tdax_run(dev, TRACKED, path, policy="thesis", check=None)
    assert p.returncode == 0 and p.stdout.strip() == "100", (p.stdout, p.stderr)
    c = info(dev)["counters"]
    assert c["upgrades"] >= 1 and c["light_syncs"] >= 100, c


def test_lseek_moves_the_estimate_and_data_stays_where_the_kernel_put_it(dev, diskdir):
    """write() at positions lseek() chose across eight 16 KiB ranges, synced
    each time until the syncs are lightweight: every acknowledged byte
    survives a power cut where it was written."""
    run(TDAX, "set", "--device", dev, "granularity_order=2", check=0)
    path = diskdir / "db"
    code = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.fsync(fd)
light, i, t0 = 0, 0, time.time()
while light < 300 and time.time() - t0 < 20:
    os.lseek(fd, (i * 7919) % 64 * 2048, os.SEEK_SET)
    os.write(fd, (b"%06d" % i) * 100)
    t = time.perf_counter(); os.fdatasync(fd)
    light += time.perf_counter() - t < 50e-6
    i += 1
print(light, flush=True); time.sleep(0.1); os.kill(os.getpid(), 9)
"""
    p = tdax_run(dev, code, path, policy="thesis", check=None)
    assert p.returncode == -9 and p.stdout.strip() == "300", (p.stdout, p.stderr)
    before = path.read_bytes()
    power_cut(dev, path)
    assert path.read_bytes() == before


def test_a_write_the_hooks_make_to_a_cold_range_makes_the_next_sync_real(dev, diskdir):
    """A write to a range that is not logged is made by the hook itself
    (mode.h: kernel_before/kernel_after), at an offset or at the file
    position, beside ranges of the file that are upgraded: each must make
    the file uncovered, so that the sync after it is real and the bytes
    survive a power cut."""
    run(TDAX, "set", "--device", dev, "granularity_order=2", check=0)
    path = diskdir / "db"
    code = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"a" * 65536); os.fsync(fd)
light, i = 0, 0
while light < 20:
    os.pwrite(fd, b"%06d" % i, 100); i += 1
    t = time.perf_counter(); os.fdatasync(fd)
    light += time.perf_counter() - t < 50e-6
    assert i < 50000, "range 0 was never upgraded"
os.pwrite(fd, b"Z" * 100, 40000); os.fdatasync(fd)
os.lseek(fd, 50000, os.SEEK_SET); os.write(fd, b"Y" * 100); os.fdatasync(fd)
print("done", flush=True); time.sleep(0.1); os.kill(os.getpid(), 9)
"""
    p = tdax_run(dev, code, path, policy="thesis", check=None)
    assert p.returncode == -9 and p.stdout.strip() == "done", (p.stdout, p.stderr)
    power_cut(dev, path)
    data = path.read_bytes()
    assert data[40000:40100] == b"Z" * 100, "a cold write at an offset was lost"
    assert data[50000:50100] == b"Y" * 100, "a cold write at the file position was lost"
