"""O_APPEND is the open file's, not the descriptor's: set with F_SETFL
through one descriptor (a dup of the one that writes, a forked child's
copy, or syscall(2)), it moves every pwrite of the open file to its end,
where Linux ignores the offset. tdax must log the write where the kernel
put it. Under --intercept syscall the supervisor, which keeps the open
file's flags per descriptor it borrowed, did not see a child's F_SETFL:
it logged the pwrite at its offset and, its lease held, answered the sync
-- after a power cut the appended bytes were gone and the offset's
overwritten (until 2026-11-27; the filter now traps F_SETFL on a placed
descriptor, and the hooks take the flags up for every descriptor of the
file). Killed after the acknowledged sync, power cut: the file is as the
kernel made it."""

import pytest

from conftest import ACKED_C, acked_under_tdax, build_both, killed_and_cut

# argv: how, file. A (256 bytes) written and synced three times (a lease
# under tdax); then O_APPEND set (how), and B (128 bytes) by pwrite at 0.
APPEND = ACKED_C + r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
	char a[256], b[128];
	memset(a, 'A', sizeof(a));
	memset(b, 'B', sizeof(b));
	int fd = open(argv[2], O_RDWR | O_CREAT, 0644);
	must(fd >= 0, "open");
	for (int i = 0; i < 3; i++)
		must(pwrite(fd, a, 256, 0) == 256 && fdatasync(fd) == 0, "A");
	int other = fd;
	if (!strcmp(argv[1], "dup")) {
		other = dup(fd);
		must(fcntl(other, F_SETFL, O_APPEND) == 0, "F_SETFL");
	} else if (!strcmp(argv[1], "fork")) {
		pid_t c = fork();
		if (c == 0) _exit(fcntl(fd, F_SETFL, O_APPEND) != 0);
		int st; must(waitpid(c, &st, 0) == c && WIFEXITED(st) && !WEXITSTATUS(st), "child");
	} else if (!strcmp(argv[1], "raw")) {
		must(syscall(SYS_fcntl, fd, F_SETFL, O_APPEND) == 0, "F_SETFL");
	}
	/* O_APPEND on the open file: Linux ignores pwrite's offset, B lands at the end */
	must(pwrite(fd, b, 128, 0) == 128 && fdatasync(fd) == 0, "B");
	acked();
}
"""


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "append", APPEND)


@pytest.mark.parametrize("how,intercept", [("dup", "libc"), ("fork", "libc"), ("raw", "libc"), ("dup", "syscall"),
                                           ("fork", "syscall"), ("raw", "syscall")])
def test_a_pwrite_after_o_append_is_set_elsewhere_is_logged_where_it_landed(dev, voldisk, progs, how, intercept):
    f = voldisk.mnt / "f"
    p = acked_under_tdax(dev, progs, "append", intercept, how, f)
    want = b"A" * 256 + b"B" * 128
    assert f.read_bytes() == want, "the case did not do what it says"
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == want, f"acknowledged data lost or misplaced ({how}, --intercept {intercept})"
