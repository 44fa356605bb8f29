"""A clone of another file's blocks into a file under tdax (FICLONE,
FICLONERANGE: XFS and btrfs share the blocks; ext4 refuses the call): the
kernel changes the file's bytes without a write tdax sees, so the change
counts as a copy into the file (copy_file_range's path) and the next sync
is real -- by the libc hook, through syscall(2), and under --intercept
syscall (the supervisor makes the call). Each case logs two writes with
light syncs on XFS, clones a block of another file over them, syncs, is
killed and loses its disk's cache: the cloned bytes are there, and no
older record is replayed over them. XFS's own ioctls that change bytes
(zero range, unreserve space, exchange range) the same way."""
import json
import os

import pytest

import crashtest
from conftest import ACKED_C, TDAX, acked_under_tdax, build_both, killed_and_cut, made_durable, run

# argv: how, file, source (both made durable before: see the test). The
# file: A then B (8 KiB each, synced: light under policy always); then a
# clone of the source's 4 KiB of C over the file's second block, and
# fdatasync.
CLONE = ACKED_C + r"""
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
static char buf[8192];
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
	acked();
}
"""

EXPECT = b"B" * 4096 + b"C" * 4096


@pytest.fixture
def xfsdisk(tmp_path):
    """XFS on a volatile disk (conftest's voldisk, on another file system)."""
    os.chmod(tmp_path, 0o755)
    disk = crashtest.Disk(tmp_path, "lose-all", 1, fs="xfs")
    yield disk
    disk.destroy()


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "clone", CLONE)


@pytest.mark.parametrize("how,intercept", [("range", "libc"), ("syscall", "libc"), ("range", "syscall")])
def test_a_clone_into_a_file_makes_its_sync_real_and_nothing_acknowledged_is_lost(dev, xfsdisk, progs, how,
                                                                                  intercept):
    f, src = xfsdisk.mnt / "f", xfsdisk.mnt / "src"
    # Made durable without tdax: files the program creates under tdax have
    # creation records, whose recovery on XFS is not this test's subject.
    made_durable(xfsdisk.mnt, {f: b"", src: b"C" * 4096})
    p = acked_under_tdax(dev, progs, "clone", intercept, how, f, src)
    assert f.read_bytes() == EXPECT, "the case did not do what it says"
    killed_and_cut(p, dev, xfsdisk)
    assert f.read_bytes() == EXPECT, f"acknowledged data lost ({how}, --intercept {intercept})"


# argv: how (zero, punch, exchange; syscall-zero: through syscall(2)),
# file, other (made durable before). The file: A then B (8 KiB each,
# synced: light under policy always); then an XFS ioctl that changes its
# first 4 KiB without a write -- zeroes them, punches them out, or swaps
# them with the other file's -- and fdatasync.
FS_IOCTL = ACKED_C + r"""
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
struct flock64x { int16_t l_type, l_whence; int64_t l_start, l_len; int32_t l_sysid; uint32_t l_pid; int32_t l_pad[4]; };
struct exch { int32_t file1_fd; uint32_t pad; uint64_t file1_offset, file2_offset, length, flags; };
#define ZERO_RANGE _IOW('X', 57, struct flock64x)
#define UNRESVSP64 _IOW('X', 43, struct flock64x)
#define EXCHANGE_RANGE _IOW('X', 129, struct exch)
static char buf[8192];
int main(int argc, char **argv) {
	(void)argc;
	const char *how = argv[1];
	int fd = open(argv[2], O_RDWR), other = open(argv[3], O_RDWR);
	must(fd >= 0 && other >= 0, "open");
	memset(buf, 'A', sizeof(buf));
	must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fsync(fd) == 0, "A");
	memset(buf, 'B', sizeof(buf));
	must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fsync(fd) == 0, "B");
	struct flock64x fl = { .l_whence = SEEK_SET, .l_start = 0, .l_len = 4096 };
	struct exch x = { .file1_fd = other, .length = 4096 };
	if (!strcmp(how, "zero"))
		must(ioctl(fd, ZERO_RANGE, &fl) == 0, "XFS_IOC_ZERO_RANGE");
	else if (!strcmp(how, "syscall-zero"))
		must(syscall(SYS_ioctl, fd, ZERO_RANGE, &fl) == 0, "XFS_IOC_ZERO_RANGE");
	else if (!strcmp(how, "punch"))
		must(ioctl(fd, UNRESVSP64, &fl) == 0, "XFS_IOC_UNRESVSP64");
	else /* (EOPNOTSUPP where mkfs.xfs did not enable it: before 6.10) */
		ioctl(fd, EXCHANGE_RANGE, &x);
	must(fdatasync(fd) == 0 && fdatasync(other) == 0, "fdatasync");
	acked();
}
"""


@pytest.fixture(scope="module")
def ioctl_progs(tmp_path_factory):
    return build_both(tmp_path_factory, "fsioctl", FS_IOCTL)


@pytest.mark.parametrize("how,intercept", [("zero", "libc"), ("syscall-zero", "libc"), ("punch", "libc"),
                                           ("zero", "syscall"), ("punch", "syscall"),
                                           ("exchange", "libc"), ("exchange", "syscall")])
def test_an_xfs_ioctl_that_changes_bytes_takes_the_file_off_the_log(dev, xfsdisk, ioctl_progs, how, intercept):
    """XFS's zero range, unreserve space (a punch) and exchange range change
    a file's bytes without a write tdax sees: the files they change are
    checkpointed first and left to the kernel, so no record written before
    is replayed over what the call made (before 2026-11-27: the file's
    first 4 KiB came back as B after the cut). An exchange takes both files
    off the log, whether this XFS can make it or not (mkfs.xfs before 6.10
    does not enable it)."""
    f, other = xfsdisk.mnt / "f", xfsdisk.mnt / "other"
    made_durable(xfsdisk.mnt, {f: b"", other: b"C" * 4096})
    p = acked_under_tdax(dev, ioctl_progs, "fsioctl", intercept, how, f, other)
    expect, expect_other = f.read_bytes(), other.read_bytes()
    if how == "exchange":
        assert (expect[:4096], expect_other) in ((b"C" * 4096, b"B" * 4096), (b"B" * 4096, b"C" * 4096))
        st = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
        modes = {x["path"]: (x["mode"], x.get("kernel_because")) for x in st["files"]}
        why = "copy" if intercept == "libc" else "mmap"  # (the supervisor's way: interpose_map.c)
        assert modes.get(str(f)) == modes.get(str(other)) == ("kernel", why), modes
    else:
        assert expect == b"\0" * 4096 + b"B" * 4096, "the case did not do what it says"
    killed_and_cut(p, dev, xfsdisk)
    assert (f.read_bytes(), other.read_bytes()) == (expect, expect_other), \
        f"acknowledged data lost ({how}, --intercept {intercept})"
