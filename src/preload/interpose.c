/*
 * interpose -- the libc functions libtdax.so replaces. Each hook is thin:
 * it decodes the call and hands it to the mode of the descriptor's file
 * (mode.h), or does the real call when tdax does not manage the descriptor.
 * Two ways past the mode's write, for cost (a write's system call should
 * return through as few frames as it can, mode.h): a plain write of a file
 * that has no entry yet makes the real call here and leaves the look after
 * it to unregistered.h (inline: through the mode's kernel_before/after it
 * measured 0.964 of itself without tdax, against 0.978); and a write the
 * mode says the kernel alone makes (kernel_before) is made here, between
 * the mode's kernel_before and kernel_after.
 * A file descriptor tdax does not manage, or a call made while tdax is
 * off, goes straight to the real function with its errno untouched.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

#include "preload/landing.h"
#include "preload/bypass.h"
#include "preload/promoted.h"
#include "preload/checkpoint.h"
#include "preload/coherent.h"
#include "preload/unregistered.h"
#include "preload/manage.h"
#include "preload/mode.h"
#include "preload/names.h"
#include "preload/fdtable.h"
#include "preload/interpose.h"
#include "preload/lease.h"
#include "preload/dirsync.h"
#include "preload/fault.h"
#include "preload/start.h"
#include "preload/state.h"
#include "core/fsioctl.h"
#include "core/sys.h"
#include "core/trace.h"
#include "core/util.h"
#include "preload/writeback.h"

/* The modes, by enum tdax_mode (mode.h). */
const struct tdax_mode_ops *const tdax_modes[TDAX_MODES] = {
	[TDAX_MODE_COHERENT] = &tdax_coherent_mode,
	[TDAX_MODE_UNREGISTERED] = &tdax_unregistered_mode,
	[TDAX_MODE_BYPASS] = &tdax_bypass_mode,
};

static const struct tdax_fd *managed(int fd)
{
	return tdax_managed(fd);
}

/* ---- open ------------------------------------------------------------ */

static bool takes_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/*
 * open/openat/creat: through the real openat; the result is managed if it
 * is a file tdax should manage. An O_TRUNC of a registered file is a
 * record (names.c), told before the new descriptor joins the file's entry
 * (which then finds the size it expects). Linux truncates with O_RDONLY
 * too.
 */
/* The kernel's call a hooked open makes: openat, or the caller's own
 * openat2 (its resolve flags have no openat) or open_by_handle_at. */
struct opener {
	long nr; /* SYS_openat2, SYS_open_by_handle_at; 0: openat */
	const void *arg; /* the open_how, or the file_handle */
	size_t size;     /* the open_how's */
};

static int do_open_by(int dirfd, const char *path, int flags, mode_t mode, const struct opener *by)
{
	/* Another open of a file this process has promoted would break its
	 * own lease and wait for the write-back thread: demoted here first
	 * (by its path: an open by handle has none, and waits). */
	if (path)
		tdax_promoted_settle_at(dirfd, path, (flags & O_NOFOLLOW) ? AT_SYMLINK_NOFOLLOW : 0);
	struct tdax_names_trunc trunc = { .fd = -1 };
	struct tdax_dir_look dir;
	if (flags & O_CREAT)
		tdax_dirsync_look(dirfd, path, &dir);
	if ((flags & O_TRUNC) && path && tdax_on_for_path(dirfd, path, !(flags & O_NOFOLLOW)))
		tdax_names_truncate_look(dirfd, path, !(flags & O_NOFOLLOW), &trunc);
	bool manage = tdax_on_or_waiting() && (flags & O_ACCMODE) != O_RDONLY &&
		      (flags & O_TMPFILE) != O_TMPFILE;
	int fd = !by->nr ? TDAX_REAL(openat)(dirfd, path, flags, mode)
		 : by->nr == SYS_openat2 ? (int)tdax_syscall(SYS_openat2, dirfd, path, by->arg, by->size)
		 : (int)tdax_syscall(SYS_open_by_handle_at, dirfd, by->arg, flags);
	int e = errno;
	/* (From here: the attach, the descriptor's entry. The open itself
	 * stays a cancellation point, as one of a FIFO may wait for good.) */
	TDAX_NO_CANCEL;
	if (trunc.fd >= 0) {
		tdax_names_truncated(&trunc, fd >= 0, 0);
		flags &= ~O_TRUNC; /* logged: it does not uncover the file */
	}
	bool logged = false; /* its creation is a record */
	if (!manage)
		tdax_fd_forget(fd); /* the number may have been a managed file's */
	else if (fd >= 0 && (tdax_on() || (tdax_manage_wants(fd, flags) && tdax_attach_opening(fd))))
		logged = tdax_manage(fd, path, flags);
	const struct tdax_fd *made = (flags & O_CREAT) && !logged ? tdax_fd_get(fd) : NULL;
	if (made && (made->flags & TDAX_FD_MADE))
		tdax_dirsync_made(dirfd, path, &dir, made->dev, made->ino); /* a record at its first sync */
	else if (flags & O_CREAT)
		tdax_dirsync_changed(dirfd, path, &dir, logged);
	errno = e;
	return fd;
}

