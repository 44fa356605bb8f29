/*
 * coherent_ops -- coherent mode's entry per operation (coherent.h): the
 * hooks decode a call on a managed descriptor and hand it here. A write
 * goes to the kernel (the page cache stays coherent) and, when its range is
 * upgraded, into the log; a truncate is a record too (coherent.c); another
 * change of size or layout makes the next sync real, and one that would
 * leave records to be replayed over it checkpoints first.
 */
#define _GNU_SOURCE
#include "preload/landing.h"
#include "preload/checkpoint.h"
#include "preload/coherent.h"
#include "core/log.h"
#include "core/sys.h"
#include "preload/mode.h"
#include "preload/tracking.h"
#include "core/testaid.h"
#include "core/trace.h"
#include "core/util.h"
#include "preload/writeback.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A write whose place tdax does not know went to the kernel. */
static void unlogged(const struct tdax_fd *e)
{
	tdax_coherent_unlogged(e, 0, 0, true);
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

/* A sync (fsync, fdatasync, an O_SYNC write) of a managed descriptor. */
static int sync_(int fd, const struct tdax_fd *e, bool datasync)
{
	int r = tdax_coherent_sync(fd, e, datasync);
	int err = errno;
	tdax_writeback_after_sync();
	errno = err;
	return r;
}

/* O_SYNC/O_DSYNC (or RWF_SYNC/RWF_DSYNC): the write is complete only once
 * its data is durable. */
static ssize_t finish_write(int fd, const struct tdax_fd *e, ssize_t r, bool dsync, bool sync)
{
	if (r > 0 && (dsync || sync || (e->flags & (TDAX_FD_DSYNC | TDAX_FD_SYNC))) &&
	    sync_(fd, e, !(sync || (e->flags & TDAX_FD_SYNC))) != 0)
		return -1;
	return r;
}

/* Where a write at the file position of fd is expected to land: where the
 * descriptor's last write ended or lseek() put it; at the end (at_end:
 * O_APPEND), at least the size tdax last saw. */
static uint64_t estimate(int fd, const struct tdax_file_rt *rt, bool at_end)
{
	uint64_t est = atomic_load_explicit(&tdax_fds[fd].pos, memory_order_relaxed);
	uint64_t seen = atomic_load_explicit(&rt->size_seen, memory_order_relaxed);
	return at_end && seen > est ? seen : est;
}

/* This thread is inside positional(), holding its file's position lock. */
static __thread int in_positional TDAX_TLS;

/*
 * A cold write at the file position: its range is not logged, so its exact
 * offset matters only to the policy, which takes an estimate (where this
 * descriptor's last write ended or lseek() put it; for O_APPEND, at least
 * the size tdax last saw). No position lock, no lseek: the write costs the
 * kernel's write and the policy's bookkeeping. It is not logged, so the
 * file is uncovered and its next sync is real. If the range became logged
 * meanwhile, the same holds: only a logged write that knows its offset
 * exactly is ever a record.
 */
static ssize_t cold(int fd, const struct tdax_fd *e, const struct iovec *iov, int n, int rwf,
		    uint64_t est)
{
	tdax_coherent_cold_begin(e);
	tdax_landing_forget(e->file_plus1 - 1);
	ssize_t r = tdax_mode_real_write(fd, iov, n, -1, rwf);
	int err = errno;
	if (r > 0) {
		atomic_store_explicit(&tdax_fds[fd].pos, est + (uint64_t)r, memory_order_relaxed);
		if (rwf & ~RWF_UNDERSTOOD)
			passed_through(e);
		else
			tdax_coherent_after_write(e, est, NULL, 0, (size_t)r, true);
		tdax_writeback_ensure();
	}
	tdax_coherent_cold_end(e);
	errno = err;
	return r;
}

#ifdef TDAX_TEST_BUILD
/* Test aid (src/core/testaid.h): while the file TDAX_TEST_PAUSE_IF names
 * exists, a logged write at the file position waits 100 ms between the
 * real write and the read-back of its offset: the window a cold write of
 * another thread can fall into. */
static void pause_before_read_back(void)
{
	const char *flag = TDAX_TEST_ENV("PAUSE_IF");
	if (flag && access(flag, F_OK) == 0)
		usleep(100000);
}
#endif

#ifdef TDAX_TEST_BUILD
/* Test aid: every place landing.h knows is checked against the kernel's. */
static void check_known(int fd, off_t end)
{
	if (!tdax_landing_blind && TDAX_REAL(lseek)(fd, 0, SEEK_CUR) != end) {
		static const char m[] = "tdax: a write's known place is not where the kernel put it\n";
		tdax_syscall(SYS_write, 2, m, sizeof(m) - 1);
		abort();
	}
}
#endif

/*
 * A write at the file position (write, writev, O_APPEND): the kernel picks
 * the offset. Where the range is logged, tdax writers of one file take
 * turns and the offset is read back from the position the write left (and
 * trusted only if no cold write ran meanwhile, coherent.h) -- unless where
 * it lands is known (landing.h). Through a twin (O_SYNC,
 * O_DSYNC), the application's descriptor keeps the position: read it,
 * write there (or at the end, the twin has O_APPEND too), move it on.
 */
static ssize_t positional(int fd, const struct tdax_fd *e, const struct iovec *iov, int n, int rwf)
{
	uint32_t idx = e->file_plus1 - 1;
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	int wfd = e->twin_plus1 ? tdax_twin_fd(e->twin_plus1) : fd;
	if (in_positional) {
		/* A signal handler interrupted this thread's own positional
		 * write: the lock is ours already. The kernel's write, unlogged. */
		tdax_landing_forget(idx);
		ssize_t r = tdax_mode_real_write(fd, iov, n, -1, rwf);
		if (r > 0)
			unlogged(e);
		return r;
	}
	bool at_end = (rwf & RWF_APPEND) || ((e->flags & TDAX_FD_APPEND) && !(rwf & RWF_NOAPPEND));
	if (!e->twin_plus1) {
		uint64_t est = estimate(fd, rt, at_end);
		/* Tracked here, where it is expected to land: a write to a
		 * range that is not logged needs nothing more of the policy. */
		if ((e->flags & TDAX_FD_NOLOG) || atomic_load_explicit(&rt->unmanaged, memory_order_relaxed) ||
		    !tdax_tracking_write(idx, e->gen, est, tdax_iov_bytes(iov, n)))
			return cold(fd, e, iov, n, rwf, est);
	}
	tdax_coherent_write_begin(e);
	in_positional = 1;
	tdax_pidlock_acquire(&rt->lock);
	struct tdax_cold_mark mark = tdax_coherent_cold_look(e);
	/* A write of this descriptor (not through a twin, and with no flag
	 * that might move it elsewhere) keeps where the next one lands known. */
	bool keeps = !e->twin_plus1 && !(rwf & ~RWF_UNDERSTOOD);
	struct tdax_landing_look look;
	if (keeps)
		tdax_landing_look(fd, e, rt, at_end, &look);
	else
		tdax_landing_forget(idx);
	ssize_t r;
	off_t end = -1;
	if (e->twin_plus1 && !at_end) {
		off_t pos = TDAX_REAL(lseek)(fd, 0, SEEK_CUR);
		r = pos < 0 ? -1 : tdax_mode_real_write(wfd, iov, n, pos, rwf);
		if (r > 0 && TDAX_REAL(lseek)(fd, pos + r, SEEK_SET) >= 0)
			end = pos + r;
	} else {
		r = tdax_mode_real_write(wfd, iov, n, -1, rwf);
#ifdef TDAX_TEST_BUILD
		pause_before_read_back();
#endif
		if (r > 0 && keeps)
			end = tdax_landing_next(e, &look, (size_t)r);
#ifdef TDAX_TEST_BUILD
		if (end >= 0)
			check_known(fd, end);
#endif
		if (end < 0 && r > 0) {
			end = TDAX_REAL(lseek)(wfd, 0, SEEK_CUR);
			if (keeps && end >= 0 &&
			    !tdax_landing_learned(e, rt, &look, (uint64_t)end, (size_t)r,
						  tdax_coherent_cold_none_since(e, mark)))
				tdax_coherent_uncover(idx, TDAX_FB_UNSEEN_WRITE);
		}
		if (e->twin_plus1 && end >= 0)
			TDAX_REAL(lseek)(fd, end, SEEK_SET);
	}
	int err = errno;
	bool alone = tdax_coherent_cold_none_since(e, mark);
	tdax_pidlock_release(&rt->lock);
	in_positional = 0;
	if (r > 0) {
		if (end >= 0)
			atomic_store_explicit(&tdax_fds[fd].pos, (uint64_t)end, memory_order_relaxed);
		if (rwf & ~RWF_UNDERSTOOD)
			passed_through(e);
		else if (end >= r && alone)
			tdax_coherent_after_write(e, (uint64_t)(end - r), iov, n, (size_t)r, !e->twin_plus1);
		else
			unlogged(e);
		tdax_writeback_ensure();
	}
	tdax_coherent_write_end(e);
	errno = err;
	return r;
}

static ssize_t at_offset(int fd, const struct tdax_fd *e, const struct iovec *iov, int n, off_t off,
			 int rwf)
{
	ssize_t r;
	int sync_flags = rwf & (RWF_DSYNC | RWF_SYNC);
	rwf &= ~sync_flags;
	tdax_coherent_write_begin(e);
	tdax_landing_forget(e->file_plus1 - 1);
	r = tdax_mode_real_write(e->twin_plus1 ? tdax_twin_fd(e->twin_plus1) : fd, iov, n, off, rwf);
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
			tdax_coherent_after_write(e, (uint64_t)off, iov, n, (size_t)r, false);
		tdax_writeback_ensure();
	}
	tdax_coherent_write_end(e);
	errno = err;
	return finish_write(fd, e, r, sync_flags & RWF_DSYNC, sync_flags & RWF_SYNC);
}

