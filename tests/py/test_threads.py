"""Threads that come and go (a thread a request): each thread that logs
appends to a log segment of its own, and one that exits hands it to the
next thread of the process (src/core/log.c, "orphans"). Before, each took
a fresh segment that stayed its own until its records were released, and
a burst of threads filled the log: every sync after it was real."""
import os
import signal
import subprocess

import pytest

from conftest import (ACKED_C, TDAX, TDAX_ENV, acked_under_tdax, build_both, counters_once, info, killed_and_cut,
                      run, started, tdax_run)

# argv: file, n. n threads one after the other, each one write and one sync.
CHURN = r"""
import os, sys, threading
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
def one():
    os.write(fd, b"x" * 100)
    os.fdatasync(fd)
for i in range(int(sys.argv[2])):
    t = threading.Thread(target=one)
    t.start()
    t.join()
"""


def test_threads_made_one_at_a_time_keep_their_syncs_light(dev, diskdir):
    """300 threads on a 64 MiB device (60 segments): every sync light."""
    r = tdax_run(dev, CHURN, diskdir / "f", 300)
    assert r.returncode == 0, r.stderr
    c = info(dev)["counters"]
    assert c["light_syncs"] == 300 and c["real_syncs"] == 0 and c.get("fallback_log_full", 0) == 0, c
    assert (diskdir / "f").stat().st_size == 300 * 100


# argv: file, n. Thread i writes its 8 bytes at i * 8 (over a file of
# zeros) and syncs; the main thread says i once it is joined, then "done".
ACKED = r"""
import os, sys, threading, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
n = int(sys.argv[2])
os.pwrite(fd, bytes(8 * n), 0)
os.fsync(fd)
def one(i):
    os.pwrite(fd, b"%07d\n" % i, i * 8)
    os.fdatasync(fd)
for i in range(n):
    t = threading.Thread(target=one, args=(i,))
    t.start()
    t.join()
    print(i, flush=True)
print("done", flush=True)
time.sleep(600)
"""


def test_threads_that_hand_their_segments_on_lose_nothing_at_a_power_cut(dev, voldisk):
    """Each thread's write is in a segment another thread adopted and went
    on writing: killed, the disk's cache lost, recovered -- every
    acknowledged write is there."""
    f, n = voldisk.mnt / "f", 200
    with started(dev, ACKED, f, n) as p:
        acked = []
        for line in p.stdout:
            if line.strip() == "done":
                break
            acked.append(int(line))
        assert len(acked) == n, p.stderr.read()
        c = counters_once(dev, lambda c: c["light_syncs"] >= n)  # (counted at the write-back's pass)
        assert c["light_syncs"] >= n and c["real_syncs"] == 0, c
        killed_and_cut(p, dev, voldisk)
    data = f.read_bytes()
    lost = [i for i in acked if data[i * 8:i * 8 + 8] != b"%07d\n" % i]
    assert not lost, f"{len(lost)} acknowledged writes lost, first {lost[:5]}"


def ended_under_tdax(dev, tmp_path, source, args, *opts):
    """The C program source (with threads), built, run with args under tdax
    run with opts in a session of its own: its status and stdout once it
    ended, or (None, ...) after 30 s (then killed, and all it left)."""
    (tmp_path / "prog.c").write_text(source)
    run("cc", "-O2", "-pthread", "-o", tmp_path / "prog", tmp_path / "prog.c", check=0)
    p = subprocess.Popen([str(TDAX), "run", "--device", dev, *opts, "--", str(tmp_path / "prog"), *args],
                         env={**os.environ, **TDAX_ENV}, stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=30)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        return None, "still running after 30 s"
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # (what a hang left)
        except ProcessLookupError:
            pass


# argv: file, how. The main thread writes and syncs, starts two workers
# (each writes and syncs after 0.2 s, then prints and returns), then ends
# by pthread_exit; "main": no workers, its own end the last.
MAIN_EXITS = r"""
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static int fd;
static void *worker(void *unused) {
	(void)unused;
	usleep(200000);
	for (int i = 0; i < 10; i++)
		if (write(fd, "worker\n", 7) != 7 || fdatasync(fd) != 0)
			return NULL;
	printf("worker done\n"); /* buffered: the process's exit prints it */
	return NULL;
}
int main(int argc, char **argv) {
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	for (int i = 0; i < 10; i++)
		if (write(fd, "main\n", 5) != 5 || fdatasync(fd) != 0)
			return 1;
	pthread_t t;
	for (int i = 0; !strcmp(argv[2], "workers") && i < 2; i++)
		if (pthread_create(&t, NULL, worker, NULL) != 0)
			return 2;
	pthread_exit(NULL);
}
"""