static int do_open(int dirfd, const char *path, int flags, mode_t mode)
{
	static const struct opener by_openat;
	return do_open_by(dirfd, path, flags, mode, &by_openat);
}

/* openat2 through syscall(2) (the C library has no wrapper for it here):
 * the hooks' open, made by the kernel's call the caller asked for. Its
 * open_how is copied with the kernel's checks (one it cannot read, or a
 * size it would refuse, goes to the kernel as it is, which fails it). */
int tdax_openat2(int dirfd, const char *path, const struct open_how *how, size_t size)
{
	struct open_how h;
	struct iovec mine = { &h, sizeof(h) }, theirs = { (void *)how, sizeof(h) };
	if (size < sizeof(h) || tdax_syscall(SYS_process_vm_readv, getpid(), &mine, 1, &theirs, 1, 0) != sizeof(h))
		return (int)tdax_syscall(SYS_openat2, dirfd, path, how, size);
	const struct opener by = { SYS_openat2, how, size };
	return do_open_by(dirfd, path, (int)h.flags, (mode_t)h.mode, &by);
}

/* An open by a file handle names no path: the hooks' open without one
 * (the kernel ignores O_CREAT there). */
EXPORT int open_by_handle_at(int mount_fd, struct file_handle *handle, int flags)
{
	const struct opener by = { SYS_open_by_handle_at, handle, 0 };
	return do_open_by(mount_fd, NULL, flags & ~O_CREAT, 0, &by);
}

#define MODE_ARG(flags, mode)                                                   \
	mode_t mode = 0;                                                        \
	if (takes_mode(flags)) {                                                \
		va_list ap;                                                     \
		va_start(ap, flags);                                            \
		mode = (mode_t)va_arg(ap, int);                                 \
		va_end(ap);                                                     \
	}

EXPORT int open(const char *path, int flags, ...)
{
	MODE_ARG(flags, mode);
	return do_open(AT_FDCWD, path, flags, mode);
}

EXPORT int open64(const char *path, int flags, ...)
{
	MODE_ARG(flags, mode);
	return do_open(AT_FDCWD, path, flags, mode);
}

/* The C library's other public names of these calls (GLIBC_2.2.5: older code
 * calls them): the same hooks. */
EXPORT_ALIAS(__open, open);
EXPORT_ALIAS(__open64, open64);

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	MODE_ARG(flags, mode);
	return do_open(dirfd, path, flags, mode);
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	MODE_ARG(flags, mode);
	return do_open(dirfd, path, flags, mode);
}

EXPORT int __open_2(const char *path, int flags)
{
	return do_open(AT_FDCWD, path, flags, 0);
}

EXPORT int __open64_2(const char *path, int flags)
{
	return do_open(AT_FDCWD, path, flags, 0);
}

EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	return do_open(dirfd, path, flags, 0);
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	return do_open(dirfd, path, flags, 0);
}

