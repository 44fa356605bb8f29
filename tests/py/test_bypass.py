"""Bypass mode, first step (src/preload/bypass.h): a promoted file's writes
go to the device alone and its syncs are a fence; anything that could see
the kernel's copy -- a read, a stat, another open, the writer's death --
finds what the application wrote, and nothing acknowledged is lost."""
import hashlib
import json
import os
import random
import signal
import subprocess
import time

from conftest import PY, TDAX, crashtest, info, power_cut, run, started, tdax_run, waited

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
    why = ("seen", "opened", "writeback", "full", "kernel")
    assert sum(c[f"demoted_{w}"] for w in why) == c["demotions"], c
    assert c["demoted_seen"] >= 1, c  # the exit's


# Appends and syncs N records, then has the write-back thread's next serve
# of the block cache wait inside it (test build) and exits meanwhile.
EXIT_IN_A_PASS = APPENDER + """
open(sys.argv[3], "w").close()
time.sleep(0.05)
"""


def test_exit_waits_for_the_write_back_threads_pass(dev, diskdir):
    """Exit's last pass and the thread's pass would both take blocks out
    of the cache's pool and give them back; the test build aborts when
    two do at once. The exit comes while the thread serves the cache."""
    f, flag = diskdir / "log", diskdir / "pause"
    p = tdax_run(dev, EXIT_IN_A_PASS, f, 100, flag, env=dict(BYPASS, TDAX_TEST_SERVE_PAUSE_IF=str(flag)))
    assert p.returncode == 0 and "at once" not in p.stderr, p.stderr
    assert f.read_bytes() == b"".join(record(i) for i in range(100))
    assert counters(dev)["promotions"] >= 1


def test_coherent_mode_promotes_nothing(dev, diskdir):
    f = diskdir / "log"
    tdax_run(dev, APPENDER, f, 100)
    c = counters(dev)
    assert c["promotions"] == 0 and c["deferred_writes"] == 0 and c["light_syncs"] >= 90, c


def test_tdax_run_writes_in_what_its_dead_command_deferred(dev, diskdir):
    """SIGKILL after acknowledged syncs: tdax run, the command's parent in
    bypass mode, writes the bytes the command had in the device alone into
    the file before it returns."""
    f = diskdir / "log"
    # (It waits for a pass of its write-back thread, which counts its
    # deferred writes, and does not write them back.)
    code = "import signal\n" + APPENDER + "time.sleep(0.3); os.kill(os.getpid(), signal.SIGKILL)\n"
    p = tdax_run(dev, code, f, 400, env=BYPASS, check=-signal.SIGKILL)
    assert "synced 400" in p.stdout
    assert f.read_bytes() == b"".join(record(i) for i in range(400))
    assert counters(dev)["deferred_writes"] >= 300


# The writer kills tdax run (its parent), then itself: nobody is left to
# write its deferred bytes in.
BOTH_DIE = "import signal\n" + APPENDER + """
time.sleep(0.3)  # a pass of its write-back thread counts its deferred writes
os.kill(os.getppid(), signal.SIGKILL)
os.kill(os.getpid(), signal.SIGKILL)
"""


def gone_in_the_device(f, n):
    """The file lacks some of n records: they are in the device alone."""
    want = b"".join(record(i) for i in range(n))
    for _ in range(100):  # the writer may still be dying
        if len(f.read_bytes()) < len(want):
            return want
        time.sleep(0.01)
    raise AssertionError("nothing was deferred: the test proves nothing")


def test_a_dead_writers_bytes_are_in_the_device_and_recovery_writes_them(dev, diskdir):
    """tdax run killed too: the file lacks the deferred bytes until
    recovery, on the same boot, writes them -- all of them."""
    f = diskdir / "log"
    tdax_run(dev, BOTH_DIE, f, 400, env=BYPASS, check=-signal.SIGKILL)
    want = gone_in_the_device(f, 400)
    r = run(TDAX, "recover", "--device", dev, check=0)
    assert f.read_bytes() == want, r.stdout


def test_the_next_process_on_the_device_writes_a_dead_writers_bytes(dev, diskdir):
    f = diskdir / "log"
    tdax_run(dev, BOTH_DIE, f, 200, env=BYPASS, check=-signal.SIGKILL)
    want = gone_in_the_device(f, 200)
    time.sleep(0.1)  # dead, not dying: its lease is gone
    # Its first write attaches it, which brings the device up to date.
    tdax_run(dev, "import sys; open(sys.argv[1], 'w').write('x')", diskdir / "other", env=BYPASS)
    assert f.read_bytes() == want


def test_a_running_process_on_the_device_writes_a_dead_writers_bytes(dev, diskdir):
    """A process already attached finds the orphan at its next look (once
    a second) and writes its bytes in."""
    f = diskdir / "log"
    holder = APPENDER + "time.sleep(60)\n"
    with started(dev, holder, diskdir / "held", 3, env=BYPASS) as p:
        assert p.stdout.readline().strip() == "synced 3"
        tdax_run(dev, BOTH_DIE, f, 200, env=BYPASS, check=-signal.SIGKILL)
        assert counters(dev)["deferred_writes"] >= 150  # (the file may be whole already)
        want = b"".join(record(i) for i in range(200))
        for _ in range(100):
            if f.read_bytes() == want:
                break
            time.sleep(0.05)
        assert f.read_bytes() == want


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
    assert c["lease_breaks"] >= 1 and c["deferred_writes"] >= 250 and c["demoted_opened"] >= 1, c


def test_a_full_log_loses_nothing_in_a_power_cut(device, diskdir):
    """A promoted file's write that finds the log full goes to the kernel
    alone (after the file is demoted): the next sync must be real."""
    run(TDAX, "device", "create", "--device", device, "--size", "8M", check=0)
    f = diskdir / "big"
    code = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.write(fd, b"@" * 100); os.fdatasync(fd)
