/*
 * promoted -- the promoted files of this process (promoted.h): their
 * lock, their state, and demotion.
 */
#define _GNU_SOURCE
#include "preload/promoted.h"
#include "core/recover.h"
#include "core/shadow.h"
#include "core/sys.h"
#include "core/trace.h"
#include "core/util.h"
#include "preload/landing.h"
#include "preload/coherent.h"
#include "preload/fault.h"
#include "preload/lease.h"
#include "preload/state.h"
#include "preload/tracking.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static struct tdax_promoted *files;
static uint32_t nfiles;
static _Atomic bool frozen; /* a fork is under way: no promotion */
static __thread uint64_t my_tid TDAX_TLS;

static uint64_t tid(void)
{
	if (!my_tid)
		my_tid = (uint64_t)tdax_syscall(SYS_gettid);
	return my_tid;
}

/* The file's lock: a thread takes it again freely (a signal handler
 * interrupting its own thread's write). Held for a memory copy, a
 * promotion or a demotion: short, so waiters spin, then yield. */
void tdax_promoted_lock(struct tdax_promoted *b)
{
	uint64_t me = tid();
	if (atomic_load_explicit(&b->owner, memory_order_relaxed) == me) {
		b->depth++;
		return;
	}
	for (unsigned spins = 0;; spins++) {
		uint64_t none = 0;
		if (atomic_compare_exchange_weak_explicit(&b->owner, &none, me, memory_order_acquire,
							  memory_order_relaxed))
			break;
		if (spins > 64)
			sched_yield();
	}
	b->depth = 1;
}

/* At the last release, a demotion's blocks go (cache.h: not before, so
 * that no write of this thread is still copying into one). */
void tdax_promoted_unlock(struct tdax_promoted *b)
{
	if (b->depth > 1) {
		b->depth--;
		return;
	}
	if (b->cached.drop)
		tdax_cache_drop(&b->cached);
	b->depth = 0;
	atomic_store_explicit(&b->owner, 0, memory_order_release);
}

/* This process's start time (util.h): with its pid, what an entry's
 * rt.deferred_since names. */
static uint64_t self_start;

uint64_t tdax_promoted_since(void)
{
	return self_start;
}

bool tdax_promoted_init(uint32_t max_files)
{
	self_start = tdax_pid_start((uint32_t)tdax_syscall(SYS_getpid));
	files = calloc(max_files, sizeof(*files));
	if (!files)
		return false;
	for (uint32_t i = 0; i < max_files; i++)
		files[i].fd = -1;
	nfiles = max_files;
	return true;
}

uint32_t tdax_promoted_count(void)
{
	return files ? nfiles : 0;
}

struct tdax_promoted *tdax_promoted_at(uint32_t idx)
{
	return &files[idx];
}

struct tdax_promoted *tdax_promoted_of(const struct tdax_fd *e)
{
	if (!files || e->file_plus1 == TDAX_FD_UNREGISTERED || e->file_plus1 > nfiles)
		return NULL;
	return &files[e->file_plus1 - 1];
}

void tdax_promoted_catch_up(struct tdax_promoted *b, uint32_t idx)
{
	if (!b->light_n)
		return;
	tdax_tracking_synced(idx, b->gen, b->light_n, b->light_first_ns, b->light_last_ns);
	b->light_n = 0;
}

/*
 * Demote b (locked, promoted): write its dirty blocks into the file
 * through fd_here (a number of this thread's table for the same open file;
 * -1: reach the application's), put the position back, and go on
 * coherent. A failure to write them keeps the records (rt.rewrite: every
 * checkpoint writes them in again) and is the next sync's error, as a
 * failed write-back is.
 */
