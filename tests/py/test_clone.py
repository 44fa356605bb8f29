"""A clone of another file's blocks into a file under tdax (FICLONE,
FICLONERANGE: XFS and btrfs share the blocks; ext4 refuses the call): the
kernel changes the file's bytes without a write tdax sees, so the change
counts as a copy into the file (copy_file_range's path) and the next sync
is real -- by the libc hook, through syscall(2), and under --intercept
syscall (the supervisor makes the call). Each case logs two writes with
light syncs on XFS, clones a block of another file over them, syncs, is
killed and loses its disk's cache: the cloned bytes are there, and no
older record is replayed over them."""
import os

import pytest

import crashtest
from conftest import acked_under_tdax, build_both, killed_and_cut

# argv: how, file, source (both made durable before: see the test). The
# file: A then B (8 KiB each, synced: light under policy always); then a
# clone of the source's 4 KiB of C over the file's second block, and
# fdatasync.
CLONE = r"""
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
static char buf[8192];
static void must(int ok, const char *what) { if (!ok) { perror(what); _exit(1); } }
int main(int argc, char **argv) {
	const char *how = argv[1];
	int fd = open(argv[2], O_RDWR), src = open(argv[3], O_RDONLY);
	must(fd >= 0 && src >= 0, "open");
	memset(buf, 'A', sizeof(buf));
	must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fsync(fd) == 0, "A");
	memset(buf, 'B', sizeof(buf));
	must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fsync(fd) == 0, "B");
	struct file_clone_range r = { .src_fd = src, .src_offset = 0, .src_length = 4096, .dest_offset = 4096 };
	if (!strcmp(how, "range"))                  /* libc's ioctl */
		must(ioctl(fd, FICLONERANGE, &r) == 0, "FICLONERANGE");
	else                                        /* syscall(2) */
		must(syscall(SYS_ioctl, fd, FICLONERANGE, &r) == 0, "FICLONERANGE");
	must(fdatasync(fd) == 0, "fdatasync");
	printf("acked\n");
	fflush(stdout);
	pause();
	return 0;
}
"""

EXPECT = b"B" * 4096 + b"C" * 4096


@pytest.fixture
def xfsdisk(tmp_path):
    """XFS on a volatile disk (conftest's voldisk, on another file system)."""
    os.chmod(tmp_path, 0o755)
    disk = crashtest.Disk(tmp_path, "lose-all", 1, fs="xfs")
    yield disk
    disk.detach()


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "clone", CLONE)


@pytest.mark.parametrize("how,intercept", [("range", "libc"), ("syscall", "libc"), ("range", "syscall")])
def test_a_clone_into_a_file_makes_its_sync_real_and_nothing_acknowledged_is_lost(dev, xfsdisk, progs, how,
                                                                                  intercept):
    f, src = xfsdisk.mnt / "f", xfsdisk.mnt / "src"
    # Made durable without tdax: files the program creates under tdax have
    # creation records, whose recovery on XFS is not this test's subject.
    for path, data in ((f, b""), (src, b"C" * 4096)):
        with open(path, "wb") as out:
            out.write(data)
            os.fsync(out.fileno())
    dirfd = os.open(xfsdisk.mnt, os.O_RDONLY)
    os.fsync(dirfd)
    os.close(dirfd)
    p = acked_under_tdax(dev, progs, "clone", intercept, how, f, src)
    assert f.read_bytes() == EXPECT, "the case did not do what it says"
    killed_and_cut(p, dev, xfsdisk)
    assert f.read_bytes() == EXPECT, f"acknowledged data lost ({how}, --intercept {intercept})"
