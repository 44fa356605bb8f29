"""io_uring under tdax (issue 23): a ring's submissions name descriptors
tdax never sees, so a process that sets one up goes blind -- its files are
checkpointed and stay on the kernel's sync path -- through liburing, through
syscall(2), and under --intercept syscall, and one set up before the
process has attached to the device (so before it manages any file). Each case logs two writes with
light syncs, sets a ring up, writes over them through the ring, syncs (by
libc or by the ring), is killed and loses its disk's cache: the ring's
write is there, and no older record is replayed over it."""

import os
from pathlib import Path

import pytest

from conftest import ACKED_C, OVER_AB, SYNCED_AB_C, acked_under_tdax, build_both, info, killed_and_cut, tdax_run

# argv: how, file. A and B (8 KiB each, synced: light under policy always),
# then C (50 bytes at 100) through a ring, then a sync.
URING = ACKED_C + SYNCED_AB_C + r"""
#include <liburing.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
	const char *how = argv[1];
	struct io_uring ring = { 0 };
	struct io_uring_params p = { 0 };
	if (!strcmp(how, "before"))                   /* before the process opens a file for writing */
		must(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	int fd = synced_ab(argv[2]);
	if (!strcmp(how, "queue-init")) {             /* liburing's usual set-up */
		must(io_uring_queue_init(8, &ring, 0) == 0, "io_uring_queue_init");
	} else if (strcmp(how, "before")) {
		int r = !strcmp(how, "syscall")           /* libc's syscall(2) */
			? (int)syscall(SYS_io_uring_setup, 8, &p)
			: io_uring_setup(8, &p);           /* liburing's own system call */
		must(r >= 0 && io_uring_queue_mmap(r, &p, &ring) == 0, "io_uring_setup");
		/* liburing 2.3's queue_mmap leaves unset what its queue_init
		 * sets: the masks it caches, and the index array */
		ring.sq.ring_mask = *ring.sq.kring_mask;
		ring.sq.ring_entries = *ring.sq.kring_entries;
		ring.cq.ring_mask = *ring.cq.kring_mask;
		ring.cq.ring_entries = *ring.cq.kring_entries;
		for (unsigned i = 0; i < ring.sq.ring_entries; i++)
			ring.sq.array[i] = i;
	}
	memset(buf, 'C', 50);
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_write(sqe, fd, buf, 50, 100);
	struct io_uring_cqe *cqe;
	must(io_uring_submit(&ring) == 1 && io_uring_wait_cqe(&ring, &cqe) == 0 && cqe->res == 50, "C");
	io_uring_cqe_seen(&ring, cqe);
	if (!strcmp(how, "setup")) {                  /* the sync through the ring too */
		sqe = io_uring_get_sqe(&ring);
		io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
		must(io_uring_submit(&ring) == 1 && io_uring_wait_cqe(&ring, &cqe) == 0 && cqe->res == 0,
		     "ring fsync");
	} else {
		must(fdatasync(fd) == 0, "fdatasync");
	}
	acked();
	return 0;
}
"""

EXPECT = OVER_AB


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "uring", URING, "-luring")


@pytest.mark.parametrize("how,intercept", [("queue-init", "libc"), ("setup", "libc"), ("syscall", "libc"), ("before", "libc"),
                                           ("setup", "syscall"), ("queue-init", "syscall"), ("before", "syscall")])
def test_a_ring_makes_the_process_blind_and_nothing_acknowledged_is_lost(dev, voldisk, progs, how,
                                                                          intercept):
    f = voldisk.mnt / "f"
    p = acked_under_tdax(dev, progs, "uring", intercept, how, f)
    assert f.read_bytes() == EXPECT, "the case did not do what it says"
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == EXPECT, f"acknowledged data lost ({how}, --intercept {intercept})"


def test_a_ring_set_up_while_another_thread_manages_a_file_makes_that_file_blind_too(dev, diskdir):
    """One thread opens a file (write-only and new: registered at once under
    policy always) and is held between its look at the blind flag and its
    entry's store (TDAX_TEST_MANAGE_PAUSE_IF) while another sets a ring up.
    The ring's scan of the entries cannot see the file yet; the opener's
    second look after its store must: the file's syncs are real. (Before,
    they were lightweight: written through the ring, lost at a power cut.)"""
    path, flag = diskdir / "f", Path(f"/dev/shm/tdax-hold-{os.getpid()}")  # (tmpfs: not a file tdax manages)
    code = r"""
import ctypes, os, sys, threading, time
path, flag = sys.argv[1], sys.argv[2]
first = os.open(path + ".first", os.O_WRONLY | os.O_CREAT, 0o644)  # the process attaches
os.write(first, b"a"); os.fsync(first)
open(flag, "w").close()
out = {}
t = threading.Thread(target=lambda: out.setdefault("fd", os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)))
t.start()
time.sleep(0.3)                                    # the open is held in its window
params = ctypes.create_string_buffer(120)
assert ctypes.CDLL(None).syscall(425, 8, params) >= 0   # io_uring_setup: the process goes blind
os.unlink(flag)
t.join()
for i in range(3):
    os.write(out["fd"], b"x" * 100)
    os.fdatasync(out["fd"])
"""
    try:
        r = tdax_run(dev, code, path, flag, env={"TDAX_TEST_MANAGE_PAUSE_IF": str(flag)})
    finally:
        flag.unlink(missing_ok=True)
    assert r.returncode == 0, r.stderr
    c = info(dev)["counters"]
    assert c["real_syncs"] >= 3 and c["light_syncs"] <= 1, c
