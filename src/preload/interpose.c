/*
 * interpose -- the libc functions libtdax.so replaces. Each hook is thin:
 * it decodes the call, does the real call, and tells the file's mode what happened.
 * A file descriptor tdax does not manage, or a call made while tdax is
 * off, goes straight to the real function with its errno untouched.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "preload/coherent.h"
#include "preload/manage.h"
#include "preload/fdtable.h"
#include "preload/interpose.h"
#include "preload/state.h"
#include "core/shadow.h"
#include "core/trace.h"
#include "preload/writeback.h"

static const struct tdax_fd *managed(int fd)
{
	if (!tdax_real.write)
		tdax_resolve_real();
	return tdax_on() ? tdax_fd_get(fd) : NULL;
}

/* ---- open ------------------------------------------------------------ */

static bool takes_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/* Open through the real openat; manage the result if it is a file tdax
 * should manage. */
static int do_open(int dirfd, const char *path, int flags, mode_t mode)
{
	if (!tdax_real.openat)
		tdax_resolve_real();
	/* No record may outlive a truncate (Linux truncates with O_RDONLY too):
	 * the checkpoint's error instead. */
	uint32_t plus1, gen;
	if ((flags & O_TRUNC) && tdax_on() &&
	    tdax_coherent_checkpoint_path(dirfd, path, !(flags & O_NOFOLLOW), &plus1, &gen) != 0)
		return -1;
	bool manage = tdax_on() && (flags & O_ACCMODE) != O_RDONLY &&
		      (flags & O_TMPFILE) != O_TMPFILE;
	if (!manage) {
		int fd = tdax_real.openat(dirfd, path, flags, mode);
		tdax_fd_forget(fd); /* the number may have been a managed file's */
		return fd;
	}
	int fd = tdax_real.openat(dirfd, path, flags, mode);
	if (fd >= 0) {
		int e = errno;
		tdax_manage(fd, path, flags);
		errno = e;
	}
	return fd;
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

static void unlogged(const struct tdax_fd *e)
{
	if (tdax_tracing)
		tdax_trace_event(TDAX_TR_WRITE, e->file_plus1 - 1, 0, 0, 1);
	atomic_fetch_add(&tdax_file_at(tdax_rt.dev, e->file_plus1 - 1)->rt.uncovered, 1);
	tdax_count(TDAX_ST_UNLOGGED_WRITES, 1);
}

/*
 * pwritev2 flags whose effect on the file tdax knows: where the bytes land
 * (RWF_APPEND, RWF_NOAPPEND), when the call returns (RWF_DSYNC, RWF_SYNC:
 * tdax's to honour), and ones that change neither the bytes nor where they
 * go (RWF_HIPRI, RWF_NOWAIT, RWF_ATOMIC, RWF_DONTCACHE: the page cache
 * still holds the write until write-back, as the log does). A write with
 * any other flag goes to the kernel as asked and makes the file uncovered:
 * a flag tdax does not know may mean anything.
 */
#ifndef RWF_NOAPPEND
#define RWF_NOAPPEND 0x20
#endif
#ifndef RWF_ATOMIC
#define RWF_ATOMIC 0x40
#endif
#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x80
#endif
#define RWF_UNDERSTOOD (RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT | RWF_APPEND | RWF_NOAPPEND | \
			RWF_ATOMIC | RWF_DONTCACHE)

static void passed_through(const struct tdax_fd *e)
{
	tdax_count(TDAX_ST_UNLOGGED_WRITES, 1);
	tdax_coherent_uncover(e->file_plus1 - 1, TDAX_FB_PASSTHROUGH);
}

/* O_SYNC/O_DSYNC (or RWF_SYNC/RWF_DSYNC): the write is complete only once
 * its data is durable. */
static ssize_t finish_write(int fd, const struct tdax_fd *e, ssize_t r, bool dsync, bool sync)
{
	if (r > 0 && (dsync || sync || (e->flags & (TDAX_FD_DSYNC | TDAX_FD_SYNC))) &&
	    tdax_coherent_sync(fd, e, !(sync || (e->flags & TDAX_FD_SYNC))) != 0)
		return -1;
	return r;
}

