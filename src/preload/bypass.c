/*
 * bypass -- bypass mode's entries (bypass.h): promotion, the deferred
 * write, the sync answered with a fence; every other entry demotes the
 * file (promoted.h) and is coherent mode's.
 */
#define _GNU_SOURCE
#include "preload/bypass.h"
#include "core/sys.h"
#include "core/trace.h"
#include "core/util.h"
#include "preload/coherent.h"
#include "preload/fault.h"
#include "preload/mapped.h"
#include "preload/views.h"
#include "preload/lease.h"
#include "preload/promoted.h"
#include "preload/selection.h"
#include "preload/tracking.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RWF_NOAPPEND
#define RWF_NOAPPEND 0x20
#endif
/* pwritev2 flags a deferred write honours: where the bytes go, and when
 * the call may return (every record is durable when written). Any other
 * flag demotes the file and goes to the kernel with the write. */
#define DEFERRABLE (RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT | RWF_APPEND | RWF_NOAPPEND)

/* The most one write() moves (Linux's MAX_RW_COUNT). */
#define MAX_RW ((size_t)0x7ffff000)

/* Another descriptor of this process names fd's file (a dup shares the
 * open file's position, which tdax keeps while the file is promoted) --
 * registered or not: a dup made before the file was registered stays in
 * unregistered mode, its writes the kernel's, at the kernel's end of the
 * file (a promoted file's lies in the device), and the device's blocks
 * would be written over them. */
static bool other_descriptor(int fd, const struct tdax_fd *e)
{
	int i = tdax_fd_naming(e->dev, e->ino, 0);
	if (i == fd)
		i = tdax_fd_naming(e->dev, e->ino, fd + 1);
	return i >= 0;
}

/*
 * After a sync of fd that went well: promote its file if every change of
 * it is logged or on flash, the selection takes it (selection.h) and this
 * process holds a write lease on its only open file (b locked, not
 * promoted, no real sync running). The lease is looked at
 * again after the file is marked promoted: a break that came before then
 * let the lease go, one after it waits for the write-back thread
 * (lease.c) -- each side reads what the other stored first.
 */
static void consider(struct tdax_promoted *b, int fd, const struct tdax_fd *e)
{
	uint32_t idx = e->file_plus1 - 1;
	struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	struct tdax_file_rt *rt = &f->rt;
	tdax_cache_prepare();
	/* (Not through descriptor 0, 1 or 2: the C library's own streams read
	 * and write there unseen, whenever they are first used; coherent.c.) */
	if (fd <= STDERR_FILENO || b->fd >= 0 || b->syncs || tdax_promoted_frozen() || f->gen != e->gen ||
	    e->twin_plus1 ||
	    (e->flags & (TDAX_FD_DSYNC | TDAX_FD_SYNC | TDAX_FD_NOLOG)) ||
	    atomic_load(&e->lease) != TDAX_LEASE_HELD || atomic_load(&rt->uncovered) ||
	    atomic_load(&rt->unmanaged) || atomic_load(&rt->rewrite) || atomic_load(&rt->handed_on) ||
	    atomic_load(&rt->removed) ||
	    atomic_load(&rt->wb_error) || atomic_load(&rt->inflight) ||
	    atomic_load(&rt->cold_started) != atomic_load(&rt->cold_done) || other_descriptor(fd, e) ||
	    tdax_mapped_file(idx) || tdax_views_of(e->dev, e->ino) ||
	    !tdax_lease_check(fd, rt))
		return;
	if (!tdax_selection_takes(b))
		return;
	off_t pos = TDAX_REAL(lseek)(fd, 0, SEEK_CUR);
	int fl = (int)tdax_syscall(SYS_fcntl, fd, F_GETFL);
	struct statx stx;
	/* Not a sealed file: tdax's write-ins at an offset would fail there,
	 * where the application's own appends do not. */
	if (pos < 0 || fl < 0 || tdax_statx_fd(fd, STATX_SIZE, &stx) != 0 || tdax_statx_sealed(&stx))
		return;
	uint64_t size = stx.stx_size;
	if (!tdax_cache_promote(&b->cached, idx, size))
		return;
	atomic_store(&b->pos, (uint64_t)pos);
	atomic_store(&b->size, size);
	b->append = fl & O_APPEND;
	b->readable = (fl & O_ACCMODE) != O_WRONLY;
	b->gen = e->gen;
	/* Before the first record that the file lacks: any checkpoint writes
	 * the records into the file before it trusts a sync (coherent.c), and
	 * recovery knows whose they are. */
	atomic_store(&rt->deferred_since, tdax_promoted_since());
	atomic_store(&rt->deferred, tdax_pid());
	atomic_store(&rt->rewrite, 1);
	b->fd = fd;
	atomic_fetch_add(&tdax_fds_promoted, 1);
	if (atomic_load(&e->lease) != TDAX_LEASE_HELD) {
		b->fd = -1;
		atomic_fetch_sub(&tdax_fds_promoted, 1);
		atomic_store(&rt->rewrite, 0);
		atomic_store(&rt->deferred, 0);
		return;
	}
	tdax_count(TDAX_ST_PROMOTIONS, 1);
}