EXPORT int creat(const char *path, mode_t mode)
{
	return do_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

EXPORT int creat64(const char *path, mode_t mode)
{
	return do_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

/* ---- write ----------------------------------------------------------- */

/*
 * A write through a managed descriptor, in the file's mode. If the file's
 * entry was let go meanwhile (another process closed the file, files.h),
 * the descriptor is managed again before the write returns: the bytes must
 * count in whatever entry the file has by the time anyone syncs it.
 */
/* After a write through managed fd: its entry may have been let go
 * meanwhile (manage.h). */
static ssize_t written(int fd, const struct tdax_fd *e, ssize_t r)
{
	if (__builtin_expect(!tdax_manage_current(e), 0)) {
		int err = errno;
		tdax_manage_again(fd);
		errno = err;
	}
	return r;
}

static ssize_t managed_write(int fd, const struct tdax_fd *e, const struct iovec *iov, int n,
			     off_t off, int flags)
{
	return written(fd, e, tdax_mode_of(e)->write(fd, e, iov, n, off, flags));
}

/* Is this write one the kernel alone makes, with the real call made here
 * (mode.h: kernel_before)? */
static inline bool kernel_write(int fd, const struct tdax_fd *e, off_t off, size_t len, uint64_t *at)
{
	const struct tdax_mode_ops *m = tdax_mode_of(e);
	return m->kernel_before && m->kernel_before(fd, e, off, len, at);
}

static ssize_t kernel_wrote(int fd, const struct tdax_fd *e, off_t off, uint64_t at, ssize_t r)
{
	return written(fd, e, tdax_mode_of(e)->kernel_after(fd, e, off, at, r));
}

/* A vector call whose array tdax may read: a count the kernel takes, and
 * an array that is the caller's memory (fault.h). Any other is the
 * kernel's to refuse (EINVAL, EFAULT), with nothing written. */
static bool vector_ok(const struct iovec *iov, int n)
{
	return n <= IOV_MAX && tdax_fault_iovec_readable(iov, n);
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	const struct tdax_fd *e = managed(fd);
	uint64_t at;
	if (!e)
		return TDAX_REAL(write)(fd, buf, n);
	if (tdax_unregistered_plain(e))
		return tdax_unregistered_wrote(fd, e, TDAX_REAL(write)(fd, buf, n));
	TDAX_NO_CANCEL;
	if (kernel_write(fd, e, -1, n, &at))
		return kernel_wrote(fd, e, -1, at, TDAX_REAL(write)(fd, buf, n));
	struct iovec iov = { (void *)buf, n };
	return managed_write(fd, e, &iov, 1, -1, 0);
}

EXPORT_ALIAS(__write, write);

EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	const struct tdax_fd *e = managed(fd);
	uint64_t at;
	if (!e || n <= 0)
		return TDAX_REAL(writev)(fd, iov, n);
	if (tdax_unregistered_plain(e))
		return tdax_unregistered_wrote(fd, e, TDAX_REAL(writev)(fd, iov, n));
	TDAX_NO_CANCEL;
	if (!vector_ok(iov, n))
		return TDAX_REAL(writev)(fd, iov, n); /* refused, nothing written */
	if (kernel_write(fd, e, -1, tdax_iov_bytes(iov, n), &at))
		return kernel_wrote(fd, e, -1, at, TDAX_REAL(writev)(fd, iov, n));
	return managed_write(fd, e, iov, n, -1, 0);
}

EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	const struct tdax_fd *e = managed(fd);
	uint64_t at;
	if (!e || off < 0)
		return TDAX_REAL(pwrite)(fd, buf, n, off);
	if (tdax_unregistered_plain(e)) {
		tdax_unregistered_test_pause();
		return tdax_unregistered_wrote(fd, e, TDAX_REAL(pwrite)(fd, buf, n, off));
	}
	TDAX_NO_CANCEL;
	if (kernel_write(fd, e, off, n, &at))
		return kernel_wrote(fd, e, off, at, TDAX_REAL(pwrite)(fd, buf, n, off));
	struct iovec iov = { (void *)buf, n };
	return managed_write(fd, e, &iov, 1, off, 0);
}

EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	return pwrite(fd, buf, n, off);
}

EXPORT_ALIAS(__pwrite64, pwrite64);

EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
	const struct tdax_fd *e = managed(fd);
	uint64_t at;
	if (!e || n <= 0 || off < 0)
		return TDAX_REAL(pwritev)(fd, iov, n, off);
	if (tdax_unregistered_plain(e))
		return tdax_unregistered_wrote(fd, e, TDAX_REAL(pwritev)(fd, iov, n, off));
	TDAX_NO_CANCEL;
	if (!vector_ok(iov, n))
		return TDAX_REAL(pwritev)(fd, iov, n, off); /* refused, nothing written */
	if (kernel_write(fd, e, off, tdax_iov_bytes(iov, n), &at))
		return kernel_wrote(fd, e, off, at, TDAX_REAL(pwritev)(fd, iov, n, off));
	return managed_write(fd, e, iov, n, off, 0);
}

EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int n, off_t off)
{
	return pwritev(fd, iov, n, off);
}

/* Offset -1 is the file position; any other negative one the kernel
 * refuses (EINVAL), and so must tdax: a write it made at the file position
 * instead would change the file where the caller was told nothing changed. */
EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	const struct tdax_fd *e = managed(fd);
	if (!e || n <= 0 || off < -1 || !vector_ok(iov, n))
		return TDAX_REAL(pwritev2)(fd, iov, n, off, flags);
	TDAX_NO_CANCEL;
	return managed_write(fd, e, iov, n, off, flags);
}

EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	return pwritev2(fd, iov, n, off, flags);
}

/* The file position of a managed descriptor, for the estimate of where its
 * next write lands (fdtable.h). */
EXPORT off_t lseek(int fd, off_t off, int whence)
{
	off_t r;
	if (tdax_promoted_seek(fd, off, whence, &r)) /* a promoted file's position and size are tdax's */
		return r;
	tdax_promoted_settle_fd(fd);
	tdax_landing_moved(fd);
	r = TDAX_REAL(lseek)(fd, off, whence);
	if (r >= 0 && tdax_fd_get(fd))
		atomic_store_explicit(&tdax_fds[fd].pos, (uint64_t)r, memory_order_relaxed);
	return r;
}

EXPORT_ALIAS(__lseek, lseek);
/* (llseek: a compatibility symbol since glibc 2.28, which programs linked
 * before then still call, as llseek@GLIBC_2.2.5.) */
EXPORT_ALIAS(llseek, lseek);

EXPORT off_t lseek64(int fd, off_t off, int whence)
{
	return lseek(fd, off, whence);
}

/* ---- sync ------------------------------------------------------------ */

/* A sync through a descriptor whose entry was let go (files.h) registers
 * the file again first; the sync is then a real one. */
static const struct tdax_fd *current(int fd, const struct tdax_fd *e)
{
	if (e && __builtin_expect(!tdax_manage_current(e), 0)) {
		tdax_manage_again(fd);
		e = tdax_fd_get(fd);
	}
	return e;
}

/* A sync through a descriptor tdax does not manage: a directory's
 * (dirsync.h), or one opened read-only of a file that may have records,
 * which are checkpointed first (checkpoint.h). One statx for both. */
static int unmanaged_sync(int fd, bool datasync)
{
	struct statx stx;
	if (!tdax_on_attached() || tdax_statx_fd(fd, TDAX_DIRSYNC_MASK, &stx) != 0)
		return tdax_mode_real_sync(fd, datasync);
	if (S_ISDIR(stx.stx_mode))
		return tdax_dirsync_sync(fd, datasync, &stx);
	if (S_ISREG(stx.stx_mode) && tdax_checkpoint_through(fd, &stx) != 0)
		return -1;
	return tdax_mode_real_sync(fd, datasync);
}

/* A sync of a managed file, timed one time in TDAX_LAT_EVERY (state.h). */
static int sync_file(int fd, bool datasync)
{
	TDAX_NO_CANCEL;
	const struct tdax_fd *e = current(fd, managed(fd));
	if (!e)
		return unmanaged_sync(fd, datasync);
	uint64_t t0 = tdax_lat_begin();
	int r = tdax_mode_of(e)->sync(fd, e, datasync);
	if (__builtin_expect(t0 != 0, 0)) {
		int err = errno;
		tdax_lat_end(t0);
		errno = err;
	}
	return r;
}