/* This thread is inside positional(), holding its file's position lock. */
static __thread int in_positional TDAX_TLS;

/* The real positional write, with pwritev2's flags when there are some. */
static ssize_t real_pwrite(int fd, const struct iovec *iov, int n, off_t off, int rwf)
{
	if (rwf)
		return tdax_real.pwritev2(fd, iov, n, off, rwf);
	return n == 1 ? tdax_real.pwrite(fd, iov[0].iov_base, iov[0].iov_len, off)
		      : tdax_real.pwritev(fd, iov, n, off);
}

/*
 * A write at the file position (write, writev, O_APPEND): the kernel picks
 * the offset, so tdax writers of one file take turns, and the offset is
 * read back from the position the write left. Through a twin (O_SYNC,
 * O_DSYNC), the application's descriptor keeps the position: read it,
 * write there (or at the end, the twin has O_APPEND too), move it on.
 */
static ssize_t positional(int fd, const struct tdax_fd *e, const struct iovec *iov, int n, int rwf)
{
	_Atomic uint32_t *lock = &tdax_file_at(tdax_rt.dev, e->file_plus1 - 1)->rt.lock;
	int wfd = e->twin_plus1 ? tdax_twin_fd(e->twin_plus1) : fd;
	if (in_positional) {
		/* A signal handler interrupted this thread's own positional
		 * write: the lock is ours already. The kernel's write, unlogged. */
		ssize_t r = rwf ? tdax_real.pwritev2(fd, iov, n, -1, rwf) : tdax_real.writev(fd, iov, n);
		if (r > 0)
			unlogged(e);
		return r;
	}
	tdax_coherent_write_begin(e);
	in_positional = 1;
	tdax_pidlock_acquire(lock);
	ssize_t r;
	off_t end = -1;
	bool at_end = (rwf & RWF_APPEND) || ((e->flags & TDAX_FD_APPEND) && !(rwf & RWF_NOAPPEND));
	if (e->twin_plus1 && !at_end) {
		off_t pos = lseek(fd, 0, SEEK_CUR);
		r = pos < 0 ? -1 : real_pwrite(wfd, iov, n, pos, rwf);
		if (r > 0 && lseek(fd, pos + r, SEEK_SET) >= 0)
			end = pos + r;
	} else {
		r = rwf ? tdax_real.pwritev2(wfd, iov, n, -1, rwf)
		    : n == 1 ? tdax_real.write(wfd, iov[0].iov_base, iov[0].iov_len)
			     : tdax_real.writev(wfd, iov, n);
		end = r > 0 ? lseek(wfd, 0, SEEK_CUR) : -1;
		if (e->twin_plus1 && end >= 0)
			lseek(fd, end, SEEK_SET);
	}
	int err = errno;
	tdax_pidlock_release(lock);
	in_positional = 0;
	if (r > 0) {
		if (rwf & ~RWF_UNDERSTOOD)
			passed_through(e);
		else if (end >= r)
			tdax_coherent_after_write(e, (uint64_t)(end - r), iov, n, (size_t)r);
		else
			unlogged(e);
		tdax_writeback_ensure();
	}
	tdax_coherent_write_end(e);
	errno = err;
	return finish_write(fd, e, r, false, false);
}

