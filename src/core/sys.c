/*
 * sys -- the kernel's calls for tdax's own I/O (sys.h).
 */
#define _GNU_SOURCE
#include "core/sys.h"
#include "core/testaid.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/mman.h>

typedef long syscall_fn(long, ...);
static syscall_fn *_Atomic raw;

long tdax_sys_raw(long nr, long a, long b, long c, long d, long e, long f)
{
	syscall_fn *fn = atomic_load_explicit(&raw, memory_order_relaxed);
	if (!fn) {
		/* The next syscall after this object: libc's, past libtdax.so's hook. */
		fn = (syscall_fn *)dlsym(RTLD_NEXT, "syscall");
		atomic_store_explicit(&raw, fn, memory_order_relaxed);
	}
	return fn(nr, a, b, c, d, e, f);
}

int tdax_sys_open(const char *path, int flags, mode_t mode)
{
	return tdax_sys_openat(AT_FDCWD, path, flags, mode);
}

int tdax_sys_open_nowait(int dirfd, const char *path, int flags)
{
	int fd = tdax_sys_openat(dirfd, path, flags | O_NONBLOCK, 0);
	if (fd < 0 && errno == EWOULDBLOCK)
		fd = tdax_sys_openat(dirfd, path, flags, 0);
	return fd;
}

int tdax_sys_close(int fd)
{
	return (int)tdax_syscall(SYS_close, fd);
}

ssize_t tdax_sys_write(int fd, const void *p, size_t n)
{
	return tdax_syscall(SYS_write, fd, p, n);
}

#ifndef RWF_NOAPPEND
#define RWF_NOAPPEND 0x20
#endif

#ifdef TDAX_TEST_BUILD
/* Test aid (testaid.h): with TDAX_TEST_LIFT_PAUSE_US set, tdax writes into
 * files as on a kernel without RWF_NOAPPEND, lifting O_APPEND (util.c). */
static bool noappend_refused(void)
{
	return TDAX_TEST_ENV("LIFT_PAUSE_US") != NULL;
}
#else
static bool noappend_refused(void)
{
	return false;
}
#endif

bool tdax_sys_noappend(void)
{
	static _Atomic int known; /* 1: takes it, -1: does not, 0: not asked yet */
	int k = atomic_load_explicit(&known, memory_order_relaxed);
	if (k == 0) {
		int p[2];
		char byte = 0;
		struct iovec one = { &byte, 1 };
		k = -1;
		if (!noappend_refused()) {
			/* No pipe (EMFILE, ENFILE) is no answer: this write-in
			 * lifts, the next one asks again. */
			if (tdax_syscall(SYS_pipe2, p, O_CLOEXEC) != 0)
				return false;
			/* (An older kernel refuses the unknown flag: EOPNOTSUPP.) */
			if (tdax_syscall(SYS_pwritev2, p[1], &one, 1, -1L, -1L, RWF_NOAPPEND) == 1)
				k = 1;
			tdax_sys_close(p[0]);
			tdax_sys_close(p[1]);
		}
		atomic_store_explicit(&known, k, memory_order_relaxed);
	}
	return k > 0;
}

int tdax_sys_pwritev_all(int fd, struct iovec *iov, int n, uint64_t off)
{
	int flags = tdax_sys_noappend() ? RWF_NOAPPEND : 0;
	while (n > 0) {
		ssize_t w = flags ? tdax_syscall(SYS_pwritev2, fd, iov, n, (long)off, 0, flags)
				  : tdax_syscall(SYS_pwritev, fd, iov, n, (long)off, 0);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		off += (uint64_t)w;
		for (; n > 0 && (size_t)w >= iov->iov_len; n--, iov++)
			w -= (ssize_t)iov->iov_len;
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int tdax_sys_fdatasync(int fd)
{
	return (int)tdax_syscall(SYS_fdatasync, fd);
}

int tdax_sys_ftruncate(int fd, off_t len)
{
	return (int)tdax_syscall(SYS_ftruncate, fd, len);
}

int tdax_sys_fallocate(int fd, int mode, off_t off, off_t len)
{
	return (int)tdax_syscall(SYS_fallocate, fd, mode, off, len);
}

int tdax_sys_unlink(const char *path)
{
	return (int)tdax_syscall(SYS_unlinkat, AT_FDCWD, path, 0);
}

void *tdax_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)tdax_syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

int tdax_sys_munmap(void *addr, size_t len)
{
	return (int)tdax_syscall(SYS_munmap, addr, len);
}
