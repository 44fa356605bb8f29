/*
 * writeback -- background checkpoints and counter flushes.
 */
#define _GNU_SOURCE
#include "preload/writeback.h"
#include "core/log.h"
#include "preload/coherent.h"
#include "preload/tracking.h"
#include "preload/runtime.h"
#include "core/trace.h"
#include "preload/watch.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

static _Atomic int running;
static pthread_mutex_t kick_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t kick_cond = PTHREAD_COND_INITIALIZER;
static _Atomic int kicked;

void tdax_writeback_pass(int all)
{
	struct tdax_device *dev = tdax_rt.dev;
	if (!tdax_watch_check())
		return; /* the region is gone: nothing of it to write back or use */
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	bool pressure = u.used * 100 > u.capacity * tdax_rt.wb_high_pct;
	uint64_t now = tdax_coarse_ns();
	for (uint32_t i = 0; i < dev->sb->max_files; i++) {
		if (!tdax_rt.touched[i])
			continue;
		const struct tdax_file_rt *rt = &tdax_file_at(dev, i)->rt;
		uint64_t first = atomic_load(&rt->first_log_ns);
		if (!first && !atomic_load(&rt->rewrite)) {
			tdax_rt.touched[i] = 0;
			continue;
		}
		if (all || pressure || now - first > tdax_rt.wb_age_ns ||
		    atomic_load(&rt->logged_bytes) > tdax_rt.wb_bytes || atomic_load(&rt->rewrite))
			tdax_coherent_checkpoint_file(i);
	}
	tdax_tracking_work(pressure);
	if (tdax_log_seal_dead(dev) || pressure)
		tdax_log_reclaim(dev);
	tdax_stats_flush();
	tdax_trace_flush();
}

static void *thread_main(void *arg)
{
	(void)arg;
	tdax_inside = 1; /* its own calls pass through the hooks */
	tdax_fdtable_unshare();
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the application's */
	for (;;) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + tdax_rt.wb_interval_ns;
		ts.tv_sec += (time_t)(ns / 1000000000u);
		ts.tv_nsec = (long)(ns % 1000000000u);
		pthread_mutex_lock(&kick_lock);
		while (!atomic_load(&kicked) &&
		       pthread_cond_timedwait(&kick_cond, &kick_lock, &ts) == 0)
			;
		atomic_store(&kicked, 0);
		pthread_mutex_unlock(&kick_lock);
		tdax_writeback_pass(0);
	}
	return NULL;
}

/* The first write starts the thread. No lock: a signal handler's write that
 * interrupts this one finds `running` set and goes on. */
void tdax_writeback_ensure(void)
{
	int idle = 0;
	if (atomic_load_explicit(&running, memory_order_relaxed) ||
	    !atomic_compare_exchange_strong(&running, &idle, 1))
		return;
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	/* Without the thread, records only go at the next real sync or exit; a
	 * full log then makes syncs real. Do not retry per write. */
	if (pthread_create(&t, &a, thread_main, NULL) == 0)
		pthread_setname_np(t, "tdax-writeback");
	pthread_attr_destroy(&a);
}

void tdax_writeback_kick(void)
{
	if (atomic_exchange(&kicked, 1))
		return;
	pthread_mutex_lock(&kick_lock);
	pthread_cond_signal(&kick_cond);
	pthread_mutex_unlock(&kick_lock);
}

void tdax_writeback_after_fork(void)
{
	atomic_store(&running, 0);
	atomic_store(&kicked, 0);
	pthread_mutex_init(&kick_lock, NULL);
	pthread_cond_init(&kick_cond, NULL);
}