EXPORT int fsync(int fd)
{
	return sync_file(fd, false);
}

EXPORT int fdatasync(int fd)
{
	return sync_file(fd, true);
}

/* sync() and syncfs() make durable what tdax did not log too: no record
 * older than that may be replayed after a crash (checkpoint.h). */
static void syncing_everything(void)
{
	if (tdax_on_attached()) { /* (/bin/sync writes nothing before) */
		TDAX_NO_CANCEL; /* (checkpoints sync) */
		(void)tdax_checkpoint_below(""); /* every file (what fails keeps its records) */
	}
}

EXPORT void sync(void)
{
	syncing_everything();
	REAL(sync)();
}

EXPORT int syncfs(int fd)
{
	syncing_everything();
	return REAL(syncfs)(fd);
}

/* ---- size and metadata ---------------------------------------------- */

/* A call about to change fd's file other than by a write: where a write at
 * its position lands, if known (landing.h), may no longer hold. True if fd is
 * managed (then told); resized() when the change is accounted for. */
static bool resizing(int fd)
{
	if (!managed(fd))
		return false;
	tdax_landing_resize_begin();
	return true;
}

static void resized(bool told)
{
	if (told)
		tdax_landing_resize_end();
}

EXPORT int ftruncate(int fd, off_t len)
{
	const struct tdax_fd *e = managed(fd);
	if (!e)
		return TDAX_REAL(ftruncate)(fd, len);
	TDAX_NO_CANCEL; /* (a checkpoint syncs) */
	tdax_landing_resize_begin();
	int r = tdax_mode_of(e)->ftruncate(fd, e, len);
	tdax_landing_resize_end();
	return r;
}

EXPORT int ftruncate64(int fd, off_t len)
{
	return ftruncate(fd, len);
}

EXPORT int truncate(const char *path, off_t len)
{
	TDAX_NO_CANCEL;
	tdax_promoted_settle_at(AT_FDCWD, path, 0);
	if (!tdax_on_for_path(AT_FDCWD, path, true))
		return TDAX_REAL(truncate)(path, len);
	tdax_landing_resize_begin();
	int r = tdax_names_truncate(path, len);
	tdax_landing_resize_end();
	return r;
}

EXPORT int truncate64(const char *path, off_t len)
{
	return truncate(path, len);
}

EXPORT int fallocate(int fd, int mode, off_t off, off_t len)
{
	const struct tdax_fd *e = managed(fd);
	if (!e)
		return TDAX_REAL(fallocate)(fd, mode, off, len);
	TDAX_NO_CANCEL; /* (a checkpoint syncs) */
	tdax_landing_resize_begin();
	int r = tdax_mode_of(e)->fallocate(fd, e, mode, off, len);
	tdax_landing_resize_end();
	return r;
}

EXPORT int fallocate64(int fd, int mode, off_t off, off_t len)
{
	return fallocate(fd, mode, off, len);
}

EXPORT int posix_fallocate(int fd, off_t off, off_t len)
{
	tdax_promoted_settle_fd(fd);
	const struct tdax_fd *e = managed(fd);
	bool told = resizing(fd);
	int r = TDAX_REAL(posix_fallocate)(fd, off, len);
	if (e)
		tdax_mode_of(e)->changed(fd, e, TDAX_FB_METADATA);
	resized(told);
	return r;
}

EXPORT int posix_fallocate64(int fd, off_t off, off_t len)
{
	return posix_fallocate(fd, off, len);
}

/* ---- paths tdax cannot follow --------------------------------------- */

/* Bytes the kernel moved into fd without tdax seeing them. */
static void moved_in(int fd, ssize_t r)
{
	const struct tdax_fd *e = r > 0 ? managed(fd) : NULL;
	if (e)
		tdax_mode_of(e)->changed(fd, e, TDAX_FB_COPY);
}