static ssize_t at_offset(int fd, const struct tdax_fd *e, const struct iovec *iov, int n, off_t off,
			 int rwf)
{
	ssize_t r;
	int sync_flags = rwf & (RWF_DSYNC | RWF_SYNC);
	rwf &= ~sync_flags;
	tdax_coherent_write_begin(e);
	r = real_pwrite(e->twin_plus1 ? tdax_twin_fd(e->twin_plus1) : fd, iov, n, off, rwf);
	int err = errno;
	if (r > 0) {
		/* With O_APPEND (or RWF_APPEND) Linux ignores the offset: the
		 * bytes land at the end, where tdax cannot be sure of. */
		bool at_end = ((e->flags & TDAX_FD_APPEND) && !(rwf & RWF_NOAPPEND)) || (rwf & RWF_APPEND);
		if (rwf & ~RWF_UNDERSTOOD)
			passed_through(e);
		else if (at_end)
			unlogged(e);
		else
			tdax_coherent_after_write(e, (uint64_t)off, iov, n, (size_t)r);
		tdax_writeback_ensure();
	}
	tdax_coherent_write_end(e);
	errno = err;
	return finish_write(fd, e, r, sync_flags & RWF_DSYNC, sync_flags & RWF_SYNC);
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	const struct tdax_fd *e = managed(fd);
	if (!e)
		return tdax_real.write(fd, buf, n);
	struct iovec iov = { (void *)buf, n };
	return positional(fd, e, &iov, 1, 0);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	const struct tdax_fd *e = managed(fd);
	if (!e || n <= 0)
		return tdax_real.writev(fd, iov, n);
	return positional(fd, e, iov, n, 0);
}

EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	const struct tdax_fd *e = managed(fd);
	if (!e || off < 0)
		return tdax_real.pwrite(fd, buf, n, off);
	struct iovec iov = { (void *)buf, n };
	return at_offset(fd, e, &iov, 1, off, 0);
}

EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	return pwrite(fd, buf, n, off);
}

EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
	const struct tdax_fd *e = managed(fd);
	if (!e || n <= 0 || off < 0)
		return tdax_real.pwritev(fd, iov, n, off);
	return at_offset(fd, e, iov, n, off, 0);
}

EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int n, off_t off)
{
	return pwritev(fd, iov, n, off);
}

EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	const struct tdax_fd *e = managed(fd);
	if (!e || n <= 0)
		return tdax_real.pwritev2(fd, iov, n, off, flags);
	if (off == -1) {
		ssize_t r = positional(fd, e, iov, n, flags & ~(RWF_DSYNC | RWF_SYNC));
		return finish_write(fd, e, r, flags & RWF_DSYNC, flags & RWF_SYNC);
	}
	return at_offset(fd, e, iov, n, off, flags);
}

EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	return pwritev2(fd, iov, n, off, flags);
}

/* ---- sync ------------------------------------------------------------ */

EXPORT int fsync(int fd)
{
	const struct tdax_fd *e = managed(fd);
	return e ? tdax_coherent_sync(fd, e, false) : tdax_real.fsync(fd);
}

EXPORT int fdatasync(int fd)
{
	const struct tdax_fd *e = managed(fd);
	return e ? tdax_coherent_sync(fd, e, true) : tdax_real.fdatasync(fd);
}

/* ---- size and metadata ---------------------------------------------- */

/* After a change of size or layout by the kernel: the next sync is real. */
static void changed(int fd, const struct tdax_fd *e, enum tdax_fallback why)
{
	uint32_t idx = e->file_plus1 - 1;
	uint64_t size;
	if (tdax_file_size(fd, &size) == 0)
		atomic_store(&tdax_file_at(tdax_rt.dev, idx)->rt.size_seen, size);
	tdax_coherent_uncover(idx, why);
}

EXPORT int ftruncate(int fd, off_t len)
{
	const struct tdax_fd *e = managed(fd);
	if (!e)
		return tdax_real.ftruncate(fd, len);
	if (tdax_coherent_checkpoint_fd(fd, e->file_plus1 - 1, e->gen, true) != 0)
		return -1; /* records that cannot be written back must not outlive the truncate */
	int r = tdax_real.ftruncate(fd, len);
	int err = errno;
	changed(fd, e, TDAX_FB_METADATA);
	errno = err;
	return r;
}

EXPORT int ftruncate64(int fd, off_t len)
{
	return ftruncate(fd, len);
}