@pytest.mark.parametrize("how", ["main", "workers"])
def test_a_process_whose_last_thread_ends_by_pthread_exit_ends(dev, diskdir, tmp_path, how):
    """glibc ends the process (exit(0)) in the thread whose end leaves no
    other: before 2026-11-28 tdax's write-back thread was the last, and the
    process stayed for good, a zombie that not even SIGTERM ended (that
    thread blocks every signal). The application's last thread now stops
    it first: the process ends with status 0 and its buffered output."""
    f = diskdir / "f"
    rc, out = ended_under_tdax(dev, tmp_path, MAIN_EXITS, [str(f), how])
    workers = 2 if how == "workers" else 0
    assert rc == 0 and out == "worker done\n" * workers, (rc, out)
    assert f.read_bytes() == b"main\n" * 10 + b"worker\n" * 10 * workers


# argv: file. 100 times: a thread appends and syncs in a loop, the main
# thread cancels it (pthread_cancel: it ends at a cancellation point --
# write, fdatasync -- inside a hook), joins it, then writes the same file
# and syncs; "done".
CANCELLED = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static int fd;
static void *writer(void *unused) {
	(void)unused;
	char buf[128];
	memset(buf, 'x', sizeof(buf));
	while (write(fd, buf, sizeof(buf)) == sizeof(buf) && fdatasync(fd) == 0)
		;
	return NULL;
}
int main(int argc, char **argv) {
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	for (int round = 0; round < 100; round++) {
		pthread_t t;
		struct timespec ts = { 0, 1000000 + (round % 7) * 100000 };
		if (pthread_create(&t, NULL, writer, NULL) != 0)
			return 1;
		nanosleep(&ts, NULL);
		if (pthread_cancel(t) != 0 || pthread_join(t, NULL) != 0)
			return 2;
		if (write(fd, "main\n", 5) != 5 || fdatasync(fd) != 0)
			return 3;
	}
	printf("done\n");
	return 0;
}
"""


@pytest.mark.parametrize("mode", ["coherent", "bypass"])
def test_a_thread_cancelled_inside_a_hook_leaves_nothing_held(dev, diskdir, tmp_path, mode):
    """pthread_cancel ends a thread at a cancellation point: before
    2026-11-28 one inside a hook's real write or sync ended it holding the
    file's position lock (or an in-flight count), and the next write of
    the file waited for good. Hooks now hold cancellation off and act on it
    when they are done."""
    f = diskdir / "f"
    rc, out = ended_under_tdax(dev, tmp_path, CANCELLED, [str(f)], "--policy", "always", "--mode", mode)
    assert rc == 0 and out == "done\n", (rc, out)
    data = f.read_bytes()
    assert data.count(b"main\n") == 100 and len(data.replace(b"main\n", b"")) % 128 == 0, len(data)


# argv: directory. 60 rounds, each on a file of its own: a thread appends
# 128 B at a time without syncing (writes tdax has nothing to remember of
# hold no cancellation off: they are cancellation points as without tdax,
# unregistered.h); in odd rounds the main thread syncs the file meanwhile,
# which registers it (policy always) and makes the writer's next write
# join the entry (a look that holds cancellation off). Then it cancels the
# writer, joins it, appends "main" and syncs; "acked" at the end.
CANCELLED_UNREGISTERED = ACKED_C + r"""
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
static int fd;
static void *writer(void *unused) {
	(void)unused;
	char buf[128];
	memset(buf, 'x', sizeof(buf));
	while (write(fd, buf, sizeof(buf)) == sizeof(buf))
		;
	return NULL;
}
int main(int argc, char **argv) {
	(void)argc;
	for (int round = 0; round < 60; round++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/f%d", argv[1], round);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
		must(fd >= 0, "open");
		pthread_t t;
		struct timespec ts = { 0, 300000 + (round % 5) * 100000 };
		must(pthread_create(&t, NULL, writer, NULL) == 0, "pthread_create");
		nanosleep(&ts, NULL);
		if (round % 2)
			must(fdatasync(fd) == 0, "fdatasync while the writer writes");
		nanosleep(&ts, NULL);
		must(pthread_cancel(t) == 0 && pthread_join(t, NULL) == 0, "cancel");
		must(write(fd, "main\n", 5) == 5 && fdatasync(fd) == 0, "main");
		must(close(fd) == 0, "close");
	}
	acked();
	return 0;
}
"""


def test_a_thread_cancelled_in_a_write_tdax_does_not_log_leaves_nothing_held(tmp_path_factory, dev, voldisk):
    """The writes of a file tdax has nothing to remember of are the
    kernel's own cancellation points (since 2026-11-28; before, the hook
    held cancellation off around them), and the look after one that may
    register the file still holds it off: cancelled there or in the look,
    no thread leaves a lock or a count behind (the next round would hang),
    and every round's appends, "main" the last, survive a power cut."""
    progs = build_both(tmp_path_factory, "cancelled", CANCELLED_UNREGISTERED, "-pthread")
    p = acked_under_tdax(dev, progs, "cancelled", "libc", voldisk.mnt)
    killed_and_cut(p, dev, voldisk)
    for i in range(60):
        data = (voldisk.mnt / f"f{i}").read_bytes()
        assert data.endswith(b"main\n") and data.count(b"main\n") == 1, (i, data[-16:])
        assert data[:-5] == b"x" * (len(data) - 5) and (len(data) - 5) % 128 == 0, (i, len(data))