time.sleep(0.1)  # (leases need tdax's write-back thread running)
for i in range(64):
    os.write(fd, bytes([65 + i % 26]) * 200000); os.fdatasync(fd)
print("synced", flush=True)
time.sleep(0.3)  # (a pass counts)
os.kill(os.getppid(), 9)  # tdax run: nothing syncs the file for real after the kill
os.kill(os.getpid(), 9)
"""
    assert "synced" in tdax_run(device, code, f, env=BYPASS, check=-signal.SIGKILL).stdout
    c = counters(device)
    assert c["promotions"] >= 1 and c["fallback_log_full"] >= 1, c
    power_cut(device, f)
    assert f.read_bytes() == b"@" * 100 + b"".join(bytes([65 + i % 26]) * 200000 for i in range(64))


# The same random sequence of calls on one file, under bypass mode and
# without tdax: every result (bytes read, positions, sizes, a map of the
# file, what a forked child wrote, what another program reads) must be
# equal. With a kill step the program SIGKILLs itself there: the file is
# then compared after `tdax recover`.
MODEL = r"""
import mmap, os, random, signal, subprocess, sys, time
path, seed, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
fd = os.open(path, os.O_RDWR | os.O_CREAT | (os.O_APPEND if seed % 2 else 0), 0o644)
out = []
for step in range(400):
    if step == kill_at:  # synced writes last: under tdax, in the device alone
        time.sleep(0.1)  # (leases need tdax's write-back thread running)
        for _ in range(4):
            os.write(fd, b"k" * 100)
            os.fdatasync(fd)
        print(repr(out), flush=True)
        if len(sys.argv) > 4:  # tdax run too: nobody writes in what was deferred
            os.kill(os.getppid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    # (Maps only without a kill: a file once mapped is never promoted
    # again, so nothing after one would be in the device alone.)
    op = rnd.choice("wwwwwwpsssrRlfStFo" + ("" if kill_at >= 0 else "m"))
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
    elif op == "m" and os.fstat(fd).st_size:
        with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as m:
            out.append(("m", bytes(m)))
    elif op == "F":  # a child writes through the shared descriptor
        pid = os.fork()
        if pid == 0:
            os.write(fd, data)
            os.fdatasync(fd)
            os._exit(0)
        out.append(("F", os.waitpid(pid, 0)[1], os.lseek(fd, 0, 1)))
    elif op == "o":  # another program, without tdax, opens and reads it
        out.append(("o", subprocess.run(["/bin/cat", path], capture_output=True,
                                        env={"LD_PRELOAD": ""}).stdout))
out.append(("end", os.lseek(fd, 0, 1), os.fstat(fd).st_size))
os.close(fd)
print(repr(out))
"""


def test_random_calls_give_what_they_give_without_tdax(dev, diskdir):
    for seed in range(6):
        plain, under = diskdir / f"plain{seed}", diskdir / f"under{seed}"
        want = run(PY, "-c", MODEL, plain, seed, -1, check=0).stdout
        got = tdax_run(dev, MODEL, under, seed, -1, env=BYPASS).stdout
        assert got == want, f"seed {seed}"
        assert under.read_bytes() == plain.read_bytes(), f"seed {seed}"
    c = counters(dev)
    assert c["promotions"] >= 6 and c["deferred_writes"] > 0 and c["lease_breaks"] > 0, c


def test_random_calls_then_a_kill_lose_nothing(dev, diskdir):
    """The writer dies at a random step: what it wrote (all of it reached
    the page cache without tdax) is in the file when tdax run returns; or,
    with tdax run killed too, once recovery has run."""
    deferred = 0
    for seed in range(6, 14):
        kill_at = random.Random(seed).randrange(50, 400)
        both = ["parent"] if seed % 2 else []
        plain, under = diskdir / f"plain{seed}", diskdir / f"under{seed}"
        want = run(PY, "-c", MODEL, plain, seed, kill_at, check=-signal.SIGKILL).stdout
        got = tdax_run(dev, MODEL, under, seed, kill_at, *both, env=BYPASS, check=-signal.SIGKILL).stdout
        assert got == want, f"seed {seed}"
        if both:
            time.sleep(0.1)  # dead, not dying
            deferred += under.read_bytes() != plain.read_bytes()
            run(TDAX, "recover", "--device", dev, check=0)
        assert under.read_bytes() == plain.read_bytes(), f"seed {seed}"
    assert deferred, "no kill left deferred bytes behind: the test proves nothing"


def test_unknown_mode_is_refused():
    p = run(TDAX, "run", "--mode", "direct", "--", "true")
    assert p.returncode == 2 and "unknown mode 'direct' (coherent, bypass)" in p.stderr, p.stderr


# ---- tdax run stays the command's parent in bypass mode (cli/supervise.h) ----

def test_tdax_run_ends_with_the_commands_status(dev):
    assert run(TDAX, "run", "--device", dev, "--mode", "bypass", "--", "sh", "-c", "exit 7").returncode == 7
    p = run(TDAX, "run", "--device", dev, "--mode", "bypass", "--", "/nonexistent/cmd")
    assert p.returncode == 127 and "cannot run /nonexistent/cmd" in p.stderr


def test_a_signal_sent_to_tdax_run_reaches_the_command(dev):
    code = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: (print("got TERM", flush=True), sys.exit(3)))
print("ready", flush=True)
time.sleep(30)
"""
    with started(dev, code, env=BYPASS) as p:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGTERM)
        assert waited(p, 10) == 3
        assert p.stdout.readline().strip() == "got TERM"


