/*
 * promoted -- the promoted files of this process (promoted.h): their
 * lock, their state, and demotion.
 */
#define _GNU_SOURCE
#include "preload/promoted.h"
#include "core/recover.h"
#include "core/sys.h"
#include "core/trace.h"
#include "core/util.h"
#include "preload/lease.h"
#include "preload/state.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

void tdax_promoted_unlock(struct tdax_promoted *b)
{
	if (--b->depth == 0)
		atomic_store_explicit(&b->owner, 0, memory_order_release);
}

bool tdax_promoted_init(uint32_t max_files)
{
	files = calloc(max_files, sizeof(*files));
	if (!files)
		return false;
	for (uint32_t i = 0; i < max_files; i++)
		files[i].fd = -1;
	nfiles = max_files;
	return true;
}

struct tdax_promoted *tdax_promoted_of(const struct tdax_fd *e)
{
	if (!files || e->file_plus1 == TDAX_FD_UNREGISTERED || e->file_plus1 > nfiles)
		return NULL;
	return &files[e->file_plus1 - 1];
}

/*
 * Demote b (locked, promoted): write its records into the file through
 * fd_here (a number of this thread's table for the same open file; -1:
 * reach the application's), put the position back, and go on coherent.
 * A failure to write them keeps them (rt.rewrite: every checkpoint tries
 * again) and is the next sync's error, as a failed write-back is.
 */
int tdax_promoted_demote(struct tdax_promoted *b, uint32_t idx, int fd_here)
{
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	int use = fd_here >= 0 ? fd_here : tdax_lease_reach(b->fd);
	int rc = use < 0 ? -1 : tdax_replay_file(tdax_rt.dev, idx, b->gen, use);
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
	}
	if (tdax_tracing)
		tdax_trace_event(TDAX_TR_META, idx, 0, 0, TDAX_FB_NONE);
	b->fd = -1;
	b->epoch++;
	atomic_fetch_sub(&tdax_fds_promoted, 1);
	tdax_count(TDAX_ST_DEMOTIONS, 1);
	return rc;
}

static void settle(struct tdax_promoted *b, int fd_here)
{
	tdax_promoted_lock(b);
	if (b->fd >= 0)
		tdax_promoted_demote(b, (uint32_t)(b - files), fd_here);
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
	my_tid = 0;
	for (uint32_t i = 0; i < nfiles; i++) {
		files[i].fd = -1;
		files[i].syncs = 0;
		files[i].depth = 0;
		atomic_store(&files[i].owner, 0);
	}
	atomic_store(&tdax_fds_promoted, 0);
	atomic_store(&frozen, false);
}

void tdax_promoted_checkpoint_begin(uint32_t idx, int fd)
{
	if (!files || idx >= nfiles)
		return;
	struct tdax_promoted *b = &files[idx];
	tdax_promoted_lock(b);
	if (b->fd >= 0)
		tdax_promoted_demote(b, idx, fd);
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

void tdax_promoted_serve_breaks(void)
{
	int fd;
	while ((fd = tdax_lease_next_break()) >= 0) {
		const struct tdax_fd *e = tdax_fd_get(fd);
		struct tdax_promoted *b = e ? tdax_promoted_of(e) : NULL;
		if (b) {
			tdax_promoted_lock(b);
			if (b->fd == fd)
				tdax_promoted_demote(b, e->file_plus1 - 1, -1);
			tdax_promoted_unlock(b);
		}
		tdax_lease_finish_break(fd);
	}
}