/*
 * The hooks' own real call (mode.h): a write to a range that is not
 * logged, through a descriptor of no twin, flag or other care -- a cold
 * write at the file position, or one at an offset, whose only bookkeeping
 * is the policy's count (taken before) and the file's uncovered mark.
 */
static bool kernel_before(int fd, const struct tdax_fd *e, off_t off, size_t len, uint64_t *at)
{
	const struct tdax_file_rt *rt = tdax_rt_of(e->file_plus1 - 1);
	/* A file with records is likely written where it is logged: its
	 * writes go the mode's way without this look first (a logged write
	 * paid ~150 instructions for it). */
	if (e->twin_plus1 || (e->flags & (TDAX_FD_NOLOG | TDAX_FD_DSYNC | TDAX_FD_SYNC)) || in_positional ||
	    atomic_load_explicit(&rt->unmanaged, memory_order_relaxed) ||
	    atomic_load_explicit(&rt->first_log_ns, memory_order_relaxed))
		return false;
	if (off >= 0) {
		if (e->flags & TDAX_FD_APPEND)
			return false; /* Linux puts it at the end, not at off */
		*at = (uint64_t)off;
	} else {
		*at = estimate(fd, rt, e->flags & TDAX_FD_APPEND);
	}
	if (!tdax_tracking_cold(e->file_plus1 - 1, e->gen, *at, len))
		return false;
	if (off < 0)
		tdax_coherent_cold_begin(e);
	else
		tdax_coherent_write_begin(e);
	tdax_landing_forget(e->file_plus1 - 1);
	return true;
}