def test_a_daemon_of_the_command_is_reaped_and_its_deferred_bytes_written(dev, diskdir):
    """The command starts a daemon (double fork, new session) and exits;
    the daemon writes, syncs, and is killed. tdax run, its subreaper, waits
    for it and writes what it deferred into the file before it returns."""
    f = diskdir / "log"
    code = "import signal\n" + r"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(0.2)  # the command has exited: the daemon's parent is tdax run
        fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        for i in range(300):
            os.write(fd, b"%06d-%s\n" % (i, b"x" * 57))
            os.fdatasync(fd)
            if i == 0:
                time.sleep(0.1)
        time.sleep(0.3)  # a pass counts its deferred writes
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(0)
os.wait()
print("command done", flush=True)
"""
    p = tdax_run(dev, code, f, env=BYPASS, check=0)
    assert "command done" in p.stdout
    assert f.read_bytes() == b"".join(record(i) for i in range(300))
    assert counters(dev)["deferred_writes"] >= 250


def test_status_names_a_promoted_file_and_its_process(dev, diskdir):
    """... with its bandwidth, its blocks in the block cache and their hit
    rate (#20 item 5), as its write-back thread publishes them."""
    f = diskdir / "log"
    holder = APPENDER + "print(os.getpid(), flush=True)\ntime.sleep(60)\n"
    with started(dev, holder, f, 2000, env=BYPASS) as p:
        assert p.stdout.readline().strip() == "synced 2000"
        pid = int(p.stdout.readline())
        time.sleep(0.2)  # (published every 100 ms)
        st = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
        mine = [x for x in st["files"] if x["path"] == str(f)]
        assert mine and mine[0]["mode"] == "bypass" and mine[0]["promoted_by"] == pid, st["files"]
        assert mine[0]["logged_bytes"] >= 1900 * 64
        cache = mine[0]["cache"]
        # ~1,900 appends of 64 B after the promotion: ~30 blocks of 4 KiB,
        # every append but each block's first found its block
        assert 20 <= cache["blocks"] <= 40 and cache["block_size"] == 4096, cache
        assert cache["hits"] >= 1800 and cache["misses"] <= 100, cache
        assert cache["bandwidth"] > 0 and cache["append_bandwidth"] == cache["bandwidth"], cache
        text = run(TDAX, "status", "--device", dev, check=0).stdout
        assert f"{f}  [bypass: promoted by pid {pid}," in text, text
        assert "blocks of 4 KiB cached, 9" in text and "% hits" in text and "MB/s" in text, text
    # Killed with it promoted: recovery writes it in, and it is coherent again.
    run(TDAX, "recover", "--device", dev, check=0)
    st = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
    assert all(x["mode"] == "coherent" and x["promoted_by"] == 0 for x in st["files"]), st["files"]


def test_the_writers_own_second_open_sees_every_write(dev, diskdir):
    """An open by the process itself: the file is demoted first (on the
    opening thread; the open then breaks a coherent lease only)."""
    f = diskdir / "log"
    code = APPENDER + """
with open(sys.argv[1], "rb") as r:
    got = r.read()
print("same" if got == b"".join(b"%06d-%s\\n" % (i, b"x" * 57) for i in range(n)) else "DIFFERENT")
"""
    out = tdax_run(dev, code, f, 300, env=BYPASS).stdout
    assert "same" in out, out
    c = counters(dev)
    assert c["promotions"] >= 1 and c["deferred_writes"] >= 250 and c["demoted_seen"] >= 1, c


def test_a_dup_made_before_the_file_was_registered_keeps_it_from_promotion(dev, diskdir):
    """Under a policy that lets a file wait for its registration (the
    default), a descriptor duplicated before then stays in unregistered
    mode: its writes are the kernel's, at the kernel's end of the file. A
    promoted file's end lies in the device, so while such a dup lives the
    file must not be promoted (one of the dup's records was lost in about
    one run in three: it landed at the kernel's stale end, and the
    demotion wrote the device's blocks over it). The same loop without the
    dup is promoted: the control that the loop can be."""
    code = r"""
import os, sys, time
for attempt in range(4):
    path = "%s.%d" % (sys.argv[1], attempt)
    a = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    b = os.dup(a) if sys.argv[2] == "dup" else None
    want = b""
    for i in range(1500):
        r = b"a%05d\n" % i
        os.write(a, r); os.fdatasync(a); want += r
        if i == 5:
            time.sleep(0.2)  # the write-back thread starts: leases need it
    for i in range(20):
        for fd, tag in ((b, b"B"), (a, b"a")):
            if fd is not None:
                r = tag + b"%05d\n" % i
                os.write(fd, r); want += r
    os.fdatasync(a)
    os.close(a)
    if b is not None:
        os.close(b)
    print("same" if open(path, "rb").read() == want else "DIFFERENT", flush=True)
"""
    out = tdax_run(dev, code, diskdir / "log", "dup", env=BYPASS, policy="adaptive").stdout
    assert out.split() == ["same"] * 4, out
    assert counters(dev)["promotions"] == 0
    out = tdax_run(dev, code, diskdir / "alone", "alone", env=BYPASS, policy="adaptive").stdout
    assert out.split() == ["same"] * 4, out
    assert counters(dev)["promotions"] >= 4


def test_the_write_backs_checkpoint_keeps_the_file_promoted_and_a_kill_after_it_loses_nothing(dev, diskdir):
    """A checkpoint at the write-back age writes the promoted file's dirty
    blocks in, syncs it and lets its records up to then go -- and the file
    stays promoted (one promotion, no demotion by the write-back). Then the
    writer goes on, tdax run is killed with it, and recovery must find every
    record: those the checkpoint let go in the file, the later ones in the
    device."""
    f = diskdir / "log"
    code = r"""
import os, signal, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
n = int(sys.argv[2])
for i in range(2 * n):
    os.write(fd, b"%06d-%s\n" % (i, b"x" * 57))
    os.fdatasync(fd)
    if i in (0, n):
        time.sleep(0.5)  # the write-back thread starts (leases need it); then checkpoints
time.sleep(0.03)  # passes of its write-back thread count its deferred writes, before their age
os.kill(os.getppid(), signal.SIGKILL)
os.kill(os.getpid(), signal.SIGKILL)
"""
    env = dict(BYPASS, TDAX_WB_AGE_MS="100", TDAX_TEST_DURABLE_SHADOW="0")
    tdax_run(dev, code, f, 3000, env=env, check=-signal.SIGKILL)
    c = counters(dev)
    assert c["promotions"] == 1 and c["checkpoints"] >= 1 and c["demoted_writeback"] == 0, c
    assert c["deferred_writes"] >= 5900, c
    want = gone_in_the_device(f, 6000)
    assert len(f.read_bytes()) >= 3000 * len(record(0)) // 2, "the checkpoint wrote nothing in"
    time.sleep(0.1)
    run(TDAX, "recover", "--device", dev, check=0)
    assert f.read_bytes() == want


def test_a_writer_of_many_times_the_block_cache_evicts_and_loses_nothing(dev, diskdir):
    """The block cache (src/preload/cache.h) holds a share of the device:
    here 6 % of 64 MiB, three arenas of blocks, against ~10 MB of synced
    appends. Its pool is kept by evicting (S3-FIFO) and writing the
    victims into the file, while the file stays promoted; then tdax run is
    killed with the writer, and recovery must find every record."""
    f = diskdir / "log"
    n = 160_000
    env = dict(BYPASS, TDAX_WB_BYTES="1T", TDAX_BYPASS_SHARE_PCT="6")
    tdax_run(dev, BOTH_DIE, f, n, env=env, check=-signal.SIGKILL)
    c = counters(dev)
    assert c["promotions"] >= 1 and c["deferred_writes"] >= n - 10, c
    assert c["cache_evictions"] >= 1000 and c["cache_writebacks"] >= 1000, c
    assert c["cache_hits"] > c["cache_misses"], c  # 64 appends a 4 KiB block
    want = gone_in_the_device(f, n)
    time.sleep(0.1)
    run(TDAX, "recover", "--device", dev, check=0)
    assert f.read_bytes() == want


def test_writes_into_the_file_from_two_threads_keep_their_offsets_through_o_append(dev, diskdir):
    """A write that finds no free block goes into the file at once (from
    the application's thread), while the write-back thread writes evicted
    blocks in through a copy of the same descriptor: the open file, and
    its O_APPEND, are one. Each lifts O_APPEND around its write; one giving
    it back while the other's write was under way put that write at the
    file's end (the crash suite found 63 blocks missing from the middle of
    a Redis AOF). Where the kernel takes RWF_NOAPPEND (6.9) nothing is
    lifted; the test build's aid makes tdax lift as on an older kernel, and
    pause after every lift to widen the window. The file must come out
    whole."""
    f = diskdir / "log"
    n = 40_000
    env = dict(BYPASS, TDAX_WB_BYTES="1T", TDAX_BYPASS_SHARE_PCT="2", TDAX_TEST_LIFT_PAUSE_US="2000")
    tdax_run(dev, APPENDER, f, n, env=env)
    c = counters(dev)
    assert c["promotions"] >= 1 and c["cache_evictions"] >= 100, c
    assert c["cache_noblock"] >= 20, c  # the application's own writes into the file
    want = b"".join(record(i) for i in range(n))
    got = f.read_bytes()
    assert len(got) == len(want)
    bad = next((i for i in range(0, len(want), 4096) if got[i:i + 4096] != want[i:i + 4096]), None)
    assert bad is None, f"block at {bad} differs: {got[bad:bad + 64]!r}"


# Appends and syncs, then reads back what it wrote, through the same
# descriptor: the reads come from the device's blocks.
READ_BACK = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
os.write(fd, b"x" * 64); os.fdatasync(fd)
time.sleep(0.1)  # (leases need tdax's write-back thread running)
for i in range(1, 2000):
    os.write(fd, b"%063d\n" % i); os.fdatasync(fd)
time.sleep(0.1)
good = 0
for i in range(1, 2000):
    good += os.pread(fd, 64, i * 64) == b"%063d\n" % i
print(good, flush=True)
"""


def test_reads_of_a_promoted_file_come_from_its_blocks_without_a_system_call(dev, diskdir):
    """#19 item 3: a read of blocks the cache holds is a copy from device
    memory. 1,999 preads of what the writer appended make no pread64 at
    all under bypass mode (strace counts), each one under coherent mode."""
    def preads(mode):
        out = diskdir / f"strace.{mode}"
        p = run(TDAX, "run", "--device", dev, "--mode", mode, "--", "strace", "-f", "-c", "-U", "name,calls",
                "-o", out, PY, "-c", READ_BACK, diskdir / f"log.{mode}", env={"TDAX_QUIET": "1"}, check=0)
        assert p.stdout.strip() == "1999", p.stdout + p.stderr
        calls = dict(ln.split()[:2] for ln in out.read_text().splitlines()[2:] if ln.split()[:1] != ["total"]
                     and len(ln.split()) == 2 and ln.split()[1].isdigit())
        return int(calls.get("pread64", 0))
    assert preads("coherent") >= 1999
    assert preads("bypass") < 10
    c = counters(dev)
    assert c["cache_hits"] >= 1999, c


# Overwrites 4 KiB blocks of a file, each write one byte value, syncing
# every few writes, until killed from outside.
TORN = r"""
import os, random, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"\0" * (64 * 4096), 0)
os.fdatasync(fd)
rnd, n = random.Random(int(sys.argv[2])), 0
print("ready", flush=True)
while True:
    n += 1
    os.pwrite(fd, bytes([n % 251 + 1]) * 4096, rnd.randrange(64) * 4096)
    if n % 5 == 0:
        os.fdatasync(fd)
