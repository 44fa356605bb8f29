"""_Fork (glibc 2.34): a fork that runs none of the pthread_atfork
handlers, tdax's among them -- those give a child of fork a log segment
of its own, and tell the parent its leases are shared now. Until
2026-11-28 a child made by _Fork appended its records into its parent's
segment (the same memory, copied), where the parent's next record wrote
over them, and the parent's lease still vouched for its file: the child's
write, then the parent's sync, was lost at a power cut. The file's first
8 KiB are written and synced (A, then B: light under policy always); a
child of _Fork writes 50 C at 100 through the shared descriptor and
exits; the parent writes 50 D at 200, then fdatasync; SIGKILL, power cut:
both are there."""

from conftest import ACKED_C, SYNCED_AB_C, acked_under_tdax, build_both, killed_and_cut

# argv: how (fork or _Fork), file.
RAW_FORK = ACKED_C + SYNCED_AB_C + r"""
#include <string.h>
#include <sys/wait.h>
pid_t _Fork(void);
int main(int argc, char **argv) {
	int fd = synced_ab(argv[2]);
	usleep(100000);                      /* the write-back thread starts: leases need it */
	must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fdatasync(fd) == 0, "B again");
	pid_t pid = !strcmp(argv[1], "_Fork") ? _Fork() : fork();
	must(pid >= 0, "fork");
	if (pid == 0) {
		memset(buf, 'C', 50);
		_exit(pwrite(fd, buf, 50, 100) == 50 ? 0 : 1);
	}
	int status;
	must(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "child");
	memset(buf, 'D', 50);
	must(pwrite(fd, buf, 50, 200) == 50 && fdatasync(fd) == 0, "D");
	acked();
}
"""

WANT = b"B" * 100 + b"C" * 50 + b"B" * 50 + b"D" * 50 + b"B" * (8192 - 250)


import pytest  # noqa: E402


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "rawfork", RAW_FORK)


@pytest.mark.parametrize("how", ["fork", "_Fork"])
def test_a_child_of_a_fork_without_handlers_loses_nothing(dev, voldisk, progs, how):
    f = voldisk.mnt / "f"
    p = acked_under_tdax(dev, progs, "rawfork", "libc", how, f)
    assert f.read_bytes() == WANT, "the case did not do what it says"
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == WANT, f"acknowledged data lost ({how})"
