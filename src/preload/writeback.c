/*
 * writeback -- background checkpoints and counter flushes.
 */
#define _GNU_SOURCE
#include "preload/writeback.h"
#include "core/log.h"
#include "core/recover.h"
#include "core/util.h"
#include "preload/cache.h"
#include "preload/promoted.h"
#include "preload/selection.h"
#include "preload/checkpoint.h"
#include "preload/coherent.h"
#include "preload/tracking.h"
#include "preload/state.h"
#include "core/trace.h"
#include "preload/fdtable.h"
#include "preload/lease.h"
#include "preload/mapped.h"
#include "preload/wake.h"
#include "preload/watch.h"

#include <pthread.h>
#include <signal.h>

static _Atomic int running;
/* The thread, while it runs (joinable: tdax_writeback_stop waits for it). */
static pthread_t thread;
static _Atomic bool started, stopping;

/* One pass at a time in a process: the block cache's pool and queues and
 * the selection are the pass's alone (cache.h), and exit makes its last
 * pass on its own thread while the write-back thread may be in one. */
static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Segments whose writer is gone are sealed, and their room reclaimed, at
 * most once a second unless the log is short of room: each look at a live
 * writer reads its /proc stat (~8 us here), for every segment of the
 * device, in every process's pass -- P processes that log would pay P * P
 * looks every interval (20 of them: a third of a CPU).
 */
#define SEAL_EVERY_NS 1000000000ull
static _Atomic uint64_t sealed_ns; /* the last look */

/*
 * The range table is looked over (jobs, re-evaluation, pressure) when the
 * thread was woken for a job, under pressure, at `all`, and otherwise
 * every SCAN_EVERY_NS: a look reads every entry of the table (16,384 by
 * default), which at every 10 ms pass was 1 % of a CPU in every process
 * (SQLite's WAL at synchronous=NORMAL: its largest cost under tdax).
 * Re-evaluation needs no more: the windows move in buckets of 1/8 of them.
 * A job that nobody woke for (its worker died) waits that long.
 */
#define SCAN_EVERY_NS 100000000ull
static _Atomic uint64_t scanned_ns; /* the last look */

/*
 * A file promoted by a process now dead (bypass mode) lacks the bytes it
 * deferred until someone writes them in: any process on the device does,
 * at its next seal look (once a second). One that cannot (another user's
 * file) looks again ten seconds later, not every second: each try scans
 * the whole log.
 */
#define ORPHANS_RETRY_LOOKS 10
static _Atomic int orphans_wait; /* seal looks to skip after a failed try */

static void write_orphans_back(struct tdax_device *dev)
{
	if (orphans_wait > 0) {
		orphans_wait--;
		return;
	}
	struct tdax_err e;
	if (tdax_recover_orphans(dev, &e) != 0)
		orphans_wait = ORPHANS_RETRY_LOOKS;
}

