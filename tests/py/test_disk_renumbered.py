"""A disk that comes back under another device number after a power cut
(loop devices, NVMe enumeration, device-mapper: the number is the kernel's
choice at each boot): recovery must still know the files its records
belong to. A program writes a file under tdax with light syncs (a file
made durable before, or one it creates), is killed and loses its disk's
cache; the disk is attached again while its old loop device number is
taken (crashtest.Disk.reboot), so that its file system comes back under
another one. The file's acknowledged bytes are replayed, on ext4 and on
XFS (whose f_fsid is the device number, not its UUID)."""
import json
import os

import pytest

import crashtest
from conftest import ACKED_C, TDAX, acked_under_tdax, build_both, made_durable, run

# argv: file, "create" or "open". Writes A then B over the file (8 KiB
# each, synced: light under policy always).
WRITER = ACKED_C + r"""
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static char buf[8192];
int main(int argc, char **argv) {
	(void)argc;
	int fd = open(argv[1], strcmp(argv[2], "create") ? O_RDWR : O_RDWR | O_CREAT | O_EXCL, 0644);
	must(fd >= 0, "open");
	memset(buf, 'A', sizeof(buf));
	must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fdatasync(fd) == 0, "A");
	memset(buf, 'B', sizeof(buf));
	must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fdatasync(fd) == 0, "B");
	acked();
}
"""


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "writer", WRITER)


@pytest.mark.parametrize("fs", ["ext4", "xfs"])
@pytest.mark.parametrize("how,intercept", [("open", "libc"), ("open", "syscall"), ("create", "libc")])
def test_a_disk_back_under_another_device_number_keeps_its_files_known(dev, tmp_path, progs, fs, how, intercept):
    os.chmod(tmp_path, 0o755)
    disk = crashtest.Disk(tmp_path, "lose-all", 1, fs=fs)
    try:
        f = disk.mnt / "f"
        if how == "open":  # its creation durable: recovery finds it where it was
            made_durable(disk.mnt, {f: b""})
        p = acked_under_tdax(dev, progs, "writer", intercept, f, how)
        assert f.read_bytes() == b"B" * 8192, "the case did not do what it says"
        before = os.stat(disk.mnt).st_dev
        os.killpg(p.pid, crashtest.signal.SIGKILL)
        p.wait()
        disk.cut()
        disk.reboot()  # (its old loop device held meanwhile)
        assert os.stat(disk.mnt).st_dev != before, "the disk came back under its old number"
        r = run(TDAX, "recover", "--device", dev, "--power-failure", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        outcomes = {e["path"]: e["outcome"] for e in json.loads(r.stdout)["files"]}
        assert outcomes.get(str(f)) == "recovered", outcomes
        assert f.read_bytes() == b"B" * 8192, f"acknowledged data lost ({fs}, {how}, --intercept {intercept})"
    finally:
        disk.destroy()