"""


def test_a_write_of_4k_is_whole_or_absent_after_a_crash(dev, diskdir):
    """Sector atomicity (#19 item 5): the writer is killed at random
    instants -- some inside the copy of a record into the device -- and
    recovery (same boot, or after a power cut) leaves each 4 KiB block all
    one write's bytes, never two writes' mixed."""
    rnd = random.Random(7)
    for r in range(8):
        f = diskdir / f"blocks{r}"
        with started(dev, TORN, f, r, env=BYPASS) as p:
            assert p.stdout.readline().strip() == "ready"
            time.sleep(rnd.uniform(0.05, 0.3))
            tree = crashtest.descendants(p.pid)
            crashtest.kill_tree([p])
            crashtest.wait_gone(tree)  # dead, not dying: a replay waits for no writer
        if r % 2:
            power_cut(dev, f)
        else:
            run(TDAX, "recover", "--device", dev, check=0)
        data = f.read_bytes()
        assert len(data) == 64 * 4096
        mixed = [k for k in range(64) if len(set(data[k * 4096:(k + 1) * 4096])) != 1]
        assert not mixed, f"round {r}: blocks {mixed} hold two writes' bytes"
    assert counters(dev)["deferred_writes"] > 0


def test_another_programs_stat_sees_the_size_within_the_write_back_age(dev, diskdir):
    """A stat by path opens nothing, so it breaks no lease: what it sees
    lags by the write-back age at most (a checkpoint writes the file's dirty
    blocks in; the file stays promoted)."""
    f = diskdir / "log"
    holder = APPENDER + "time.sleep(60)\n"
    # (without the test build's durable view: a checkpoint of a promoted
    # file demotes it where that view is on, src/core/shadow.h)
    with started(dev, holder, f, 300, env=dict(BYPASS, TDAX_WB_AGE_MS="300", TDAX_TEST_DURABLE_SHADOW="0")) as p:
        assert p.stdout.readline().strip() == "synced 300"
        t0 = time.time()
        while os.stat(f).st_size < 300 * len(record(0)) and time.time() - t0 < 5:
            time.sleep(0.02)
        assert os.stat(f).st_size == 300 * len(record(0))
        # The pass that checkpointed the file adds its counts to the
        # device's as it ends: wait for them (a kill before would lose them).
        while counters(dev)["checkpoints"] < 1 and time.time() - t0 < 5:
            time.sleep(0.02)
    c = counters(dev)
    assert c["deferred_writes"] >= 250 and c["checkpoints"] >= 1 and c["demoted_writeback"] == 0, c
    assert c["promotions"] == 1, c


def test_the_lease_signal_moves_out_of_the_applications_way(dev, diskdir):
    """An application that handles tdax's default lease signal turns
    leases (and so promotion) off in its process; TDAX_LEASE_SIGNAL picks
    another, and a foreign open still finds every byte."""
    f = diskdir / "log"
    mine = "import signal\nsignal.signal(signal.SIGRTMAX - 2, lambda *a: None)\n"
    tdax_run(dev, mine + APPENDER, f, 100, env=BYPASS)
    assert counters(dev)["promotions"] == 0
    holder = mine + APPENDER + "time.sleep(60)\n"
    g = diskdir / "log2"
    with started(dev, holder, g, 300, env=dict(BYPASS, TDAX_LEASE_SIGNAL="50")) as p:
        assert p.stdout.readline().strip() == "synced 300"
        got = run("/bin/cat", g, check=0, env={"LD_PRELOAD": ""}).stdout.encode()
        assert got == b"".join(record(i) for i in range(300))
    c = counters(dev)
    assert c["promotions"] >= 1 and c["demoted_opened"] >= 1, c


def test_reads_seeks_and_stats_of_a_promoted_file_are_served_without_a_demotion(dev, diskdir):
    """Through its own descriptor, opened for reading and writing: the
    kernel's copy with the deferred writes over it, tdax's position and
    size; a stat by name (stat, lstat, fstatat, statx) tdax's size too --
    and the file stays promoted."""
    f = diskdir / "log"
    code = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def statx(path):  # (size, blocks): struct statx's stx_size and stx_blocks
    buf = ctypes.create_string_buffer(256)
    assert libc.statx(-100, path.encode(), 0, 0x200 | 0x400, buf) == 0, ctypes.get_errno()
    return int.from_bytes(buf.raw[40:48], "little"), int.from_bytes(buf.raw[48:56], "little")
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"a" * 100); os.fdatasync(fd)
time.sleep(0.1)  # (leases need tdax's write-back thread running)
os.fdatasync(fd)  # (and a descriptor's third sync: lease.h)
os.write(fd, b"b" * 100); os.fdatasync(fd)
os.pwrite(fd, b"c" * 10, 50)           # over the kernel's copy
os.write(fd, b"d" * 5000); os.fdatasync(fd)  # past the kernel's end
want = b"a" * 50 + b"c" * 10 + b"a" * 40 + b"b" * 100 + b"d" * 5000
out = [os.pread(fd, 6000, 0) == want, os.fstat(fd).st_size == len(want),
       os.lseek(fd, 0, os.SEEK_CUR) == len(want), os.lseek(fd, -5010, os.SEEK_END) == 190,
       os.read(fd, 20) == b"b" * 10 + b"d" * 10, os.lseek(fd, 0, os.SEEK_CUR) == 210,
       os.preadv(fd, [bytearray(30), bytearray(40)], 40) == 70]
os.write(fd, b"e" * 10)                 # at the position a read moved
os.fdatasync(fd)
want = want[:210] + b"e" * 10 + want[220:]
out.append(os.pread(fd, 10000, 0) == want)
dfd = os.open(os.path.dirname(sys.argv[1]), os.O_RDONLY)
sizes = [os.stat(sys.argv[1]).st_size, os.lstat(sys.argv[1]).st_size,
         os.stat(os.path.basename(sys.argv[1]), dir_fd=dfd).st_size, statx(sys.argv[1])[0]]
out.append(sizes == [len(want)] * 4 or sizes)
out.append(os.stat(sys.argv[1]).st_blocks * 512 >= len(want) and statx(sys.argv[1])[1] * 512 >= len(want))
out.append(os.stat(os.path.dirname(sys.argv[1])).st_size != len(want))  # another name: the kernel's
os.write(fd, b"f" * 10)  # still promoted: no second promotion
os.fdatasync(fd)
print(out, flush=True)
"""
    p = tdax_run(dev, code, f, env=BYPASS)
    assert p.stdout.strip() == str([True] * 11), p.stdout
    c = counters(dev)
    assert c["promotions"] >= 1 and c["deferred_writes"] >= 3, c
    assert c["promotions"] == 1 and c["demoted_seen"] == 1, c  # the exit's demotion alone
    assert f.read_bytes() == (b"a" * 50 + b"c" * 10 + b"a" * 40 + b"b" * 100 + b"d" * 10 + b"e" * 10 + b"f" * 10
                              + b"d" * 4970)


# Two files in one process: "hot" gets 4 KiB appends, each synced, at
# 4 MB/s (kept to the clock); "cold" one 256 KiB write in place, synced,
# every 0.5 s (512 KB/s). After the first phase the hot one stops while the
# cold one goes on. Prints "phase 1 done" and "phase 2 done", then waits.
HOT_COLD = r"""
import os, sys, time
hot = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
cold = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644)
block, big = b"h" * 4096, b"c" * (256 << 10)
def run(seconds, with_hot):
    start = next_cold = time.monotonic()
    written = 0
    while time.monotonic() < start + seconds:
        if time.monotonic() >= next_cold:
            os.pwrite(cold, big, 0)
            os.fdatasync(cold)
            next_cold += 0.5
        while with_hot and written < 4_000_000 * (time.monotonic() - start):
            os.write(hot, block)
            os.fdatasync(hot)
            written += len(block)
        time.sleep(0.005)
run(1.5, True)
print("phase 1 done", flush=True)
run(2.5, False)
print("phase 2 done", flush=True)
time.sleep(60)
"""


def modes(dev, *paths):
    st = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
    by = {x["path"]: x["mode"] for x in st["files"]}
    return [by.get(str(p)) for p in paths]


def test_the_selection_promotes_the_busier_file_where_there_is_room_for_one(dev, diskdir):
    """Bypass mode promotes the files with the most bandwidth that fit the
    device's share (src/policy/select.h): with room for the hot file's
    append reservation (~400 KB) or for the cold file's blocks of a second
    (~512 KB), not for both, the hot one is promoted within a window and the
    cold one is not; when the hot one stops, the selection drops it
    (demoted_unselected) and takes the cold one."""
    hot, cold = diskdir / "hot", diskdir / "cold"
    # 1 % of the 64 MiB device's ~63 MB log: ~630 KB.
    env = dict(BYPASS, TDAX_BYPASS_SHARE_PCT="1")
    with started(dev, HOT_COLD, hot, cold, env=env) as p:
        assert p.stdout.readline().strip() == "phase 1 done"
        assert modes(dev, hot, cold) == ["bypass", "coherent"]
        assert p.stdout.readline().strip() == "phase 2 done"
        assert modes(dev, hot, cold) == ["coherent", "bypass"]
        c = counters(dev)
        assert c["demoted_unselected"] >= 1 and c["promotions"] >= 2, c


def test_a_bad_selection_setting_is_said_and_the_nearest_bound_used(dev, diskdir):
    f = diskdir / "log"
    p = tdax_run(dev, APPENDER, f, 100, env=dict(BYPASS, TDAX_QUIET="0", TDAX_BYPASS_SHARE_PCT="0"))
    assert "TDAX_BYPASS_SHARE_PCT=0 is outside 1..100; using 1" in p.stderr, p.stderr
    assert counters(dev)["promotions"] >= 1  # 1 % of the log: room for this file


# Fills 12 MiB of a file in 4 KiB writes (synced every 16), then rewrites
# random blocks of it at ~100 a second, each synced, until the file named
# second exists; prints "filled" after the fill, then the SHA-256 of what
# it wrote.
REWRITER = r"""
import hashlib, os, random, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
blocks = 3072
model = bytearray()
for i in range(blocks):
    b = b"%08d" % i * 512
    os.write(fd, b); model += b
    if i % 16 == 15:
        os.fdatasync(fd)
os.fdatasync(fd)
print("filled", flush=True)
rng, gen = random.Random(7), 0
while not os.path.exists(sys.argv[2]):
    i, gen = rng.randrange(blocks), gen + 1
    b = b"%08d" % (blocks + gen) * 512
    os.pwrite(fd, b, i * 4096); model[i * 4096:(i + 1) * 4096] = b
    os.fdatasync(fd)
    time.sleep(0.01)
print(hashlib.sha256(model).hexdigest(), flush=True)
"""


def arenas(dev):
    return info(dev)["segments_arena"]


def until(what, seconds):
    end = time.monotonic() + seconds
    while not what() and time.monotonic() < end:
        time.sleep(0.05)
    return what()


def test_the_share_set_at_run_time_shrinks_and_grows_a_running_cache(dev, diskdir):
    """#20 item 5: `tdax set bypass_share_pct` reaches a running process.
    Its 12 MiB file fills a dozen arenas under the default half of the
    device; at 2 % (one arena) the write-back thread evicts the blocks of
    the others, writing them into the file, and gives them back to the log
    while the file stays promoted and keeps being written; at 50 % again
    the cache grows back as the writes come. The file ends as written."""
    f, stop = diskdir / "data", diskdir / "stop"
    with started(dev, REWRITER, f, stop, env=BYPASS) as p:
        assert p.stdout.readline().strip() == "filled"
        assert until(lambda: arenas(dev) >= 10, 30), info(dev)  # (its fill: slower on a loaded machine)
        time.sleep(1.5)  # the fill's bandwidth leaves the window: the rewrites fit 2 %
        evicted = counters(dev)["cache_evictions"]
        run(TDAX, "set", "--device", dev, "bypass_share_pct=2", check=0)
        assert until(lambda: arenas(dev) <= 1, 5), info(dev)
        c = counters(dev)
        assert c["cache_evictions"] - evicted >= 2000 and c["demoted_unselected"] == 0, c
        assert modes(dev, f) == ["bypass"]
        run(TDAX, "set", "--device", dev, "bypass_share_pct=50", check=0)
        assert until(lambda: arenas(dev) >= 2, 5), info(dev)
        stop.write_bytes(b"")
        want = p.stdout.readline().strip()
        assert waited(p, 30) == 0, p.stderr.read()
    assert hashlib.sha256(f.read_bytes()).hexdigest() == want
    assert counters(dev)["promotions"] == 1


def test_the_floor_and_block_size_set_at_run_time_are_followed(dev, diskdir):
    """A floor above the file's bandwidth, set while it is promoted, has
    the selection drop it within a pass; back at 0, the next syncs promote
    it again. The block size is fixed when a process's cache is set up:
    one started after `tdax set bypass_block=16384` caches 16 KiB blocks."""
    f = diskdir / "log"
    run(TDAX, "set", "--device", dev, "bypass_block=16384", check=0)
    endless = APPENDER.replace("for i in range(n):", "for i in range(10 ** 9):") \
                      .replace("os.fdatasync(fd)\n", "os.fdatasync(fd); time.sleep(0.001)\n", 1)
    with started(dev, endless, f, 0, env=BYPASS):
        assert until(lambda: modes(dev, f) == ["bypass"], 5), modes(dev, f)

        def cached():
            st = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
            return [x.get("cache", {}) for x in st["files"] if x["path"] == str(f)][0]
        assert until(lambda: cached().get("blocks", 0) >= 1, 5), cached()
        assert cached()["block_size"] == 16384
        run(TDAX, "set", "--device", dev, "bypass_floor=1000000000000", check=0)
        assert until(lambda: modes(dev, f) == ["coherent"], 5), modes(dev, f)
        assert counters(dev)["demoted_unselected"] >= 1
        run(TDAX, "set", "--device", dev, "bypass_floor=0", check=0)
        assert until(lambda: modes(dev, f) == ["bypass"], 5), modes(dev, f)


# One file written as HOT_COLD's hot one (role "hot") or cold one ("cold")
# for a minute; prints "started" after its first synced write.
ONE_OF_TWO = r"""
import os, sys, time
role, path = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if role == "hot" else 0), 0o644)
data = b"h" * 4096 if role == "hot" else b"c" * (256 << 10)
rate, start, written = (4_000_000 if role == "hot" else 512_000), time.monotonic(), 0
while time.monotonic() < start + 60:
    while written < rate * (time.monotonic() - start) + 1:
        os.pwrite(fd, data, 0) if role == "cold" else os.write(fd, data)
        os.fdatasync(fd)
        if not written:
            print("started", flush=True)
        written += len(data)
    time.sleep(0.005)
"""


def test_one_selection_over_the_device_drops_another_processs_smaller_file(dev, diskdir):
    """#20 item 2, device-wide: the capacity is the device's, shared by
    every process. With room for the hot file or the cold one, not both
    (as in the test above, but each in a process of its own): the cold one,
    alone at first, is promoted; once the hot one comes, in another
    process, the cold one's own process drops it (demoted_unselected) and
    the hot one is promoted."""
    hot, cold = diskdir / "hot", diskdir / "cold"
    # (Without the test build's durable view, whose reopen at a checkpoint
    # demotes: files would come and go at every write-back age.)
    env = dict(BYPASS, TDAX_BYPASS_SHARE_PCT="1", TDAX_TEST_DURABLE_SHADOW="0")
    with started(dev, ONE_OF_TWO, "cold", cold, env=env) as c:
        assert c.stdout.readline().strip() == "started"
        assert until(lambda: modes(dev, cold) == ["bypass"], 5), modes(dev, cold)
        # Its rewrites from offset 0 are in place, not appends, though each
        # ends at the file's end: its footprint is a second of them.
        for _ in range(5):
            time.sleep(0.2)
            st = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
            cache = [x["cache"] for x in st["files"] if x["path"] == str(cold)][0]
            assert cache["bandwidth"] > 0 and cache["append_bandwidth"] == 0, cache
        with started(dev, ONE_OF_TWO, "hot", hot, env=env) as h:
            assert h.stdout.readline().strip() == "started"
            assert until(lambda: modes(dev, hot, cold) == ["bypass", "coherent"], 5), modes(dev, hot, cold)
            # (The counters reach the device at the cold process's next pass.)
            assert until(lambda: counters(dev)["demoted_unselected"] >= 1, 2), counters(dev)
            time.sleep(1)  # and it stays so
            assert modes(dev, hot, cold) == ["bypass", "coherent"]


def test_two_processes_split_the_share_between_their_caches(dev, diskdir):
    """Two rewriters of 12 MiB each, under a share of 20 % of the device's
    log (12 arenas): each alone would take all of it; together their caches
    hold no more than the share, split by their files' footprints, both
    files stay promoted, and both end as written."""
    env = dict(BYPASS, TDAX_BYPASS_SHARE_PCT="20")
    a, b = diskdir / "a", diskdir / "b"
    with started(dev, REWRITER, a, diskdir / "stop", env=env) as p:
        assert p.stdout.readline().strip() == "filled"
        assert until(lambda: arenas(dev) >= 10, 30), info(dev)  # (its fill: slower on a loaded machine)
        with started(dev, REWRITER, b, diskdir / "stop", env=env) as q:
            assert q.stdout.readline().strip() == "filled"
            time.sleep(2)  # the fills leave the window
            seen = []
            for _ in range(10):
                seen.append(arenas(dev))
                time.sleep(0.1)
            assert max(seen) <= 12, seen
            assert modes(dev, a, b) == ["bypass", "bypass"]
            (diskdir / "stop").write_bytes(b"")
            want = [p.stdout.readline().strip(), q.stdout.readline().strip()]
            assert waited(p, 30) == 0 and waited(q, 30) == 0
    assert [hashlib.sha256(f.read_bytes()).hexdigest() for f in (a, b)] == want


# A file open twice (never promoted: another descriptor has it), synced in
# bursts with idle seconds between; "burst N" after each.
NEVER_PROMOTED = r"""
import os, sys, time
a = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
b = os.open(sys.argv[1], os.O_WRONLY)
for burst in range(3):
    for i in range(20):
        os.write(a, b"z" * 64)
        os.fdatasync(a)
    print("burst", burst, flush=True)
    time.sleep(1.6)
"""


def test_a_process_that_promotes_nothing_gives_its_arenas_back_for_good(dev, diskdir):
    """Its first sync of a file that may be promoted has the write-back
    thread claim the block cache's pool (a promotion then finds blocks);
    once no block has been used for a second the arenas go back to the log,
    and later syncs claim none again: only a promotion, or a write that
    finds no block, wants them."""
    with started(dev, NEVER_PROMOTED, diskdir / "f", env=BYPASS, policy="adaptive") as p:
        assert p.stdout.readline().strip() == "burst 0"
        assert until(lambda: arenas(dev) > 0, 1), info(dev)  # the pool for a promotion
        assert until(lambda: arenas(dev) == 0, 3), info(dev)  # idle: given back
        seen = []
        for line in ("burst 1", "burst 2"):
            assert p.stdout.readline().strip() == line
            for _ in range(10):
                seen.append(arenas(dev))
                time.sleep(0.1)
        assert waited(p, 10) == 0, p.stderr.read()
    assert seen == [0] * 20 and counters(dev)["promotions"] == 0, seen


# Appends and syncs for S seconds (printing "promoted run done"), waits for
# a line on stdin (another program opens the file meanwhile: the writer is
# demoted), then appends and syncs 200 more and prints "done".
STREAM_THEN_DEMOTED = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    os.write(fd, b"s" * 128)
    os.fdatasync(fd)
    time.sleep(0.0005)
print("promoted run done", flush=True)
sys.stdin.readline()
for i in range(200):
    os.write(fd, b"t" * 128)
    os.fdatasync(fd)
print("done", flush=True)
"""


def test_a_promoted_files_syncs_reach_the_policy_while_it_runs(dev, diskdir):
    """A promoted file's lightweight syncs are counted by the policy later
    (tracking.h tdax_tracking_sync_later), in bulk by the write-back
    thread at least every 100 ms and at a demotion: seconds into a
    promoted run, long after the writeback window (1 s) forgot the syncs
    before the promotion, its ranges show the writebacks of the last
    second, and stay upgraded."""
    f = diskdir / "log"
    env = dict(BYPASS, TDAX_TEST_DURABLE_SHADOW="0")
    with started(dev, STREAM_THEN_DEMOTED, f, 4, env=env, policy="thesis", stdin=subprocess.PIPE):
        assert until(lambda: modes(dev, f) == ["bypass"], 5), modes(dev, f)
        time.sleep(1.5)
        seen = []
        for _ in range(5):
            st = json.loads(run(TDAX, "status", "--device", dev, "--json", "-v", check=0).stdout)
            ranges = [x["range_detail"] for x in st["files"] if x["path"] == str(f)][0]
            seen.append((sum(r["writebacks"] for r in ranges), [r["state"] for r in ranges],
                         modes(dev, f)))
            time.sleep(0.3)
    assert all(wb >= 100 and "upgraded" in states and mode == ["bypass"] for wb, states, mode in seen), seen


def test_a_demoted_files_syncs_stay_light_after_a_long_promoted_run(dev, diskdir):
    """While a file is promoted the policy still hears of its syncs
    (bypass.c light, in bulk: the test above), so its ranges stay upgraded
    through seconds in the device alone: once another open demotes it, its
    syncs in coherent mode are lightweight at once. (A look at one sync a
    clock tick, counting the others, was tried: every sync after the
    demotion was real.)"""
    f = diskdir / "log"
    # (Without the test build's durable view, whose reopen at a checkpoint
    # demotes: the run would not be one promotion.)
    env = dict(BYPASS, TDAX_TEST_DURABLE_SHADOW="0")
    with started(dev, STREAM_THEN_DEMOTED, f, 4, env=env, policy="thesis", stdin=subprocess.PIPE) as p:
        assert p.stdout.readline().strip() == "promoted run done"
        assert modes(dev, f) == ["bypass"]
        run("/bin/cat", f, check=0, env={"LD_PRELOAD": ""})  # demotes it
        before = counters(dev)
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "done"
        after = counters(dev)
    assert before["promotions"] == 1 and before["demoted_opened"] == 1, before
    assert after["real_syncs"] - before["real_syncs"] <= 3, (before, after)


def test_a_child_that_ends_with_exit_leaves_its_file_whole_for_its_parent(dev, diskdir):
    """_exit skips atexit, and tdax's last pass with it: a promoted file
    whose writer ends so (a multiprocessing worker, a forked child) must
    have its deferred bytes in the file by the time its parent has waited
    for it -- not only once some write-back finds the orphan."""
    f = diskdir / "log"
    code = r"""
import os, sys, time
path = sys.argv[1]
pid = os.fork()
if pid == 0:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for i in range(300):
        os.write(fd, b"%06d-%s\n" % (i, b"x" * 57)); os.fdatasync(fd)
        if i == 0:
            time.sleep(0.1)  # the write-back thread starts: leases need it
    os._exit(0)
os.waitpid(pid, 0)
with open(path, "rb") as r:
    print(len(r.read()), flush=True)
"""
    p = tdax_run(dev, code, f, env=dict(BYPASS, TDAX_QUIET="1"))
    c = counters(dev)
    assert c["promotions"] >= 1 and c["deferred_writes"] >= 250, c
    want = b"".join(record(i) for i in range(300))
    assert p.stdout.split() == [str(len(want))], p.stdout
    assert f.read_bytes() == want
