/*
 * interpose_read -- the calls that read a file or its attributes: those
 * of a promoted file's own descriptor are served from its blocks in the
 * block cache and the kernel's copy (promoted.h, cache.h); any other look at a promoted file
 * demotes it first, so that it sees what the application wrote. While no
 * file is promoted each costs one load; a read at the file position, one
 * more (it moves the position: landing.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "preload/fault.h"
#include "preload/promoted.h"
#include "preload/interpose.h"
#include "preload/landing.h"
#include "preload/selection.h"

/* ---- by descriptor --------------------------------------------------- */

/* A read of a promoted file, served without its demotion if it can be
 * (promoted.h); otherwise demoted first. True if served (*r is the result). */
static bool served(int fd, void *buf, size_t n, int64_t off, ssize_t *r)
{
	struct iovec one = { buf, n };
	if (tdax_promoted_read(fd, &one, 1, off, r)) {
		if (*r > 0)
			tdax_selection_served_read(fd, (uint64_t)*r);
		return true;
	}
	tdax_promoted_settle_fd(fd);
	return false;
}

static bool served_v(int fd, const struct iovec *iov, int n, int64_t off, ssize_t *r)
{
	if (tdax_promoted_read(fd, iov, n, off, r)) {
		if (*r > 0)
			tdax_selection_served_read(fd, (uint64_t)*r);
		return true;
	}
	tdax_promoted_settle_fd(fd);
	return false;
}

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	ssize_t r;
	tdax_landing_moved(fd);
	return served(fd, buf, n, -1, &r) ? r : REAL(read)(fd, buf, n);
}

/* The C library's other public name of read (GLIBC_2.2.5). */
EXPORT_ALIAS(__read, read);

EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
	ssize_t r;
	tdax_landing_moved(fd);
	return served_v(fd, iov, n, -1, &r) ? r : REAL(readv)(fd, iov, n);
}

EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	ssize_t r;
	if (off < 0) { /* EINVAL: the kernel says so */
		tdax_promoted_settle_fd(fd);
		return REAL(pread)(fd, buf, n, off);
	}
	return served(fd, buf, n, off, &r) ? r : REAL(pread)(fd, buf, n, off);
}

EXPORT ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
	return pread(fd, buf, n, off);
}

EXPORT_ALIAS(__pread64, pread64); /* (the C library's other public name) */

EXPORT ssize_t preadv(int fd, const struct iovec *iov, int n, off_t off)
{
	ssize_t r;
	if (off < 0) {
		tdax_promoted_settle_fd(fd);
		return REAL(preadv)(fd, iov, n, off);
	}
	return served_v(fd, iov, n, off, &r) ? r : REAL(preadv)(fd, iov, n, off);
}

EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int n, off_t off)
{
	return preadv(fd, iov, n, off);
}

/* With flags (RWF_NOWAIT, ...) the kernel's, after a demotion; off -1 is
 * the file position. */
EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	ssize_t r;
	if (off == -1)
		tdax_landing_moved(fd);
	if (flags == 0 && off >= -1)
		return served_v(fd, iov, n, off, &r) ? r : REAL(preadv2)(fd, iov, n, off, flags);
	tdax_promoted_settle_fd(fd);
	return REAL(preadv2)(fd, iov, n, off, flags);
}

EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	return preadv2(fd, iov, n, off, flags);
}

/* _FORTIFY_SOURCE's checked reads: the check is libc's (a read larger
 * than the buffer aborts there). */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);

EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	ssize_t r;
	if (n > buflen) /* libc aborts */
		return REAL(__read_chk)(fd, buf, n, buflen);
	tdax_landing_moved(fd);
	return served(fd, buf, n, -1, &r) ? r : REAL(__read_chk)(fd, buf, n, buflen);
}

EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	ssize_t r;
	if (n > buflen || off < 0) /* libc aborts, or the kernel says EINVAL */
		return REAL(__pread_chk)(fd, buf, n, off, buflen);
	return served(fd, buf, n, off, &r) ? r : REAL(__pread_chk)(fd, buf, n, off, buflen);
}

EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	return __pread_chk(fd, buf, n, off, buflen); /* (off_t is 64 bits: the same call) */
}

