/*
 * interpose_attr -- hooks of the calls that change a file's attributes
 * (mode, owner, times, extended attributes). An fsync promises them, and
 * the log holds none: after such a change of a managed file its next fsync
 * is real (fdatasync, which does not promise them, may stay lightweight).
 * Each hook makes the real call first; errno and result are the real
 * call's. By descriptor, the descriptor's mode is told; by name, the
 * registered file the name leads to (one stat() for a name that leads to
 * no registered file, nothing while the process has not attached).
 * glibc's older time calls (utime, utimes, lutimes, futimes, futimesat)
 * make their system call themselves, not through utimensat: hooked too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>

#include "preload/interpose.h"
#include "preload/mode.h"
#include "preload/names.h"
#include "preload/start.h"

/* After the real call r on descriptor fd. */
static int by_fd(int fd, int r)
{
	const struct tdax_fd *e = r == 0 ? tdax_managed(fd) : NULL;
	if (e) {
		int err = errno;
		tdax_mode_of(e)->attrs_changed(fd, e);
		errno = err;
	}
	return r;
}

/* After the real call r on dirfd/path. */
static int by_name(int dirfd, const char *path, bool follow, int r)
{
	if (r == 0 && tdax_on() && !tdax_inside) {
		int err = errno;
		tdax_names_attrs_changed(dirfd, path, follow);
		errno = err;
	}
	return r;
}

EXPORT int fchmod(int fd, mode_t mode)
{
	return by_fd(fd, TDAX_REAL(fchmod)(fd, mode));
}

EXPORT int fchmodat(int dirfd, const char *path, mode_t mode, int flags)
{
	return by_name(dirfd, path, !(flags & AT_SYMLINK_NOFOLLOW),
		       TDAX_REAL(fchmodat)(dirfd, path, mode, flags));
}

EXPORT int chmod(const char *path, mode_t mode)
{
	return by_name(AT_FDCWD, path, true, TDAX_REAL(chmod)(path, mode));
}

EXPORT int fchown(int fd, uid_t uid, gid_t gid)
{
	return by_fd(fd, TDAX_REAL(fchown)(fd, uid, gid));
}

EXPORT int fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
	int r = TDAX_REAL(fchownat)(dirfd, path, uid, gid, flags);
	if (r == 0 && (flags & AT_EMPTY_PATH) && !*path)
		return by_fd(dirfd, r);
	return by_name(dirfd, path, !(flags & AT_SYMLINK_NOFOLLOW), r);
}

EXPORT int chown(const char *path, uid_t uid, gid_t gid)
{
	return by_name(AT_FDCWD, path, true, TDAX_REAL(chown)(path, uid, gid));
}

EXPORT int lchown(const char *path, uid_t uid, gid_t gid)
{
	return by_name(AT_FDCWD, path, false, TDAX_REAL(lchown)(path, uid, gid));
}

EXPORT int futimens(int fd, const struct timespec times[2])
{
	return by_fd(fd, TDAX_REAL(futimens)(fd, times));
}

/* (glibc refuses the kernel's NULL path; an empty one with AT_EMPTY_PATH is
 * the descriptor itself.) */
EXPORT int utimensat(int dirfd, const char *path, const struct timespec times[2], int flags)
{
	int r = TDAX_REAL(utimensat)(dirfd, path, times, flags);
	if (r == 0 && (flags & AT_EMPTY_PATH) && !*path)
		return by_fd(dirfd, r);
	return by_name(dirfd, path, !(flags & AT_SYMLINK_NOFOLLOW), r);
}

EXPORT int utime(const char *path, const struct utimbuf *times)
{
	return by_name(AT_FDCWD, path, true, REAL(utime)(path, times));
}

EXPORT int utimes(const char *path, const struct timeval times[2])
{
	return by_name(AT_FDCWD, path, true, REAL(utimes)(path, times));
}

EXPORT int lutimes(const char *path, const struct timeval times[2])
{
	return by_name(AT_FDCWD, path, false, REAL(lutimes)(path, times));
}

EXPORT int futimes(int fd, const struct timeval times[2])
{
	return by_fd(fd, REAL(futimes)(fd, times));
}

EXPORT int futimesat(int dirfd, const char *path, const struct timeval times[2])
{
	int r = REAL(futimesat)(dirfd, path, times);
	return path ? by_name(dirfd, path, true, r) : by_fd(dirfd, r); /* (NULL: the descriptor) */
}

EXPORT int fsetxattr(int fd, const char *name, const void *value, size_t size, int flags)
{
	return by_fd(fd, TDAX_REAL(fsetxattr)(fd, name, value, size, flags));
}

EXPORT int setxattr(const char *path, const char *name, const void *value, size_t size, int flags)
{
	return by_name(AT_FDCWD, path, true, TDAX_REAL(setxattr)(path, name, value, size, flags));
}

EXPORT int lsetxattr(const char *path, const char *name, const void *value, size_t size, int flags)
{
	return by_name(AT_FDCWD, path, false, TDAX_REAL(lsetxattr)(path, name, value, size, flags));
}

EXPORT int fremovexattr(int fd, const char *name)
{
	return by_fd(fd, TDAX_REAL(fremovexattr)(fd, name));
}

EXPORT int removexattr(const char *path, const char *name)
{
	return by_name(AT_FDCWD, path, true, TDAX_REAL(removexattr)(path, name));
}

EXPORT int lremovexattr(const char *path, const char *name)
{
	return by_name(AT_FDCWD, path, false, TDAX_REAL(lremovexattr)(path, name));
}