int tdax_promoted_demote(struct tdax_promoted *b, uint32_t idx, int fd_here, enum tdax_stat why)
{
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	tdax_landing_resize_begin(); /* (the file's end moves behind coherent mode's back) */
	tdax_promoted_catch_up(b, idx); /* (coherent mode's syncs follow: the policy decides on them) */
	int use = fd_here >= 0 ? fd_here : tdax_lease_reach(b->fd);
	int rc = use < 0 ? -1 : tdax_cache_write_back(&b->cached, use);
	int err = use < 0 ? EBADF : errno;
	if (use >= 0 && tdax_syscall(SYS_lseek, use, (off_t)atomic_load(&b->pos), SEEK_SET) < 0 && rc == 0) {
		rc = -1;
		err = errno;
	}
	if (use >= 0 && use != fd_here && use != b->fd)
		tdax_syscall(SYS_close, use);
	atomic_store(&rt->size_seen, atomic_load(&b->size));
	atomic_store(&rt->deferred, 0);
	if (rc == 0) {
		atomic_store(&rt->rewrite, 0);
	} else {
		int32_t none = 0;
		atomic_compare_exchange_strong(&rt->wb_error, &none, err);
		tdax_fallback(TDAX_FB_WB_ERROR, tdax_file_at(tdax_rt.dev, idx)->path);
		/* (A demotion that went well changes nothing a trace speaks of:
		 * the file stays covered, its next sync may be lightweight.) */
		if (tdax_tracing)
			tdax_trace_event(TDAX_TR_META, idx, 0, 0, TDAX_FB_WB_ERROR);
	}
	b->cached.drop = true; /* (even if the write-back failed: the records say what the file lacks) */
	b->fd = -1;
	b->epoch++;
	atomic_fetch_sub(&tdax_fds_promoted, 1);
	tdax_count(TDAX_ST_DEMOTIONS, 1);
	tdax_count(why, 1);
	tdax_landing_resize_end();
	return rc;
}

/* iovec entries of a read served (more: demoted and read by the kernel). */
#define READ_IOV_MAX 64

/* The promoted state of fd, locked, if fd is its file's promoted
 * descriptor; NULL otherwise. */
static struct tdax_promoted *locked_if_promoted(int fd)
{
	if (tdax_fds_private)
		return NULL; /* the write-back thread: its numbers are not the application's */
	const struct tdax_fd *e = tdax_fd_get(fd);
	struct tdax_promoted *b = e ? tdax_promoted_of(e) : NULL;
	if (!b)
		return NULL;
	tdax_promoted_lock(b);
	if (b->fd == fd)
		return b;
	tdax_promoted_unlock(b);
	return NULL;
}

bool tdax_promoted_read_slow(int fd, const struct iovec *iov, int n, int64_t off, ssize_t *res)
{
	if (n < 0 || n > READ_IOV_MAX)
		return false;
	struct tdax_promoted *b = locked_if_promoted(fd);
	if (!b)
		return false;
	if (!b->readable || !tdax_fault_iovec_readable(iov, n)) {
		tdax_promoted_unlock(b);
		return false;
	}
	uint64_t at = off < 0 ? atomic_load(&b->pos) : (uint64_t)off;
	uint64_t size = atomic_load(&b->size);
	size_t want = tdax_iov_bytes(iov, n), len = 0;
	if (at < size)
		len = size - at < want ? (size_t)(size - at) : want;
	if (len > 0x7ffff000u)
		len = 0x7ffff000u; /* Linux's most for one read */
	/* (Buffers that are not the caller's to write: the kernel's EFAULT,
	 * after a demotion.) */
	if (!tdax_fault_writable(iov, n, len)) {
		tdax_promoted_unlock(b);
		return false;
	}
	/* From the blocks if every one is cached; else the kernel's copy of
	 * [at, at + len) (zeros beyond its end), the cached blocks over it. */
	if (!tdax_cache_read(&b->cached, at, iov, n, len)) {
		struct iovec t[READ_IOV_MAX];
		int tn = 0;
		for (size_t left = len; tn < n && left > 0; tn++) {
			t[tn] = iov[tn];
			if (t[tn].iov_len > left)
				t[tn].iov_len = left;
			left -= t[tn].iov_len;
		}
		ssize_t k = len ? tdax_syscall(SYS_preadv, fd, t, tn, (long)at, 0) : 0;
		if (k < 0) {
			int err = errno;
			tdax_promoted_unlock(b);
			errno = err;
			*res = -1;
			return true;
		}
		for (int i = 0, skip = (int)k; i < tn && (size_t)k < len; i++) {
			/* zeros past the kernel's end */
			if ((size_t)skip >= t[i].iov_len) {
				skip -= (int)t[i].iov_len;
				continue;
			}
			memset((char *)t[i].iov_base + skip, 0, t[i].iov_len - (size_t)skip);
			skip = 0;
		}
		tdax_cache_overlay(&b->cached, at, t, tn, len);
	}
	if (off < 0) {
		atomic_store(&b->pos, at + len);
		atomic_store_explicit(&tdax_fds[fd].pos, at + len, memory_order_relaxed);
	}
	tdax_promoted_unlock(b);
	*res = (ssize_t)len;
	return true;
}

