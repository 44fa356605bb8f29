"""Bypass mode, first step (src/preload/bypass.h): a promoted file's writes
go to the device alone and its syncs are a fence; anything that could see
the kernel's copy -- a read, a stat, another open, the writer's death --
finds what the application wrote, and nothing acknowledged is lost."""
import os
import random
import signal

from conftest import PY, TDAX, info, run, started, tdax_run

BYPASS = {"TDAX_MODE": "bypass"}

# Appends N records with a sync after each; prints "synced N" after each.
APPENDER = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
n = int(sys.argv[2])
for i in range(n):
    os.write(fd, b"%06d-%s\n" % (i, b"x" * 57))
    os.fdatasync(fd)
    if i == 0:
        time.sleep(0.1)  # the write-back thread starts: leases need it
print("synced", n, flush=True)
"""


def record(i):
    return b"%06d-%s\n" % (i, b"x" * 57)


def counters(device):
    return info(device)["counters"]


def test_writes_of_a_promoted_file_skip_the_kernel_and_reach_it_by_exit(dev, diskdir):
    f = diskdir / "log"
    tdax_run(dev, APPENDER, f, 300, env=BYPASS)
    assert f.read_bytes() == b"".join(record(i) for i in range(300))
    c = counters(dev)
    assert c["promotions"] >= 1 and c["deferred_writes"] >= 250, c
    assert c["light_syncs"] >= 290 and c["demotions"] == c["promotions"], c


def test_coherent_mode_promotes_nothing(dev, diskdir):
    f = diskdir / "log"
    tdax_run(dev, APPENDER, f, 100)
    c = counters(dev)
    assert c["promotions"] == 0 and c["deferred_writes"] == 0 and c["light_syncs"] >= 90, c


def test_a_dead_writers_bytes_are_in_the_device_and_recovery_writes_them(dev, diskdir):
    """SIGKILL after acknowledged syncs: the file lacks the deferred bytes
    (they went to the device alone) until recovery, on the same boot,
    writes them -- all of them."""
    f = diskdir / "log"
    code = APPENDER + "os.kill(os.getpid(), signal.SIGKILL)\n"
    p = tdax_run(dev, "import signal\n" + code, f, 400, env=BYPASS, check=-signal.SIGKILL)
    assert "synced 400" in p.stdout
    want = b"".join(record(i) for i in range(400))
    assert len(f.read_bytes()) < len(want), "nothing was deferred: the test proves nothing"
    r = run(TDAX, "recover", "--device", dev, check=0)
    assert f.read_bytes() == want, r.stdout


def test_the_next_process_on_the_device_writes_a_dead_writers_bytes(dev, diskdir):
    f = diskdir / "log"
    code = "import signal\n" + APPENDER + "os.kill(os.getpid(), signal.SIGKILL)\n"
    tdax_run(dev, code, f, 200, env=BYPASS, check=-signal.SIGKILL)
    # Its first write attaches it, which brings the device up to date.
    tdax_run(dev, "import sys; open(sys.argv[1], 'w').write('x')", diskdir / "other", env=BYPASS)
    assert f.read_bytes() == b"".join(record(i) for i in range(200))


def test_another_process_that_opens_the_file_sees_every_write(dev, diskdir):
    """Its open breaks the writer's lease: the write-back thread writes the
    records into the file before the open returns."""
    f = diskdir / "log"
    holder = APPENDER + "time.sleep(60)\n"
    with started(dev, holder, f, 300, env=BYPASS) as p:
        assert p.stdout.readline().strip() == "synced 300"
        # A program without tdax reads it while the writer still holds it.
        got = run("/bin/cat", f, check=0, env={"LD_PRELOAD": ""}).stdout.encode()
        assert got == b"".join(record(i) for i in range(300))
    c = counters(dev)
    assert c["lease_breaks"] >= 1 and c["deferred_writes"] >= 250, c


# The same random sequence of calls on one file, under bypass mode and
# without tdax: every result (bytes read, positions, sizes) must be equal.
MODEL = r"""
import os, random, sys
path, seed = sys.argv[1], int(sys.argv[2])
rnd = random.Random(seed)
fd = os.open(path, os.O_RDWR | os.O_CREAT | (os.O_APPEND if seed % 2 else 0), 0o644)
out = []
for step in range(400):
    op = rnd.choice("wwwwwwpsssrRlfSt")
    n = rnd.randrange(1, 300)
    data = bytes([rnd.randrange(256)]) * n
    if op == "w":
        out.append(("w", os.write(fd, data)))
    elif op == "p":
        out.append(("p", os.pwrite(fd, data, rnd.randrange(0, 20000))))
    elif op == "s":
        os.fdatasync(fd)
    elif op == "r":
        out.append(("r", os.read(fd, n)))
    elif op == "R":
        out.append(("R", os.pread(fd, n, rnd.randrange(0, 20000))))
    elif op == "l":
        out.append(("l", os.lseek(fd, rnd.randrange(0, 2000), rnd.choice([0, 1, 2]))))
    elif op == "f":
        out.append(("f", os.fstat(fd).st_size))
    elif op == "S":
        out.append(("S", os.stat(path).st_size))
    elif op == "t" and rnd.random() < 0.2:
        os.ftruncate(fd, rnd.randrange(0, 20000))
out.append(("end", os.lseek(fd, 0, 1), os.fstat(fd).st_size))
os.close(fd)
print(repr(out))
"""


def test_random_calls_give_what_they_give_without_tdax(dev, diskdir):
    for seed in range(6):
        plain, under = diskdir / f"plain{seed}", diskdir / f"under{seed}"
        want = run(PY, "-c", MODEL, plain, seed, check=0).stdout
        got = tdax_run(dev, MODEL, under, seed, env=BYPASS).stdout
        assert got == want, f"seed {seed}"
        assert under.read_bytes() == plain.read_bytes(), f"seed {seed}"
    c = counters(dev)
    assert c["promotions"] >= 6 and c["deferred_writes"] > 0, c


def test_unknown_mode_is_refused():
    p = run(TDAX, "run", "--mode", "direct", "--", "true")
    assert p.returncode == 2 and "unknown mode 'direct' (coherent, bypass)" in p.stderr, p.stderr