static ssize_t kernel_after(int fd, const struct tdax_fd *e, off_t off, uint64_t at, ssize_t r)
{
	int err = errno;
	if (r > 0) {
		if (off < 0)
			atomic_store_explicit(&tdax_fds[fd].pos, at + (uint64_t)r, memory_order_relaxed);
		tdax_coherent_unlogged(e, at, (size_t)r, false);
		tdax_writeback_ensure();
	}
	if (off < 0)
		tdax_coherent_cold_end(e);
	else
		tdax_coherent_write_end(e);
	errno = err;
	return r;
}

ssize_t tdax_coherent_write(int fd, const struct tdax_fd *e, const struct iovec *iov, int n, off_t off,
			    int rwf)
{
	if (off != -1)
		return at_offset(fd, e, iov, n, off, rwf);
	ssize_t r = positional(fd, e, iov, n, rwf & ~(RWF_DSYNC | RWF_SYNC));
	return finish_write(fd, e, r, rwf & RWF_DSYNC, rwf & RWF_SYNC);
}

/* After a change of size or layout by the kernel: the next sync is real. */
void tdax_coherent_changed(int fd, const struct tdax_fd *e, enum tdax_fallback why)
{
	uint32_t idx = e->file_plus1 - 1;
	uint64_t size;
	if (tdax_file_size(fd, &size) == 0)
		atomic_store(&tdax_rt_of(idx)->size_seen, size);
	tdax_coherent_uncover(idx, why);
}