bool tdax_promoted_seek_slow(int fd, off_t off, int whence, off_t *res)
{
	if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END)
		return false; /* SEEK_DATA, SEEK_HOLE: the kernel's, after a demotion */
	struct tdax_promoted *b = locked_if_promoted(fd);
	if (!b)
		return false;
	int64_t base = whence == SEEK_SET ? 0 : (int64_t)atomic_load(whence == SEEK_CUR ? &b->pos : &b->size);
	int64_t to;
	if (__builtin_add_overflow(base, (int64_t)off, &to) || to < 0) {
		tdax_promoted_unlock(b);
		errno = EINVAL;
		*res = -1;
		return true;
	}
	atomic_store(&b->pos, (uint64_t)to);
	atomic_store_explicit(&tdax_fds[fd].pos, (uint64_t)to, memory_order_relaxed);
	tdax_promoted_unlock(b);
	*res = (off_t)to;
	return true;
}

/* The size a stat of b's file (the kernel's says kernel_size) gives, and
 * the blocks of 512 bytes its deferred bytes past that end would add. */
static uint64_t size_over(const struct tdax_promoted *b, uint64_t kernel_size, uint64_t *more_blocks)
{
	uint64_t size = atomic_load(&b->size);
	*more_blocks = 0;
	if (kernel_size < size)
		*more_blocks = ((size + 4095) / 4096 - (kernel_size + 4095) / 4096) * 8;
	return size;
}

static void stat_over(const struct tdax_promoted *b, struct stat *st)
{
	uint64_t more;
	st->st_size = (off_t)size_over(b, (uint64_t)st->st_size, &more);
	st->st_blocks += (blkcnt_t)more;
}

bool tdax_promoted_fstat_slow(int fd, struct stat *st, int *res)
{
	struct tdax_promoted *b = locked_if_promoted(fd);
	if (!b)
		return false;
	*res = (int)tdax_syscall(SYS_fstat, fd, st);
	if (*res == 0)
		stat_over(b, st);
	int err = errno;
	tdax_promoted_unlock(b);
	errno = err;
	return true;
}

/* The promoted file that is inode (dev, ino), locked; NULL if none is. */
static struct tdax_promoted *locked_inode(uint64_t dev, uint64_t ino)
{
	for (uint32_t i = 0; i < nfiles && atomic_load(&tdax_fds_promoted); i++) {
		int fd = files[i].fd;
		if (fd < 0 || tdax_fds[fd].dev != dev || tdax_fds[fd].ino != ino)
			continue;
		tdax_promoted_lock(&files[i]);
		fd = files[i].fd;
		if (fd >= 0 && tdax_fds[fd].dev == dev && tdax_fds[fd].ino == ino)
			return &files[i];
		tdax_promoted_unlock(&files[i]);
	}
	return NULL;
}

/*
 * A stat by name: the kernel's answer says which file the name leads to;
 * if this process promoted it, the kernel is asked again under the file's
 * lock (a demotion between the two would have changed what it says) and
 * tdax's size laid over its answer, as for fstat.
 */
bool tdax_promoted_stat_at_slow(int dirfd, const char *path, int flags, struct stat *st, int *res)
{
	if (!files || tdax_fds_private)
		return false;
	*res = (int)tdax_syscall(SYS_newfstatat, dirfd, path, st, flags);
	struct tdax_promoted *b = *res == 0 && S_ISREG(st->st_mode)
		? locked_inode((uint64_t)st->st_dev, (uint64_t)st->st_ino) : NULL;
	if (!b)
		return true;
	uint64_t dev = (uint64_t)st->st_dev, ino = (uint64_t)st->st_ino;
	*res = (int)tdax_syscall(SYS_newfstatat, dirfd, path, st, flags);
	if (*res == 0 && (uint64_t)st->st_dev == dev && (uint64_t)st->st_ino == ino)
		stat_over(b, st);
	int err = errno;
	tdax_promoted_unlock(b);
	errno = err;
	return true;
}