/* A pass (pass_lock held). */
static void pass_held(int all, bool woken)
{
	struct tdax_device *dev = tdax_rt.dev;
	if (!tdax_watch_check())
		return; /* the region is gone: nothing of it to write back or use */
	tdax_log_map_claimed(dev); /* first: a writer is filling the segment */
	tdax_promoted_serve_breaks(); /* another open waits for these */
	tdax_selection_serve();
	tdax_promoted_serve_cache(); /* free blocks for the writers of promoted files */
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	bool pressure = u.used * 100 > u.capacity * tdax_rt.wb_high_pct;
	tdax_tracking_fill(u.capacity ? (uint32_t)(u.used * 100 / u.capacity) : 100);
	uint64_t now = tdax_coarse_ns();
	uint32_t removed[256]; /* let go together: one directory sync per directory */
	size_t nremoved = 0;
	for (uint32_t i = 0; i < dev->sb->max_files; i++) {
		if (!tdax_rt.touched[i])
			continue;
		const struct tdax_file_rt *rt = &tdax_file_at(dev, i)->rt;
		uint64_t first = atomic_load(&rt->first_log_ns);
		if (!first && !atomic_load(&rt->rewrite)) {
			tdax_rt.touched[i] = 0;
			continue;
		}
		if (tdax_file_gone(atomic_load(&rt->removed))) {
			removed[nremoved++] = i;
			if (nremoved == sizeof(removed) / sizeof(removed[0])) {
				tdax_checkpoint_removed(removed, nremoved);
				nremoved = 0;
			}
		} else if (all || pressure || (first && now - first > tdax_rt.wb_age_ns) ||
			   atomic_load(&rt->logged_bytes) > tdax_rt.wb_bytes ||
			   (atomic_load(&rt->rewrite) && atomic_load(&rt->deferred) != tdax_pid())) {
			/* (A file promoted here has rewrite set: written back
			 * at its age or size, as any other; with no record
			 * since its last checkpoint it has nothing to write.) */
			tdax_checkpoint_file(i);
		}
	}
	tdax_checkpoint_removed(removed, nremoved);
	if (all || pressure || woken ||
	    now - atomic_load_explicit(&scanned_ns, memory_order_relaxed) >= SCAN_EVERY_NS) {
		atomic_store_explicit(&scanned_ns, now, memory_order_relaxed);
		tdax_tracking_work(pressure, tdax_checkpoint_file);
		tdax_mapped_pin_every(); /* a pin another process let go of (mapped.h) */
	}
	bool sealed = false;
	if (all || pressure || now - atomic_load_explicit(&sealed_ns, memory_order_relaxed) >= SEAL_EVERY_NS) {
		atomic_store_explicit(&sealed_ns, now, memory_order_relaxed);
		sealed = tdax_log_seal_dead(dev) > 0;
		write_orphans_back(dev);
	}
	if (sealed || pressure)
		tdax_log_reclaim(dev);
	else
		tdax_log_reclaim_due(dev); /* releases since the last scan (log.h) */
	tdax_stats_flush();
	tdax_trace_flush();
}

static void pass(int all, bool woken)
{
	pthread_mutex_lock(&pass_lock);
	pass_held(all, woken);
	pthread_mutex_unlock(&pass_lock);
}

/* What the thread answers for, let go (pass_lock held): promoted files get
 * their bytes, then the leases go (no break would be answered), the block
 * cache's arenas go back to the log. */
static void let_go(void)
{
	tdax_promoted_settle_all(); /* before the leases go: the files get their bytes */
	tdax_cache_release_all();
	tdax_lease_release_all(true); /* the pass's checkpoints open the files */
}

void tdax_writeback_last(void)
{
	pthread_mutex_lock(&pass_lock); /* for good: the thread's next pass waits */
	let_go();
	tdax_tracking_flush();
	pass_held(1, false);
}

void tdax_writeback_stop(void)
{
	if (!atomic_load(&started))
		return;
	atomic_store(&stopping, true);
	tdax_wake();
	pthread_join(thread, NULL);
	atomic_store(&started, false); /* (running stays: no thread again) */
	pthread_mutex_lock(&pass_lock);
	let_go();
	pthread_mutex_unlock(&pass_lock);
}

static void *thread_main(void *arg)
{
	(void)arg;
	tdax_inside = 1; /* its own calls pass through the hooks */
	tdax_fdtable_unshare();
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the application's */
	tdax_lease_thread_start();              /* but for a lease's break (lease.h) */
	while (!atomic_load_explicit(&stopping, memory_order_relaxed))
		pass(0, tdax_wake_wait(tdax_rt.wb_interval_ns));
	return NULL;
}

/* The first call once there is work (wake.h) starts the thread. No lock:
 * a signal handler's write that interrupts this one finds `running` set and
 * goes on. */
void tdax_writeback_ensure(void)
{
	int idle = 0;
	if (atomic_load_explicit(&running, memory_order_relaxed) || !tdax_wake_wanted() ||
	    !atomic_compare_exchange_strong(&running, &idle, 1))
		return;
	/* Without the thread, records only go at the next real sync or exit; a
	 * full log then makes syncs real. Do not retry per write. */
	if (TDAX_REAL(pthread_create)(&thread, NULL, thread_main, NULL) == 0) {
		pthread_setname_np(thread, "tdax-writeback");
		atomic_store(&started, true);
	}
}

void tdax_writeback_after_sync(void)
{
	tdax_writeback_ensure();
	if (!atomic_load_explicit(&running, memory_order_relaxed))
		tdax_stats_flush();
}

void tdax_writeback_after_fork(void)
{
	/* (The parent's thread may have held it: it has no thread here.) */
	pass_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	atomic_store(&running, 0);
	atomic_store(&started, false);
	atomic_store(&stopping, false);
	tdax_wake_after_fork();
}