/*
 * Before a change no record may be replayed over (a hole, a collapse): the
 * real sync that writes the file's records back and
 * releases them -- if it may have any. A file with no record, none to
 * write again and no write in flight has nothing to resurrect: no sync
 * (a truncate loop of a file that is never synced stays as fast as the
 * kernel's). A write that starts after the look and lands before the
 * change is as concurrent as the kernel makes it; its record is released
 * by the next sync, which the change makes a real one.
 */
static int checkpoint_before(int fd, const struct tdax_fd *e)
{
	uint32_t idx = e->file_plus1 - 1;
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	if (!atomic_load(&rt->first_log_ns) && !atomic_load(&rt->rewrite) &&
	    !atomic_load(&rt->inflight))
		return 0;
	tdax_count(TDAX_ST_CHECKPOINTS, 1);
	return tdax_coherent_checkpoint_fd(fd, idx, e->gen, true);
}

int tdax_coherent_ftruncate(int fd, const struct tdax_fd *e, off_t len)
{
	struct tdax_meta_mark m = tdax_coherent_meta_look(e->file_plus1 - 1);
	int r = TDAX_REAL(ftruncate)(fd, len);
	int err = errno;
	if (r == 0 && !(e->flags & TDAX_FD_NOLOG))
		tdax_coherent_truncated(e->file_plus1 - 1, e->gen, (uint64_t)len, m);
	else
		tdax_coherent_changed(fd, e, TDAX_FB_METADATA);
	errno = err;
	return r;
}

int tdax_coherent_fallocate(int fd, const struct tdax_fd *e, int mode, off_t off, off_t len)
{
	uint32_t idx = e->file_plus1 - 1;
	int r, err;
	if (mode == FALLOC_FL_KEEP_SIZE) {
		/* Blocks beyond what the file holds: no byte, no size changes. */
		return TDAX_REAL(fallocate)(fd, mode, off, len);
	}
	if (tdax_falloc_is_record(mode) && !(e->flags & TDAX_FD_NOLOG)) {
		struct tdax_meta_mark m = tdax_coherent_meta_look(idx);
		r = TDAX_REAL(fallocate)(fd, mode, off, len);
		err = errno;
		if (r == 0)
			tdax_coherent_fallocated(fd, idx, e->gen, mode, (uint64_t)off, (uint64_t)len, m);
		errno = err;
		return r;
	}
	/* Any other mode changes the size (plain allocation) or bytes or
	 * moves them (collapse, insert, unshare, and any mode to come):
	 * records written before must not be replayed over the result. */
	if (mode && checkpoint_before(fd, e) != 0)
		return -1;
	r = TDAX_REAL(fallocate)(fd, mode, off, len);
	err = errno;
	tdax_coherent_changed(fd, e, TDAX_FB_METADATA);
	errno = err;
	return r;
}

/* A path tdax cannot follow reaches the file: checkpoint it and keep it
 * on the kernel path from now on. */
static void lost_sight(int fd, const struct tdax_fd *e, enum tdax_fallback why)
{
	tdax_coherent_unmanage(fd, e->file_plus1 - 1, e->gen, why);
}

static void attrs_changed(int fd, const struct tdax_fd *e)
{
	(void)fd;
	tdax_coherent_attrs_changed(e->file_plus1 - 1);
}

const struct tdax_mode_ops tdax_coherent_mode = {
	.name = "coherent",
	.write = tdax_coherent_write,
	.kernel_before = kernel_before,
	.kernel_after = kernel_after,
	.sync = sync_,
	.ftruncate = tdax_coherent_ftruncate,
	.fallocate = tdax_coherent_fallocate,
	.changed = tdax_coherent_changed,
	.lost_sight = lost_sight,
	.attrs_changed = attrs_changed,
};