bool tdax_promoted_statx_slow(int dirfd, const char *path, int flags, unsigned mask, struct statx *stx,
			      int *res)
{
	if (!files || tdax_fds_private)
		return false;
	*res = (int)tdax_syscall(SYS_statx, dirfd, path, flags, mask, stx);
	struct tdax_promoted *b = *res == 0 && S_ISREG(stx->stx_mode)
		? locked_inode(makedev(stx->stx_dev_major, stx->stx_dev_minor), stx->stx_ino) : NULL;
	if (!b)
		return true;
	uint64_t ino = stx->stx_ino;
	*res = (int)tdax_syscall(SYS_statx, dirfd, path, flags, mask, stx);
	if (*res == 0 && stx->stx_ino == ino) {
		uint64_t more, size = size_over(b, stx->stx_size, &more);
		if (stx->stx_mask & STATX_SIZE)
			stx->stx_size = size;
		if (stx->stx_mask & STATX_BLOCKS)
			stx->stx_blocks += more;
	}
	int err = errno;
	tdax_promoted_unlock(b);
	errno = err;
	return true;
}

static void settle(struct tdax_promoted *b, int fd_here)
{
	TDAX_NO_CANCEL; /* (the demotion writes and syncs under the file's lock) */
	tdax_promoted_lock(b);
	if (b->fd >= 0)
		tdax_promoted_demote(b, (uint32_t)(b - files), fd_here, TDAX_ST_DEMOTED_SEEN);
	tdax_promoted_unlock(b);
}

void tdax_promoted_demote_fd_slow(int fd)
{
	const struct tdax_fd *e = tdax_fd_get(fd);
	struct tdax_promoted *b = e ? tdax_promoted_of(e) : NULL;
	if (b && b->fd >= 0)
		settle(b, -1);
}

void tdax_promoted_demote_at_slow(int dirfd, const char *path, int flags)
{
	struct stat st;
	if (!files || tdax_syscall(SYS_newfstatat, dirfd, path, &st, flags & AT_SYMLINK_NOFOLLOW) != 0 ||
	    !S_ISREG(st.st_mode))
		return;
	for (uint32_t i = 0; i < nfiles && atomic_load(&tdax_fds_promoted); i++) {
		int fd = files[i].fd;
		if (fd >= 0 && tdax_fds[fd].dev == (uint64_t)st.st_dev && tdax_fds[fd].ino == (uint64_t)st.st_ino)
			settle(&files[i], -1);
	}
}

void tdax_promoted_demote_range_slow(unsigned first, unsigned last)
{
	for (uint32_t i = 0; i < nfiles && atomic_load(&tdax_fds_promoted); i++) {
		int fd = files[i].fd;
		if (fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last)
			settle(&files[i], -1);
	}
}

void tdax_promoted_settle_all(void)
{
	for (uint32_t i = 0; i < nfiles && atomic_load(&tdax_fds_promoted); i++)
		if (files[i].fd >= 0)
			settle(&files[i], -1);
}

bool tdax_promoted_frozen(void)
{
	return atomic_load(&frozen);
}

void tdax_promoted_before_fork(void)
{
	atomic_store(&frozen, true);
	tdax_promoted_settle_all();
}

void tdax_promoted_after_fork_parent(void)
{
	atomic_store(&frozen, false);
}

void tdax_promoted_after_fork_child(void)
{
	self_start = tdax_pid_start((uint32_t)tdax_syscall(SYS_getpid));
	my_tid = 0;
	for (uint32_t i = 0; i < nfiles; i++) {
		files[i].fd = -1;
		files[i].syncs = 0;
		files[i].depth = 0;
		files[i].light_n = 0; /* (the parent's syncs: the parent tells them) */
		atomic_store(&files[i].owner, 0);
		tdax_cache_forget(&files[i].cached);
	}
	tdax_cache_after_fork_child();
	atomic_store(&tdax_fds_promoted, 0);
	atomic_store(&frozen, false);
}