/*
 * A write of promoted file b through its descriptor: a record, then its
 * blocks (cache.h), no system call. Where it lands is taken (the position
 * moved, the size grown) before the copies, with single atomic steps, so
 * that a signal handler's write on this thread lands after it; a demotion
 * by such a handler meanwhile (which wrote the blocks in before this
 * write's copy, and drops them at the lock's last release) is seen after
 * the copies, and the bytes then go to the file too.
 */
static ssize_t deferred(struct tdax_promoted *b, int fd, const struct tdax_fd *e, const struct iovec *iov, int n,
			off_t off, int rwf)
{
	uint32_t idx = e->file_plus1 - 1;
	size_t len = tdax_iov_bytes(iov, n);
	if (len > MAX_RW)
		len = MAX_RW;
	if (len == 0)
		return 0;
	bool at_end = (b->append && !(rwf & RWF_NOAPPEND)) || (rwf & RWF_APPEND);
	uint64_t at, was; /* where it lands; the size before it */
	if (at_end) {
		at = was = atomic_fetch_add(&b->size, len);
		if (off < 0)
			atomic_store(&b->pos, at + len);
	} else if (off < 0) {
		at = atomic_fetch_add(&b->pos, len);
		was = tdax_atomic_max(&b->size, at + len);
	} else {
		at = (uint64_t)off;
		was = tdax_atomic_max(&b->size, at + len);
	}
	uint32_t epoch = b->epoch;
	/* An append starts at the end or past it; a write over bytes the
	 * file has is in place, even one that ends at its end (a rewrite of
	 * the whole file from 0). */
	tdax_selection_wrote(b, len, at >= was);
	atomic_store(&tdax_rt_of(idx)->rewrite, 1); /* (a checkpoint may have run before the promotion) */
	tdax_tracking_write(idx, e->gen, at, len);
	if (!tdax_coherent_log_only(e, at, iov, n, len)) {
		/* The log is full: the file's records go into it, then this
		 * write, which no record covers -- the next sync is real. */
		if (b->fd >= 0)
			tdax_promoted_demote(b, idx, -1, TDAX_ST_DEMOTED_FULL);
		ssize_t w = TDAX_REAL(pwritev)(fd, iov, n, (off_t)at);
		int err = errno;
		tdax_coherent_uncover(idx, TDAX_FB_LOG_FULL);
		errno = err;
		return w < 0 ? -1 : (ssize_t)len;
	}
	if (b->epoch == epoch && tdax_cache_write(&b->cached, fd, at, iov, n, len) != 0)
		return -1;
	if (b->epoch != epoch && TDAX_REAL(pwritev)(fd, iov, n, (off_t)at) < 0)
		return -1;
	if (off < 0)
		atomic_store_explicit(&tdax_fds[fd].pos, at + len, memory_order_relaxed);
	tdax_count(TDAX_ST_DEFERRED_WRITES, 1);
	return (ssize_t)len;
}

static ssize_t write_(int fd, const struct tdax_fd *e, const struct iovec *iov, int n, off_t off, int rwf)
{
	struct tdax_promoted *b = tdax_promoted_of(e);
	if (!b)
		return tdax_coherent_write(fd, e, iov, n, off, rwf);
	tdax_promoted_lock(b);
	ssize_t r;
	const struct tdax_file_rt *rt = tdax_rt_of(e->file_plus1 - 1);
	/* (Bytes that are not the caller's memory: the kernel's EFAULT, or
	 * its short write, after a demotion.) */
	if (b->fd == fd && !(rwf & ~DEFERRABLE) && (!(rwf & RWF_SYNC) || !atomic_load(&rt->attrs_changed)) &&
	    tdax_fault_readable(iov, n)) {
		r = deferred(b, fd, e, iov, n, off, rwf);
	} else {
		if (b->fd >= 0)
			tdax_promoted_demote(b, e->file_plus1 - 1, -1, TDAX_ST_DEMOTED_KERNEL);
		r = tdax_coherent_write(fd, e, iov, n, off, rwf);
		if (r > 0)
			tdax_selection_wrote(b, (uint64_t)r, ((e->flags & TDAX_FD_APPEND) && !(rwf & RWF_NOAPPEND)) ||
							      (rwf & RWF_APPEND));
	}
	int err = errno;
	tdax_promoted_unlock(b);
	errno = err;
	return r;
}

/* A sync of a promoted file: everything it wrote is durable in the device
 * (each record was persisted when written), and no other open of the file
 * exists (the lease): a fence. */