EXPORT int truncate(const char *path, off_t len)
{
	if (!tdax_real.truncate)
		tdax_resolve_real();
	if (!tdax_on())
		return tdax_real.truncate(path, len);
	uint32_t gen, plus1;
	if (tdax_coherent_checkpoint_path(AT_FDCWD, path, true, &plus1, &gen) != 0)
		return -1;
	int r = tdax_real.truncate(path, len);
	int err = errno;
	if (plus1 && r == 0) {
		atomic_store(&tdax_file_at(tdax_rt.dev, plus1 - 1)->rt.size_seen, (uint64_t)len);
		tdax_coherent_uncover(plus1 - 1, TDAX_FB_METADATA);
	}
	errno = err;
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
		return tdax_real.fallocate(fd, mode, off, len);
	/* Every mode but plain allocation changes bytes or moves them (punch,
	 * zero, collapse, insert, unshare, write-zeroes, and any mode to come):
	 * records written before must not be replayed over the result. */
	if ((mode & ~FALLOC_FL_KEEP_SIZE) &&
	    tdax_coherent_checkpoint_fd(fd, e->file_plus1 - 1, e->gen, true) != 0)
		return -1;
	int r = tdax_real.fallocate(fd, mode, off, len);
	int err = errno;
	changed(fd, e, TDAX_FB_METADATA);
	errno = err;
	return r;
}

EXPORT int fallocate64(int fd, int mode, off_t off, off_t len)
{
	return fallocate(fd, mode, off, len);
}

EXPORT int posix_fallocate(int fd, off_t off, off_t len)
{
	const struct tdax_fd *e = managed(fd);
	int r = tdax_real.posix_fallocate(fd, off, len);
	if (e)
		changed(fd, e, TDAX_FB_METADATA);
	return r;
}

EXPORT int posix_fallocate64(int fd, off_t off, off_t len)
{
	return posix_fallocate(fd, off, len);
}

/* ---- paths tdax cannot follow --------------------------------------- */

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	/* A shared mapping of a descriptor open for writing can be made
	 * writable later (mprotect), unseen: read-only now is not enough. */
	const struct tdax_fd *e = managed(fd);
	if (e && (flags & MAP_SHARED))
		tdax_coherent_unmanage(fd, e->file_plus1 - 1, e->gen, TDAX_FB_MMAP);
	return tdax_real.mmap(addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}

/* Bytes the kernel moved into fd without tdax seeing them. */
static void moved_in(int fd, ssize_t r)
{
	const struct tdax_fd *e = r > 0 ? managed(fd) : NULL;
	if (e)
		changed(fd, e, TDAX_FB_COPY);
}

EXPORT ssize_t copy_file_range(int in, off_t *off_in, int out, off_t *off_out, size_t len,
			       unsigned flags)
{
	if (!tdax_real.copy_file_range)
		tdax_resolve_real();
	ssize_t r = tdax_real.copy_file_range(in, off_in, out, off_out, len, flags);
	int err = errno;
	moved_in(out, r);
	errno = err;
	return r;
}

EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t len)
{
	if (!tdax_real.sendfile)
		tdax_resolve_real();
	ssize_t r = tdax_real.sendfile(out, in, off, len);
	int err = errno;
	moved_in(out, r);
	errno = err;
	return r;
}

EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t len)
{
	return sendfile(out, in, off, len);
}

EXPORT ssize_t splice(int in, off_t *off_in, int out, off_t *off_out, size_t len, unsigned flags)
{
	if (!tdax_real.splice)
		tdax_resolve_real();
	ssize_t r = tdax_real.splice(in, off_in, out, off_out, len, flags);
	int err = errno;
	moved_in(out, r);
	errno = err;
	return r;
}

/* A stdio stream writes through glibc's internal calls, which tdax does
 * not see: the file goes back to the kernel for good. */