EXPORT ssize_t copy_file_range(int in, off_t *off_in, int out, off_t *off_out, size_t len,
			       unsigned flags)
{
	tdax_promoted_settle_fd(in);
	tdax_promoted_settle_fd(out);
	bool told = resizing(out);
	if (!off_in)
		tdax_landing_moved(in);
	ssize_t r = TDAX_REAL(copy_file_range)(in, off_in, out, off_out, len, flags);
	int err = errno;
	moved_in(out, r);
	resized(told);
	errno = err;
	return r;
}

/* The file of fd, if tdax keeps it, off the log before a file system
 * ioctl changes its bytes (fsioctl.h). */
static void off_the_log(int fd)
{
	const struct tdax_fd *e = managed(fd);
	if (e)
		tdax_mode_of(e)->lost_sight(fd, e, TDAX_FB_COPY);
}

/* A clone of another file's blocks into fd (FICLONE, FICLONERANGE: XFS
 * and btrfs share them; ext4 refuses): bytes the kernel moved in, as a
 * copy's. A request that changes bytes otherwise (fsioctl.h) takes the
 * files it changes off the log first. Every other request goes straight
 * to the kernel. */
EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	int changes = tdax_fs_ioctl_changes(req);
	if (changes && tdax_on()) {
		struct iovec other = { arg, sizeof(int32_t) };
		tdax_promoted_settle_fd(fd);
		off_the_log(fd);
		if (changes == 2 && tdax_fault_readable(&other, 1)) { /* else the kernel says EFAULT */
			tdax_promoted_settle_fd(*(int32_t *)arg);
			off_the_log(*(int32_t *)arg);
		}
	}
	if ((unsigned)req != FICLONE && (unsigned)req != FICLONERANGE) {
		if (!changes)
			return TDAX_REAL(ioctl)(fd, req, arg);
		bool told = resizing(fd);
		int r = TDAX_REAL(ioctl)(fd, req, arg);
		resized(told);
		return r;
	}
	struct iovec range = { arg, sizeof(struct file_clone_range) };
	if ((unsigned)req == FICLONE)
		tdax_promoted_settle_fd((int)(intptr_t)arg);
	else if (tdax_on() && tdax_fault_readable(&range, 1)) /* else the kernel says EFAULT */
		tdax_promoted_settle_fd((int)((struct file_clone_range *)arg)->src_fd);
	tdax_promoted_settle_fd(fd);
	bool told = resizing(fd);
	int r = TDAX_REAL(ioctl)(fd, req, arg);
	int err = errno;
	moved_in(fd, r == 0);
	resized(told);
	errno = err;
	return r;
}

EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t len)
{
	tdax_promoted_settle_fd(in);
	tdax_promoted_settle_fd(out);
	bool told = resizing(out);
	if (!off)
		tdax_landing_moved(in);
	ssize_t r = TDAX_REAL(sendfile)(out, in, off, len);
	int err = errno;
	moved_in(out, r);
	resized(told);
	errno = err;
	return r;
}

EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t len)
{
	return sendfile(out, in, off, len);
}

EXPORT ssize_t splice(int in, off_t *off_in, int out, off_t *off_out, size_t len, unsigned flags)
{
	tdax_promoted_settle_fd(in);
	tdax_promoted_settle_fd(out);
	bool told = resizing(out);
	if (!off_in)
		tdax_landing_moved(in);
	ssize_t r = TDAX_REAL(splice)(in, off_in, out, off_out, len, flags);
	int err = errno;
	moved_in(out, r);
	resized(told);
	errno = err;
	return r;
}

/* A stdio stream writes through glibc's internal calls, which tdax does
 * not see: a registered file goes to the kernel for good. */
static void stdio_on(FILE *f, const char *mode)
{
	if (f)
		tdax_promoted_settle_fd(fileno(f));
	if (f && strpbrk(mode, "wa+") && tdax_on_or_waiting() &&
	    (tdax_on() || (tdax_manage_wants(fileno(f), O_WRONLY) && tdax_attach())))
		tdax_manage_stdio(fileno(f));
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
	tdax_promoted_settle_at(AT_FDCWD, path, 0); /* as do_open */
	FILE *f = TDAX_REAL(fopen)(path, mode);
	if (f)
		tdax_fd_forget(fileno(f)); /* a new descriptor: whatever the number was, it is this */
	stdio_on(f, mode);
	return f;
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
	return fopen(path, mode);
}