static bool light(struct tdax_promoted *b, int fd, const struct tdax_fd *e, bool datasync, uint64_t now)
{
	uint32_t idx = e->file_plus1 - 1;
	const struct tdax_file_rt *rt = tdax_rt_of(idx);
	if (b->fd != fd || atomic_load(&e->lease) != TDAX_LEASE_HELD || atomic_load(&rt->wb_error) ||
	    (!datasync && atomic_load(&rt->attrs_changed)) || atomic_load(&tdax_rt.lost))
		return false;
	/* The policy hears of it later (tracking.h): its work per sync cost
	 * more than the fence. */
	if (tdax_tracking_sync_later(idx)) {
		if (!b->light_n++)
			b->light_first_ns = now;
		b->light_last_ns = now;
		if (b->light_n >= TDAX_LIGHT_SYNCS_MAX)
			tdax_promoted_catch_up(b, idx);
	} else {
		tdax_promoted_catch_up(b, idx);
		tdax_tracking_sync(idx, e->gen);
	}
	tdax_drain(tdax_rt.dev, 0);
	tdax_count_sync(true);
	if (tdax_tracing)
		tdax_trace_event(TDAX_TR_SYNC, idx, 0, 0, datasync);
	return true;
}

static int sync_(int fd, const struct tdax_fd *e, bool datasync)
{
	struct tdax_promoted *b = tdax_promoted_of(e);
	if (!b)
		return tdax_coherent_mode.sync(fd, e, datasync);
	tdax_promoted_lock(b);
	uint64_t now = tdax_coarse_ns();
	tdax_selection_synced(b, now);
	if (light(b, fd, e, datasync, now)) {
		tdax_promoted_unlock(b);
		return 0;
	}
	if (b->fd >= 0)
		tdax_promoted_demote(b, e->file_plus1 - 1, -1, TDAX_ST_DEMOTED_KERNEL);
	b->syncs++;
	tdax_promoted_unlock(b);
	int r = tdax_coherent_mode.sync(fd, e, datasync);
	int err = errno;
	tdax_promoted_lock(b);
	b->syncs--;
	if (r == 0)
		consider(b, fd, e);
	tdax_promoted_unlock(b);
	errno = err;
	return r;
}

/* The other entries: coherent mode's, on the file demoted first, under
 * the lock (so that no promotion comes in between). */
static int ftruncate_(int fd, const struct tdax_fd *e, off_t len)
{
	struct tdax_promoted *b = tdax_promoted_of(e);
	if (!b)
		return tdax_coherent_ftruncate(fd, e, len);
	tdax_promoted_lock(b);
	if (b->fd >= 0)
		tdax_promoted_demote(b, e->file_plus1 - 1, -1, TDAX_ST_DEMOTED_KERNEL);
	int r = tdax_coherent_ftruncate(fd, e, len);
	int err = errno;
	tdax_promoted_unlock(b);
	errno = err;
	return r;
}

static int fallocate_(int fd, const struct tdax_fd *e, int mode, off_t off, off_t len)
{
	struct tdax_promoted *b = tdax_promoted_of(e);
	if (!b)
		return tdax_coherent_fallocate(fd, e, mode, off, len);
	tdax_promoted_lock(b);
	if (b->fd >= 0)
		tdax_promoted_demote(b, e->file_plus1 - 1, -1, TDAX_ST_DEMOTED_KERNEL);
	int r = tdax_coherent_fallocate(fd, e, mode, off, len);
	int err = errno;
	tdax_promoted_unlock(b);
	errno = err;
	return r;
}

static void changed(int fd, const struct tdax_fd *e, enum tdax_fallback why)
{
	tdax_promoted_settle_fd(fd);
	tdax_coherent_mode.changed(fd, e, why);
}

static void lost_sight(int fd, const struct tdax_fd *e, enum tdax_fallback why)
{
	struct tdax_promoted *b = tdax_promoted_of(e);
	if (b) {
		tdax_promoted_lock(b);
		if (b->fd >= 0)
			tdax_promoted_demote(b, e->file_plus1 - 1, -1, TDAX_ST_DEMOTED_KERNEL);
		b->syncs++; /* (it checkpoints) */
		tdax_promoted_unlock(b);
	}
	tdax_coherent_mode.lost_sight(fd, e, why);
	if (b)
		tdax_promoted_checkpoint_end(e->file_plus1 - 1);
}

static void attrs_changed(int fd, const struct tdax_fd *e)
{
	tdax_coherent_mode.attrs_changed(fd, e);
}

const struct tdax_mode_ops tdax_bypass_mode = {
	.name = "bypass",
	.write = write_,
	.sync = sync_,
	.ftruncate = ftruncate_,
	.fallocate = fallocate_,
	.changed = changed,
	.lost_sight = lost_sight,
	.attrs_changed = attrs_changed,
};