static void stdio_on(FILE *f, const char *mode)
{
	if (!f || !tdax_on() || !strpbrk(mode, "wa+"))
		return;
	int fd = fileno(f);
	struct tdax_ident id;
	uint32_t idx, gen;
	if (tdax_ident_of_fd(fd, &id) == 0 && tdax_files_find(tdax_rt.dev, &id, &idx, &gen) == 0)
		tdax_coherent_unmanage(fd, idx, gen, TDAX_FB_STDIO);
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
	if (!tdax_real.fopen)
		tdax_resolve_real();
	FILE *f = tdax_real.fopen(path, mode);
	if (f)
		tdax_fd_forget(fileno(f)); /* a new descriptor: whatever the number was, it is this */
	stdio_on(f, mode);
	return f;
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
	return fopen(path, mode);
}

EXPORT FILE *fdopen(int fd, const char *mode)
{
	if (!tdax_real.fdopen)
		tdax_resolve_real();
	FILE *f = tdax_real.fdopen(fd, mode);
	stdio_on(f, mode);
	return f;
}

/* ---- exec ------------------------------------------------------------ */

/* The new image starts its own tdax (it inherits LD_PRELOAD and adopts the
 * open fds); this one's counters must reach the device first. */
static void before_exec(void)
{
	if (tdax_on()) {
		tdax_stats_flush();
		tdax_trace_flush();
	}
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	before_exec();
	return tdax_real.execve(path, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[])
{
	before_exec();
	return tdax_real.execve(path, argv, environ);
}

EXPORT int execvp(const char *file, char *const argv[])
{
	before_exec();
	return tdax_real.execvpe(file, argv, environ);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	before_exec();
	return tdax_real.execvpe(file, argv, envp);
}

/* ---- names ---------------------------------------------------------- */

/* The absolute path dirfd/path names now, and whether it is a directory. */
static bool abs_path(int dirfd, const char *path, char out[TDAX_FILE_PATH_MAX + 1], bool *is_dir)
{
	int fd = tdax_real.openat(dirfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	char link[64];
	struct stat st;
	snprintf(link, sizeof(link), "/proc/thread-self/fd/%d", fd);
	ssize_t n = readlink(link, out, TDAX_FILE_PATH_MAX);
	bool ok = n > 0 && n < TDAX_FILE_PATH_MAX && fstat(fd, &st) == 0;
	if (ok) {
		out[n] = '\0';
		*is_dir = S_ISDIR(st.st_mode);
	}
	tdax_real.close(fd);
	return ok;
}

/* A registered file now lives at dirfd/path: record it for recovery. */
static void moved_to(uint32_t plus1, uint32_t gen, int dirfd, const char *path)
{
	char abs[TDAX_FILE_PATH_MAX + 1];
	bool is_dir;
	if (abs_path(dirfd, path, abs, &is_dir))
		tdax_files_rename(tdax_rt.dev, plus1 - 1, gen, abs);
	tdax_coherent_uncover(plus1 - 1, TDAX_FB_METADATA);
}

/*
 * Before a rename replaces newpath and moves oldpath: checkpoint both (and
 * with RENAME_EXCHANGE, both move). After it, record where each registered
 * file went, so that recovery finds it; a directory takes every registered
 * file below it along, and those are checkpointed first too.
 */
static int do_rename(int olddir, const char *oldpath, int newdir, const char *newpath,
		     unsigned flags)
{
	bool exchange = flags & RENAME_EXCHANGE;
	uint32_t new_plus1, new_gen, old_plus1, old_gen;
	tdax_coherent_checkpoint_path(newdir, newpath, false, &new_plus1, &new_gen);
	tdax_coherent_checkpoint_path(olddir, oldpath, false, &old_plus1, &old_gen);
	char old_abs[TDAX_FILE_PATH_MAX + 1], new_abs[TDAX_FILE_PATH_MAX + 1];
	bool old_dir = false, new_dir = false;
	if (!abs_path(olddir, oldpath, old_abs, &old_dir))
		return flags ? tdax_real.renameat2(olddir, oldpath, newdir, newpath, flags)
			     : tdax_real.renameat(olddir, oldpath, newdir, newpath); /* its error */
	if (!exchange || !abs_path(newdir, newpath, new_abs, &new_dir))
		new_dir = false;
	if (old_dir)
		tdax_coherent_checkpoint_below(old_abs);
	if (new_dir)
		tdax_coherent_checkpoint_below(new_abs);
	int r = flags ? tdax_real.renameat2(olddir, oldpath, newdir, newpath, flags)
		      : tdax_real.renameat(olddir, oldpath, newdir, newpath);
	int err = errno;
	if (r == 0) {
		/* The file rename replaced may live on through a descriptor: it
		 * has no name now, so no checkpoint could find it by path. */
		if (new_plus1 && !exchange && new_plus1 != old_plus1)
			tdax_coherent_kernel_only(new_plus1 - 1, TDAX_FB_METADATA);
		if (old_plus1)
			moved_to(old_plus1, old_gen, newdir, newpath);
		if (exchange && new_plus1)
			moved_to(new_plus1, new_gen, olddir, oldpath);
		char now[TDAX_FILE_PATH_MAX + 1];
		bool dir;
		if ((old_dir || new_dir || tdax_shadow_on()) && abs_path(newdir, newpath, now, &dir)) {
			if (old_dir || new_dir)
				tdax_files_move_below(tdax_rt.dev, old_abs, now, new_dir);
			tdax_shadow_renamed(old_abs, now, exchange);
		}
	}
	errno = err;
	return r;
}

EXPORT int rename(const char *oldpath, const char *newpath)
{
	if (!tdax_real.rename)
		tdax_resolve_real();
	if (!tdax_on())
		return tdax_real.rename(oldpath, newpath);
	return do_rename(AT_FDCWD, oldpath, AT_FDCWD, newpath, 0);
}

EXPORT int renameat(int olddir, const char *oldpath, int newdir, const char *newpath)
{
	if (!tdax_real.renameat)
		tdax_resolve_real();
	if (!tdax_on())
		return tdax_real.renameat(olddir, oldpath, newdir, newpath);
	return do_rename(olddir, oldpath, newdir, newpath, 0);
}

EXPORT int renameat2(int olddir, const char *oldpath, int newdir, const char *newpath,
		     unsigned flags)
{
	if (!tdax_real.renameat2)
		tdax_resolve_real();
	if (!tdax_on())
		return tdax_real.renameat2(olddir, oldpath, newdir, newpath, flags);
	return do_rename(olddir, oldpath, newdir, newpath, flags);
}

/* Checkpoint before the name goes; free the entry once the file is gone. */
static int do_unlink(int dirfd, const char *path, int flags)
{
	uint32_t gen, plus1;
	tdax_coherent_checkpoint_path(dirfd, path, false, &plus1, &gen);
	int fd = plus1 ? tdax_real.openat(dirfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
	char name[TDAX_FILE_PATH_MAX + 1];
	bool is_dir, named = tdax_shadow_on() && abs_path(dirfd, path, name, &is_dir);
	int r = tdax_real.unlinkat(dirfd, path, flags);
	int err = errno;
	if (r == 0 && named)
		tdax_shadow_unlinked(name);
	struct stat st;
	if (r == 0 && fd >= 0 && fstat(fd, &st) == 0) {
		if (st.st_nlink == 0)
			tdax_files_forget(tdax_rt.dev, plus1 - 1, gen);
		else /* it lives on under a name tdax does not know: recovery could not find it */
			tdax_coherent_kernel_only(plus1 - 1, TDAX_FB_METADATA);
	}
	if (fd >= 0)
		tdax_real.close(fd);
	errno = err;
	return r;
}

EXPORT int unlink(const char *path)
{
	if (!tdax_real.unlink)
		tdax_resolve_real();
	if (!tdax_on())
		return tdax_real.unlink(path);
	return do_unlink(AT_FDCWD, path, 0);
}

EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
	if (!tdax_real.unlinkat)
		tdax_resolve_real();
	if (!tdax_on() || (flags & AT_REMOVEDIR))
		return tdax_real.unlinkat(dirfd, path, flags);
	return do_unlink(dirfd, path, flags);
}
