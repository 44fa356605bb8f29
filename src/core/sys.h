/*
 * sys -- the kernel's calls for tdax's own I/O. Inside libtdax.so the libc
 * names open, close, pwrite, fdatasync, mmap, ... are tdax's own hooks, so
 * a call to them from tdax's code would be taken for the application's
 * (a replay's pwrite would be logged again, a checkpoint's close would
 * forget a descriptor). Code that is not a hook makes its calls here: the
 * same in the preload, the CLI and the tests. `make test` checks that no
 * object of src/ but the hooks references a hooked name (scripts/
 * check_hooked.sh).
 */
#ifndef TDAX_SYS_H
#define TDAX_SYS_H

#include <stdbool.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/types.h>

/* libc's syscall(2), whatever the process has put in front of it:
 * tdax_syscall(nr, args...) with up to six arguments. Not variadic itself,
 * so that nothing reads arguments the caller did not pass. */
long tdax_sys_raw(long nr, long a, long b, long c, long d, long e, long f);
#define TDAX_SYS7_(nr, a, b, c, d, e, f, ...) \
	tdax_sys_raw((long)(nr), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))
#define tdax_syscall(...) TDAX_SYS7_(__VA_ARGS__, 0, 0, 0, 0, 0, 0)

static inline int tdax_sys_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return (int)tdax_syscall(SYS_openat, dirfd, path, flags, mode);
}
int tdax_sys_open(const char *path, int flags, mode_t mode);
/* Open a file that is probably regular without waiting on a FIFO
 * (O_NONBLOCK). A file under a write lease refuses such an open
 * (EWOULDBLOCK) and tells the lease's holder -- tdax itself, most often
 * (preload/lease.h) -- who lets it go at once: so then open it waiting.
 * The descriptor keeps O_NONBLOCK if the first open gave it. */
int tdax_sys_open_nowait(int dirfd, const char *path, int flags);
int tdax_sys_close(int fd);
ssize_t tdax_sys_write(int fd, const void *p, size_t n);
/* All of iov[0..n) at off, however many pwritev calls it takes (iov is
 * used up on the way); 0, or -1 and errno. Through an O_APPEND descriptor
 * Linux puts a pwrite at the end, whatever its offset: where the kernel
 * takes RWF_NOAPPEND (tdax_sys_noappend) these calls carry it, and land
 * at off all the same; elsewhere the caller lifts O_APPEND first
 * (util.h's tdax_append_lift). */
int tdax_sys_pwritev_all(int fd, struct iovec *iov, int n, uint64_t off);
/* Does the kernel take pwritev2's RWF_NOAPPEND (Linux 6.9)? Asked once per
 * process, with a byte written into a pipe; "no" with errno EMFILE or
 * ENFILE while no pipe can be made, and asked again at the next call. */
bool tdax_sys_noappend(void);
int tdax_sys_fdatasync(int fd);
int tdax_sys_ftruncate(int fd, off_t len);
int tdax_sys_fallocate(int fd, int mode, off_t off, off_t len);
int tdax_sys_unlink(const char *path);
void *tdax_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int tdax_sys_munmap(void *addr, size_t len);

/* Reads and looks at files (libtdax.so's own hooks of these names demote a
 * promoted file first, preload/promoted.h: tdax's own calls need not). */
static inline ssize_t tdax_sys_read(int fd, void *p, size_t n)
{
	return tdax_syscall(SYS_read, fd, p, n);
}
static inline ssize_t tdax_sys_pread(int fd, void *p, size_t n, off_t off)
{
	return tdax_syscall(SYS_pread64, fd, p, n, off);
}
static inline int tdax_sys_fstat(int fd, struct stat *st)
{
	return (int)tdax_syscall(SYS_fstat, fd, st);
}
static inline int tdax_sys_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	return (int)tdax_syscall(SYS_newfstatat, dirfd, path, st, flags);
}
static inline int tdax_sys_stat(const char *path, struct stat *st)
{
	return tdax_sys_fstatat(AT_FDCWD, path, st, 0);
}
static inline int tdax_sys_lstat(const char *path, struct stat *st)
{
	return tdax_sys_fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}
static inline int tdax_sys_statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *stx)
{
	return (int)tdax_syscall(SYS_statx, dirfd, path, flags, mask, stx);
}

#endif