bool tdax_promoted_checkpoint(uint32_t idx, int fd, int *rc)
{
	if (!files || idx >= nfiles)
		return false;
	/* The test build's durable view (core/shadow.h) copies the file at a
	 * real sync by opening it again, which breaks the lease this keeps:
	 * where it is on, the checkpoint demotes. */
	if (tdax_shadow_on())
		return false;
	struct tdax_promoted *b = &files[idx];
	tdax_promoted_lock(b);
	uint32_t gen = b->gen;
	if (b->fd < 0 || b->syncs || !tdax_coherent_is_file(fd, idx, gen)) {
		tdax_promoted_unlock(b);
		return false;
	}
	/* The snapshots first, then the blocks marked: every record up to the
	 * snapshot's has its bytes in a marked block, in the file already
	 * (written in by an eviction or a checkpoint before, or at once for
	 * want of a block), or in a block a later record rewrote. */
	struct tdax_checkpoint_snap snap;
	tdax_coherent_checkpoint_snap(idx, &snap);
	tdax_cache_flush_begin(&b->cached);
	b->syncs++; /* no promotion meanwhile (it is promoted: none is tried) */
	tdax_promoted_unlock(b);
	bool written = tdax_cache_flush_write(&b->cached, fd) == 0;
	int err = errno;
	tdax_promoted_lock(b);
	tdax_cache_flush_end(&b->cached, written);
	b->syncs--;
	tdax_promoted_unlock(b);
	if (!written) {
		errno = err;
		*rc = -1;
		return true;
	}
	*rc = tdax_coherent_checkpoint_snapped(fd, idx, gen, true, &snap, true);
	return true;
}

void tdax_promoted_checkpoint_begin(uint32_t idx, int fd)
{
	if (!files || idx >= nfiles)
		return;
	struct tdax_promoted *b = &files[idx];
	tdax_promoted_lock(b);
	if (b->fd >= 0)
		tdax_promoted_demote(b, idx, fd, TDAX_ST_DEMOTED_WRITEBACK);
	b->syncs++;
	tdax_promoted_unlock(b);
}

void tdax_promoted_checkpoint_end(uint32_t idx)
{
	if (!files || idx >= nfiles)
		return;
	struct tdax_promoted *b = &files[idx];
	tdax_promoted_lock(b);
	b->syncs--;
	tdax_promoted_unlock(b);
}

/* Evict victims v[0..n) of one file: their bytes written into it without
 * its lock (a write meanwhile keeps its block; a demotion waits for it). */
static void evict(struct tdax_cache_victim *v, uint32_t n)
{
	if (v->file >= nfiles)
		return;
	struct tdax_promoted *b = &files[v->file];
	tdax_promoted_lock(b);
	int fd = b->fd;
	tdax_cache_evict_begin(&b->cached, v, n);
	tdax_promoted_unlock(b);
	int use = fd >= 0 ? tdax_lease_reach(fd) : -1;
	bool written = tdax_cache_evict_write(&b->cached, v, n, use) == 0;
	if (use >= 0 && use != fd)
		tdax_syscall(SYS_close, use);
	tdax_promoted_lock(b);
	tdax_cache_evict_end(&b->cached, v, n, written);
	tdax_promoted_unlock(b);
}

void tdax_promoted_serve_breaks(void)
{
	int fd;
	while ((fd = tdax_lease_next_break()) >= 0) {
		const struct tdax_fd *e = tdax_fd_get(fd);
		struct tdax_promoted *b = e ? tdax_promoted_of(e) : NULL;
		if (b) {
			tdax_promoted_lock(b);
			if (b->fd == fd)
				tdax_promoted_demote(b, e->file_plus1 - 1, -1, TDAX_ST_DEMOTED_OPENED);
			tdax_promoted_unlock(b);
		}
		tdax_lease_finish_break(fd);
	}
}

/* Evictions in groups of this many victims, each group's blocks of one
 * file written in one pass of its lock. */
#define VICTIMS 32

void tdax_promoted_serve_cache(void)
{
	struct tdax_cache_victim v[VICTIMS];
	uint32_t n;
	if (!tdax_cache_serve())
		return;
	while ((n = tdax_cache_victims(v, VICTIMS)) > 0) {
		/* By file: the victims of one file together (a few files at most
		 * are promoted in one process). */
		for (uint32_t i = 0; i < n;) {
			uint32_t j = i + 1;
			for (uint32_t k = i + 1; k < n; k++)
				if (v[k].file == v[i].file) {
					struct tdax_cache_victim t = v[j];
					v[j++] = v[k];
					v[k] = t;
				}
			evict(v + i, j - i);
			i = j;
		}
	}
}