/* The stream's descriptor is closed (as fclose's: interpose_fd.c), and
 * another opened inside the C library: this file's, or, without a path,
 * the same file's in the new mode. */
EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
	if (stream) {
		tdax_promoted_settle_fd(fileno(stream));
		tdax_lease_drop(fileno(stream));
	}
	if (path)
		tdax_promoted_settle_at(AT_FDCWD, path, 0);
	FILE *f = TDAX_REAL(freopen)(path, mode, stream);
	if (f)
		tdax_fd_forget(fileno(f));
	stdio_on(f, mode);
	return f;
}

EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
	return freopen(path, mode, stream);
}

EXPORT FILE *fdopen(int fd, const char *mode)
{
	tdax_landing_streamed(fd);
	FILE *f = TDAX_REAL(fdopen)(fd, mode);
	stdio_on(f, mode);
	return f;
}

/*
 * dprintf and vdprintf (and their _FORTIFY_SOURCE forms) make a stream of
 * their own on the descriptor inside the C library, whose writes no hook
 * sees. To a descriptor tdax manages, the text is made here and written
 * through write(): logged as any write, in as many calls as the kernel
 * takes, and an error ends it as it ends the stream's (EOF, errno kept).
 */
int __vasprintf_chk(char **out, int flag, const char *fmt, va_list ap);

static int printed(int fd, char *text, int len)
{
	if (len < 0)
		return -1; /* no memory for the text: errno says so */
	int done = 0;
	while (done < len) {
		ssize_t r = write(fd, text + done, (size_t)(len - done));
		if (r <= 0) {
			if (r == 0)
				errno = EIO;
			done = -1;
			break;
		}
		done += (int)r;
	}
	int err = errno;
	free(text);
	errno = err;
	return done;
}

EXPORT int vdprintf(int fd, const char *fmt, va_list ap)
{
	if (!managed(fd))
		return TDAX_REAL(vdprintf)(fd, fmt, ap);
	char *text = NULL;
	int len = vasprintf(&text, fmt, ap);
	return printed(fd, text, len);
}

EXPORT int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap)
{
	if (!managed(fd))
		return TDAX_REAL(__vdprintf_chk)(fd, flag, fmt, ap);
	char *text = NULL;
	int len = __vasprintf_chk(&text, flag, fmt, ap);
	return printed(fd, text, len);
}

EXPORT int dprintf(int fd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vdprintf(fd, fmt, ap);
	va_end(ap);
	return r;
}

EXPORT int __dprintf_chk(int fd, int flag, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = __vdprintf_chk(fd, flag, fmt, ap);
	va_end(ap);
	return r;
}

/* The C library is about to write fd with its own internal calls: a
 * promoted file is demoted (as for any stdio stream), and its file's syncs
 * become the kernel's, with one atomic step (no allocation: signal
 * handlers call backtrace_symbols_fd). */
static void written_inside(int fd)
{
	tdax_promoted_settle_fd(fd);
	const struct tdax_fd *e = managed(fd);
	if (e && e->file_plus1 != TDAX_FD_UNREGISTERED)
		tdax_coherent_kernel_only(e->file_plus1 - 1, TDAX_FB_STDIO);
}

EXPORT void backtrace_symbols_fd(void *const *frames, int n, int fd)
{
	written_inside(fd);
	TDAX_REAL(backtrace_symbols_fd)(frames, n, fd);
}

/* syslog after openlog(..., LOG_PERROR, ...) copies each message to
 * stderr with an internal dprintf: a file at descriptor 2 is written
 * unseen. (The option stays until the next openlog, closelog or not.) */
static _Atomic bool log_perror;

EXPORT void openlog(const char *ident, int option, int facility)
{
	atomic_store(&log_perror, (option & LOG_PERROR) != 0);
	TDAX_REAL(openlog)(ident, option, facility);
}

EXPORT void vsyslog(int pri, const char *fmt, va_list ap)
{
	if (atomic_load(&log_perror))
		written_inside(STDERR_FILENO);
	TDAX_REAL(vsyslog)(pri, fmt, ap);
}