EXPORT int fstat(int fd, struct stat *st)
{
	int r;
	if (tdax_promoted_fstat(fd, st, &r))
		return r;
	tdax_promoted_settle_fd(fd);
	return REAL(fstat)(fd, st);
}

_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "stat64 is stat (64-bit Linux)");

EXPORT int fstat64(int fd, struct stat64 *st)
{
	int r;
	if (tdax_promoted_fstat(fd, (struct stat *)st, &r))
		return r;
	tdax_promoted_settle_fd(fd);
	return REAL(fstat64)(fd, st);
}

/* ---- by name (or by descriptor with AT_EMPTY_PATH) ------------------- */

/* A stat of a file this process promoted gets tdax's size (promoted.h);
 * any other goes to the kernel, after a demotion the thread could not
 * avoid. The stat64 calls are the stat calls (64-bit Linux). */
static void settle_at(int dirfd, const char *path, int flags)
{
	if (!atomic_load_explicit(&tdax_fds_promoted, memory_order_relaxed) || !tdax_fault_path_readable(path))
		return; /* nothing to settle, or a path the kernel fails with EFAULT */
	if (!*path && (flags & AT_EMPTY_PATH))
		tdax_promoted_settle_fd(dirfd);
	else
		tdax_promoted_settle_at(dirfd, path, flags);
}

static int stat_at(int dirfd, const char *path, struct stat *st, int flags)
{
	int r;
	if (tdax_promoted_stat_at(dirfd, path, flags, st, &r))
		return r;
	settle_at(dirfd, path, flags);
	return REAL(fstatat)(dirfd, path, st, flags);
}

EXPORT int stat(const char *path, struct stat *st)
{
	return stat_at(AT_FDCWD, path, st, 0);
}

EXPORT int stat64(const char *path, struct stat64 *st)
{
	return stat_at(AT_FDCWD, path, (struct stat *)st, 0);
}

EXPORT int lstat(const char *path, struct stat *st)
{
	return stat_at(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

EXPORT int lstat64(const char *path, struct stat64 *st)
{
	return stat_at(AT_FDCWD, path, (struct stat *)st, AT_SYMLINK_NOFOLLOW);
}

EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	return stat_at(dirfd, path, st, flags);
}

EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
	return stat_at(dirfd, path, (struct stat *)st, flags);
}

/*
 * The stat calls of programs built against a C library before 2.33: the
 * header made fstat a call of __fxstat64(_STAT_VER, ...), and so on; the
 * C library still has them for those programs. The version tells the
 * layout: 0 or 1 on x86_64, both the struct stat above; any other goes to
 * the C library, which refuses it (EINVAL).
 */
#define STAT_VER_OK(ver) ((ver) == 0 || (ver) == 1)

EXPORT int __fxstat64(int ver, int fd, struct stat64 *st)
{
	if (!STAT_VER_OK(ver))
		return REAL(__fxstat64)(ver, fd, st);
	return fstat64(fd, st);
}

EXPORT int __xstat64(int ver, const char *path, struct stat64 *st)
{
	if (!STAT_VER_OK(ver))
		return REAL(__xstat64)(ver, path, st);
	return stat_at(AT_FDCWD, path, (struct stat *)st, 0);
}

EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st)
{
	if (!STAT_VER_OK(ver))
		return REAL(__lxstat64)(ver, path, st);
	return stat_at(AT_FDCWD, path, (struct stat *)st, AT_SYMLINK_NOFOLLOW);
}

EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
	if (!STAT_VER_OK(ver))
		return REAL(__fxstatat64)(ver, dirfd, path, st, flags);
	return stat_at(dirfd, path, (struct stat *)st, flags);
}

/* (__fxstat and the rest: the same calls, 64-bit Linux.) */
EXPORT_ALIAS(__fxstat, __fxstat64);
EXPORT_ALIAS(__xstat, __xstat64);
EXPORT_ALIAS(__lxstat, __lxstat64);
EXPORT_ALIAS(__fxstatat, __fxstatat64);

EXPORT int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *st)
{
	int r;
	if (tdax_promoted_statx(dirfd, path, flags, mask, st, &r))
		return r;
	settle_at(dirfd, path, flags);
	return REAL(statx)(dirfd, path, flags, mask, st);
}
