"""A second open of a managed file that no open hook saw until 2026-11-27:
openat2 through syscall(2), open_by_handle_at (libc's or syscall(2)'s; a
static program's under --intercept syscall, which the filter did not
trap), and freopen (a stdio stream opened inside the C library); and a
plain open beside them. POSIX's fdatasync covers every write of the file,
through any descriptor: the write through the second open, made in place
(the size guard cannot see it), must be durable once a sync through the
first descriptor returns. Killed after that sync, power cut: both writes
are there."""

import pytest

from conftest import ACKED_C, acked_under_tdax, build_both, killed_and_cut

# argv: how, file. A: 256 bytes written and synced (light under policy
# always); B: 128 bytes over its second half through the second open;
# then fdatasync through the first descriptor.
REOPEN = ACKED_C + r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
static char a[256], b[128];
int main(int argc, char **argv) {
	memset(a, 'A', sizeof(a));
	memset(b, 'B', sizeof(b));
	const char *how = argv[1];
	int fd = open(argv[2], O_RDWR | O_CREAT, 0644);
	must(fd >= 0, "open");
	must(pwrite(fd, a, 256, 0) == 256 && fdatasync(fd) == 0, "A");
	if (!strcmp(how, "freopen")) {
		FILE *f = freopen(argv[2], "r+", stdin);
		must(f && fseek(f, 128, SEEK_SET) == 0 && fwrite(b, 1, 128, f) == 128 && fflush(f) == 0, "B");
	} else {
		int by = -1;
		if (!strcmp(how, "open")) {
			by = open(argv[2], O_RDWR);
		} else if (!strcmp(how, "openat2")) {
			struct open_how oh = { .flags = O_RDWR };
			by = (int)syscall(SYS_openat2, AT_FDCWD, argv[2], &oh, sizeof(oh));
		} else {                                  /* by-handle, by-handle-syscall */
			struct file_handle *h = malloc(sizeof(*h) + MAX_HANDLE_SZ);
			int mount_id;
			h->handle_bytes = MAX_HANDLE_SZ;
			must(name_to_handle_at(AT_FDCWD, argv[2], h, &mount_id, 0) == 0, "name_to_handle_at");
			int mfd = open(argv[3], O_RDONLY | O_DIRECTORY);
			by = !strcmp(how, "by-handle") ? open_by_handle_at(mfd, h, O_RDWR)
						       : (int)syscall(SYS_open_by_handle_at, mfd, h, O_RDWR);
		}
		must(by >= 0, how);
		must(pwrite(by, b, 128, 128) == 128, "B");
	}
	must(fdatasync(fd) == 0, "sync");
	acked();
}
"""


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "reopen", REOPEN)


@pytest.mark.parametrize("how,intercept", [("open", "libc"), ("openat2", "libc"), ("by-handle", "libc"),
                                           ("by-handle-syscall", "libc"), ("freopen", "libc"),
                                           ("open", "syscall"), ("by-handle", "syscall"), ("freopen", "syscall")])
def test_a_write_through_another_open_is_covered_by_the_next_sync(dev, voldisk, progs, how, intercept):
    f = voldisk.mnt / "f"
    p = acked_under_tdax(dev, progs, "reopen", intercept, how, f, voldisk.mnt)
    assert f.read_bytes() == b"A" * 128 + b"B" * 128, "the case did not do what it says"
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == b"A" * 128 + b"B" * 128, f"acknowledged data lost ({how}, --intercept {intercept})"
