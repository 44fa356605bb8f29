"""A thread with a descriptor table of its own (unshare(CLONE_FILES),
close_range with CLOSE_RANGE_UNSHARE, or clone(2) with CLONE_VM and
without CLONE_FILES): the same number now names
different files in different threads of one memory. tdax keeps one table
per memory (libc hooks), the supervisor one per process (--intercept
syscall): a write through the number would be logged for the wrong file,
or made into it. So the process manages nothing from then on, and nothing
it acknowledged is lost or lands in another file.

The case: the main thread writes X (light syncs); the other gets a table
of its own, puts Z at X's number there (dup2), writes and syncs Z through
it; the main thread then writes X in place through its number and syncs.
Killed, power cut: X has both writes, Z only its own."""

import pytest

from conftest import ACKED_C, acked_under_tdax, build_both, killed_and_cut

# argv: how, X, Z. how: unshare (libc), unshare-syscall (syscall(2)),
# close-range (close_range with CLOSE_RANGE_UNSHARE),
# clone (libc's clone: CLONE_VM, a process of its own), thread (clone with
# CLONE_VM and CLONE_THREAD, no CLONE_FILES).
FDTABLES = ACKED_C + r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
static const char *how, *zpath;
static int x;
static atomic_int done;
static int other(void *arg) {           /* its own table: X's number becomes Z's */
	(void)arg;
	if (!strcmp(how, "unshare"))
		must(unshare(CLONE_FILES) == 0, "unshare");
	else if (!strcmp(how, "unshare-syscall"))
		must(syscall(SYS_unshare, CLONE_FILES) == 0, "unshare");
	else if (!strcmp(how, "close-range"))   /* a copy of the table, X's number closed in it */
		must(close_range(x, x, CLOSE_RANGE_UNSHARE) == 0, "close_range");
	int z = open(zpath, O_RDWR | O_CREAT, 0644);
	must(z >= 0 && dup2(z, x) == x, "Z at X's number");
	char zb[64];
	memset(zb, 'Z', sizeof(zb));
	must(pwrite(x, zb, sizeof(zb), 0) == sizeof(zb) && fdatasync(x) == 0, "Z");
	atomic_store(&done, 1);
	return 0;
}
static void *thread(void *arg) { return (void *)(long)other(arg); }
int main(int argc, char **argv) {
	how = argv[1];
	zpath = argv[3];
	char a[256], b[128];
	memset(a, 'A', sizeof(a));
	memset(b, 'B', sizeof(b));
	x = open(argv[2], O_RDWR | O_CREAT, 0644);
	must(x >= 0, "open");
	for (int i = 0; i < 3; i++)
		must(pwrite(x, a, 256, 0) == 256 && fdatasync(x) == 0, "A");
	/* (the test build's hooks take ~75 KiB of stack in the child, the product's ~7) */
	static char stack[1 << 20] __attribute__((aligned(16)));
	if (!strcmp(how, "clone")) {
		pid_t t = clone(other, stack + sizeof(stack), CLONE_VM | SIGCHLD, NULL);
		int st;
		must(t > 0 && waitpid(t, &st, 0) == t && WIFEXITED(st) && WEXITSTATUS(st) == 0, "clone");
	} else if (!strcmp(how, "thread")) {
		must(clone(other, stack + sizeof(stack), CLONE_VM | CLONE_THREAD | CLONE_SIGHAND | CLONE_SYSVSEM,
			   NULL) > 0, "clone");
		while (!atomic_load(&done))
			usleep(1000);
	} else {
		pthread_t t;
		void *r;
		must(pthread_create(&t, NULL, thread, NULL) == 0 && pthread_join(t, &r) == 0 && !r, "thread");
	}
	must(pwrite(x, b, 128, 128) == 128 && fdatasync(x) == 0, "B");
	acked();
}
"""


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "fdtables", FDTABLES, "-pthread")


@pytest.mark.parametrize("how,intercept", [("unshare", "libc"), ("unshare-syscall", "libc"), ("close-range", "libc"),
                                           ("clone", "libc"), ("thread", "libc"), ("unshare", "syscall"),
                                           ("close-range", "syscall"), ("clone", "syscall"), ("thread", "syscall")])
def test_a_thread_with_a_table_of_its_own_makes_the_process_manage_nothing(dev, voldisk, progs, how, intercept):
    x, z = voldisk.mnt / "x", voldisk.mnt / "z"
    p = acked_under_tdax(dev, progs, "fdtables", intercept, how, x, z)
    case = f"{how}, --intercept {intercept}"
    assert x.read_bytes() == b"A" * 128 + b"B" * 128, f"a write made into another file ({case})"
    assert z.read_bytes() == b"Z" * 64, f"another file's bytes landed in Z ({case})"
    killed_and_cut(p, dev, voldisk)
    assert x.read_bytes() == b"A" * 128 + b"B" * 128, f"acknowledged data lost ({case})"
    assert z.read_bytes() == b"Z" * 64, f"another file's bytes landed in Z after recovery ({case})"
