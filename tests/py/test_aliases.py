"""The C library's other public names of the calls tdax hooks: __write,
__pwrite64, __open, __open64, __close, __dup2, __fcntl, __lseek, __read
(GLIBC_2.2.5 exports a program or a library may call; older code does).
Until 2026-11-28 they went to the C library alone: a write through one
after light syncs, then fdatasync, was lost at a power cut; a descriptor
made by one (an open, a dup) wrote unseen; a managed descriptor closed by
__close and its number given to another file got that file's write logged
for the first and its sync answered for it. The file's first 8 KiB are
written and synced (A, then B: light under policy always), then 50 C at
100 the case's way, then fdatasync through the first descriptor; SIGKILL,
power cut: C is there (and, for __close, only in the second file)."""

import json

import pytest

from conftest import ACKED_C, OVER_AB, SYNCED_AB_C, TDAX, acked_under_tdax, build_both, killed_and_cut, run

# argv: how, file, other file.
ALIASES = ACKED_C + SYNCED_AB_C + r"""
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
ssize_t __write(int, const void *, size_t);
ssize_t __pwrite64(int, const void *, size_t, off_t);
int __open(const char *, int, ...);
int __open64(const char *, int, ...);
int __close(int);
int __dup2(int, int);
int __fcntl(int, int, ...);
off_t __lseek(int, off_t, int);
ssize_t __read(int, void *, size_t);
ssize_t __pread64(int, void *, size_t, off_t);
int __fxstat64(int, int, struct stat *);
int __xstat64(int, const char *, struct stat *);
int __lxstat64(int, const char *, struct stat *);
int __fxstatat64(int, int, const char *, struct stat *, int);
int main(int argc, char **argv) {
	const char *how = argv[1];
	int fd = synced_ab(argv[2]), by = fd;
	usleep(100000);                      /* the write-back thread starts: leases need it */
	for (int i = 0; i < 20; i++)         /* more syncs: promoted in bypass mode */
		must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fdatasync(fd) == 0, "B");
	memset(buf, 'C', 50);
	if (!strcmp(how, "__write")) {
		must(lseek(fd, 100, SEEK_SET) == 100 && __write(fd, buf, 50) == 50, "__write");
	} else if (!strcmp(how, "__lseek") || !strcmp(how, "__read")) { /* bypass mode: promoted by now */
		char got[50];
		if (!strcmp(how, "__lseek")) {
			must(__lseek(fd, 100, SEEK_SET) == 100 && write(fd, buf, 50) == 50, "__lseek");
		} else {
			must(pwrite(fd, buf, 50, 100) == 50 && lseek(fd, 100, SEEK_SET) == 100, "C");
			must(__read(fd, got, 50) == 50 && !memcmp(got, buf, 50), "__read: not what was written");
		}
	} else if (!strcmp(how, "__pread64")) {
		char got[50];
		must(pwrite(fd, buf, 50, 100) == 50, "C");
		must(__pread64(fd, got, 50, 100) == 50 && !memcmp(got, buf, 50), "__pread64: not what was written");
	} else if (!strncmp(how, "__", 2) && strstr(how, "stat")) { /* the size a write at the end made */
		struct stat st;
		must(pwrite(fd, buf, 50, 8192) == 50, "C");
		int r = !strcmp(how, "__fxstat64")   ? __fxstat64(1, fd, &st)
			: !strcmp(how, "__xstat64")  ? __xstat64(1, argv[2], &st)
			: !strcmp(how, "__lxstat64") ? __lxstat64(1, argv[2], &st)
						     : __fxstatat64(1, AT_FDCWD, argv[2], &st, 0);
		must(r == 0 && st.st_size == 8192 + 50, "the size the old stat ABI gives");
	} else if (!strcmp(how, "__pwrite64")) {
		must(__pwrite64(fd, buf, 50, 100) == 50, "__pwrite64");
	} else if (!strcmp(how, "__close")) {    /* the number goes to the other file */
		must(__close(fd) == 0 && open(argv[3], O_RDWR | O_CREAT, 0644) == fd, "__close");
		must(pwrite(fd, buf, 50, 100) == 50, "C");
	} else {
		if (!strcmp(how, "__open"))
			by = __open(argv[2], O_RDWR);
		else if (!strcmp(how, "__open64"))
			by = __open64(argv[2], O_RDWR);
		else if (!strcmp(how, "__dup2"))
			by = __dup2(fd, 40);
		else
			by = __fcntl(fd, F_DUPFD_CLOEXEC, 40);
		must(by >= 0 && by != fd, how);
		must(pwrite(by, buf, 50, 100) == 50, "C");
	}
	must(fdatasync(fd) == 0, "fdatasync");
	acked();
}
"""


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "aliases", ALIASES)


@pytest.mark.parametrize("how,mode", [("__write", "coherent"), ("__pwrite64", "coherent"), ("__open", "coherent"),
                                      ("__open64", "coherent"), ("__dup2", "coherent"), ("__fcntl", "coherent"),
                                      ("__close", "coherent"), ("__close", "bypass"), ("__write", "bypass"),
                                      ("__lseek", "bypass"), ("__read", "bypass"), ("__pread64", "bypass"),
                                      ("__fxstat64", "bypass"), ("__xstat64", "bypass"), ("__lxstat64", "bypass"),
                                      ("__fxstatat64", "bypass")])
def test_the_c_librarys_other_names_are_hooked_too(dev, voldisk, progs, how, mode):
    f, other = voldisk.mnt / "f", voldisk.mnt / "other"
    p = acked_under_tdax(dev, progs, "aliases", "libc", how, f, other, mode=mode)
    if mode == "bypass" and how != "__close":  # (looked at before anything opens it: a demotion)
        st = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
        assert [x["mode"] for x in st["files"] if x["path"] == str(f)] == ["bypass"], st["files"]
    want = {f: OVER_AB}
    if how == "__close":
        want = {f: b"B" * 8192, other: b"\0" * 100 + b"C" * 50}
    elif "stat" in how:
        want = {f: b"B" * 8192 + b"C" * 50}
    assert {path: path.read_bytes() for path in want} == want, "the case did not do what it says"
    killed_and_cut(p, dev, voldisk)
    assert {path: path.read_bytes() for path in want} == want, f"acknowledged data lost or misplaced ({how}, {mode} mode)"
