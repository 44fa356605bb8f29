"""Asynchronous writes under tdax: POSIX aio (aio_write, lio_listio) and
the kernel's AIO (libaio's io_submit, and io_submit as a raw system call:
syscall(2), or a static program under --intercept syscall). tdax does not
see such a write complete, so the file it goes to must get real syncs from
then on (docs/durability.md). Each case logs two writes with light syncs,
writes over them asynchronously, syncs with fdatasync, is killed and loses
its disk's cache: the asynchronous write is there, and no older record is
replayed over it."""

import pytest

from conftest import ACKED_C, OVER_AB, SYNCED_AB_C, acked_under_tdax, build_both, killed_and_cut

# argv: how, file. A and B (8 KiB each, synced: light under policy always),
# then C (50 bytes at 100) written asynchronously, then fdatasync.
AIO = ACKED_C + SYNCED_AB_C + r"""
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
int main(int argc, char **argv) {
	const char *how = argv[1];
	int fd = synced_ab(argv[2]);
	memset(buf, 'C', 50);
	if (!strcmp(how, "posix") || !strcmp(how, "lio")) {
		struct aiocb cb = { .aio_fildes = fd, .aio_buf = buf, .aio_nbytes = 50, .aio_offset = 100,
				    .aio_lio_opcode = LIO_WRITE };
		struct aiocb *list[1] = { &cb };
		if (!strcmp(how, "posix"))
			must(aio_write(&cb) == 0, "aio_write");
		else
			must(lio_listio(LIO_WAIT, list, 1, NULL) == 0, "lio_listio");
		const struct aiocb *wait[1] = { &cb };
		while (aio_error(&cb) == EINPROGRESS)
			aio_suspend(wait, 1, NULL);
		must(aio_return(&cb) == 50, "C");
	} else {
		io_context_t ctx = 0;
		struct iocb cb, *list[1] = { &cb };
		struct io_event ev;
		struct iovec v = { buf, 50 };
		if (!strcmp(how, "libaio")) {          /* libaio's calls */
			io_prep_pwrite(&cb, fd, buf, 50, 100);
			must(io_setup(8, &ctx) == 0 && io_submit(ctx, 1, list) == 1 &&
			     io_getevents(ctx, 1, 1, &ev, NULL) == 1 && ev.res == 50, "C");
		} else {                               /* raw system calls, a vector */
			io_prep_pwritev(&cb, fd, &v, 1, 100);
			must(syscall(SYS_io_setup, 8, &ctx) == 0 && syscall(SYS_io_submit, ctx, 1, list) == 1 &&
			     syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL) == 1 && ev.res == 50, "C");
		}
	}
	must(fdatasync(fd) == 0, "fdatasync");
	acked();
}
"""

EXPECT = OVER_AB


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "aio", AIO, "-laio")


@pytest.mark.parametrize("how,intercept", [("posix", "libc"), ("lio", "libc"), ("libaio", "libc"),
                                           ("raw", "libc"), ("posix", "syscall"), ("libaio", "syscall"),
                                           ("raw", "syscall")])
def test_an_asynchronous_write_makes_the_files_syncs_real_and_nothing_acknowledged_is_lost(
        dev, voldisk, progs, how, intercept):
    f = voldisk.mnt / "f"
    p = acked_under_tdax(dev, progs, "aio", intercept, how, f)
    assert f.read_bytes() == EXPECT, "the case did not do what it says"
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == EXPECT, f"acknowledged data lost ({how}, --intercept {intercept})"