EXPORT void __vsyslog_chk(int pri, int flag, const char *fmt, va_list ap)
{
	if (atomic_load(&log_perror))
		written_inside(STDERR_FILENO);
	TDAX_REAL(__vsyslog_chk)(pri, flag, fmt, ap);
}

EXPORT void syslog(int pri, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsyslog(pri, fmt, ap);
	va_end(ap);
}

void __syslog_chk(int pri, int flag, const char *fmt, ...);
void __vsyslog_chk(int pri, int flag, const char *fmt, va_list ap);
EXPORT void __syslog_chk(int pri, int flag, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	__vsyslog_chk(pri, flag, fmt, ap);
	va_end(ap);
}

/* ---- names (names.h) ------------------------------------------------- */

/* A rename tdax follows: attached, and both paths readable (one that is
 * not goes to the kernel, which says EFAULT, as it would without tdax). */
static bool follows_rename(const char *oldpath, const char *newpath)
{
	return tdax_on_attached() && tdax_fault_path_readable(oldpath) && tdax_fault_path_readable(newpath);
}

EXPORT int rename(const char *oldpath, const char *newpath)
{
	if (!follows_rename(oldpath, newpath))
		return TDAX_REAL(rename)(oldpath, newpath);
	tdax_promoted_settle_at(AT_FDCWD, oldpath, AT_SYMLINK_NOFOLLOW);
	tdax_promoted_settle_at(AT_FDCWD, newpath, AT_SYMLINK_NOFOLLOW);
	return tdax_names_rename(AT_FDCWD, oldpath, AT_FDCWD, newpath, 0);
}

EXPORT int renameat(int olddir, const char *oldpath, int newdir, const char *newpath)
{
	if (!follows_rename(oldpath, newpath))
		return TDAX_REAL(renameat)(olddir, oldpath, newdir, newpath);
	tdax_promoted_settle_at(olddir, oldpath, AT_SYMLINK_NOFOLLOW);
	tdax_promoted_settle_at(newdir, newpath, AT_SYMLINK_NOFOLLOW);
	return tdax_names_rename(olddir, oldpath, newdir, newpath, 0);
}

EXPORT int renameat2(int olddir, const char *oldpath, int newdir, const char *newpath,
		     unsigned flags)
{
	if (!follows_rename(oldpath, newpath))
		return TDAX_REAL(renameat2)(olddir, oldpath, newdir, newpath, flags);
	tdax_promoted_settle_at(olddir, oldpath, AT_SYMLINK_NOFOLLOW);
	tdax_promoted_settle_at(newdir, newpath, AT_SYMLINK_NOFOLLOW);
	return tdax_names_rename(olddir, oldpath, newdir, newpath, flags);
}

EXPORT int unlink(const char *path)
{
	if (!tdax_on_for_path(AT_FDCWD, path, false))
		return TDAX_REAL(unlink)(path);
	tdax_promoted_settle_at(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW);
	return tdax_names_unlink(AT_FDCWD, path, 0);
}

EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
	if (flags & AT_REMOVEDIR) {
		struct tdax_dir_look dir;
		tdax_dirsync_look(dirfd, path, &dir);
		int r = TDAX_REAL(unlinkat)(dirfd, path, flags);
		tdax_dirsync_changed(dirfd, path, &dir, false);
		return r;
	}
	if (!tdax_on_for_path(dirfd, path, false))
		return TDAX_REAL(unlinkat)(dirfd, path, flags);
	tdax_promoted_settle_at(dirfd, path, AT_SYMLINK_NOFOLLOW);
	return tdax_names_unlink(dirfd, path, flags);
}

/* remove() is unlink, or rmdir for a directory, made inside the C library
 * (which no hook sees: a removed file's records were then replayed and
 * the file made again by recovery); the same here, through the hooks. */
EXPORT int remove(const char *path)
{
	if (unlink(path) == 0)
		return 0;
	if (errno != EISDIR)
		return -1;
	return unlinkat(AT_FDCWD, path, AT_REMOVEDIR);
}
