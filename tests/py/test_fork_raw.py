"""Forks that run none of the pthread_atfork handlers, tdax's among them --
those give a child of fork a log segment of its own, and tell the parent
its leases are shared now: _Fork (glibc 2.34), clone(2) without CLONE_VM,
and the system call made by syscall(2) (fork, clone, clone3). Until
2026-11-28 such a child appended its records into its parent's segment
(the same memory, copied), where the parent's next record wrote over
them, and the parent's lease still vouched for its file: the child's
write, then the parent's sync, was lost at a power cut. The file's first
8 KiB are written and synced (A, then B: light under policy always); a
child of _Fork writes 50 C at 100 through the shared descriptor and
exits; the parent writes 50 D at 200, then fdatasync; SIGKILL, power cut:
both are there."""

import pytest

from conftest import ACKED_C, SYNCED_AB_C, acked_under_tdax, build_both, killed_and_cut

# argv: how, file.
RAW_FORK = ACKED_C + SYNCED_AB_C + r"""
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
pid_t _Fork(void);
static int fd;
static int child(void *unused) {
	(void)unused;
	memset(buf, 'C', 50);
	return pwrite(fd, buf, 50, 100) == 50 ? 0 : 1;
}
static char stack[64 * 1024] __attribute__((aligned(16)));
static pid_t forked(const char *how) {
	if (!strcmp(how, "_Fork"))
		return _Fork();
	if (!strcmp(how, "clone"))             /* the child runs child() itself */
		return clone(child, stack + sizeof(stack), SIGCHLD, NULL);
	if (!strcmp(how, "syscall-fork"))
		return (pid_t)syscall(SYS_fork);
	if (!strcmp(how, "syscall-clone"))
		return (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (!strcmp(how, "syscall-clone3")) {
		struct clone_args args = { .exit_signal = SIGCHLD };
		return (pid_t)syscall(SYS_clone3, &args, sizeof(args));
	}
	return fork();
}
int main(int argc, char **argv) {
	fd = synced_ab(argv[2]);
	usleep(100000);                      /* the write-back thread starts: leases need it */
	must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fdatasync(fd) == 0, "B again");
	pid_t pid = forked(argv[1]);
	must(pid >= 0, "fork");
	if (pid == 0)
		_exit(child(NULL));
	int status;
	must(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "child");
	memset(buf, 'D', 50);
	must(pwrite(fd, buf, 50, 200) == 50 && fdatasync(fd) == 0, "D");
	acked();
}
"""

WANT = b"B" * 100 + b"C" * 50 + b"B" * 50 + b"D" * 50 + b"B" * (8192 - 250)




@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "rawfork", RAW_FORK)


@pytest.mark.parametrize("how", ["fork", "_Fork", "clone", "syscall-fork", "syscall-clone", "syscall-clone3"])
def test_a_child_of_a_fork_without_handlers_loses_nothing(dev, voldisk, progs, how):
    f = voldisk.mnt / "f"
    p = acked_under_tdax(dev, progs, "rawfork", "libc", how, f)
    assert f.read_bytes() == WANT, "the case did not do what it says"
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == WANT, f"acknowledged data lost ({how})"
