/*
 * wake -- the write-back thread's wake-up (wake.h): a flag, so that a
 * write path that finds it set costs one atomic exchange, and a condition
 * variable to sleep on.
 */
#define _GNU_SOURCE
#include "preload/wake.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static _Atomic int woken;
static _Atomic bool wanted;

void tdax_wake_want(void)
{
	if (!atomic_load_explicit(&wanted, memory_order_relaxed))
		atomic_store(&wanted, true);
}

bool tdax_wake_wanted(void)
{
	return atomic_load_explicit(&wanted, memory_order_relaxed);
}

void tdax_wake(void)
{
	tdax_wake_want();
	if (atomic_exchange(&woken, 1))
		return;
	pthread_mutex_lock(&lock);
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
}

bool tdax_wake_wait(uint64_t timeout_ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ns = (uint64_t)ts.tv_nsec + timeout_ns;
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	pthread_mutex_lock(&lock);
	while (!atomic_load(&woken) && pthread_cond_timedwait(&cond, &lock, &ts) == 0)
		;
	bool was = atomic_exchange(&woken, 0);
	pthread_mutex_unlock(&lock);
	return was;
}

void tdax_wake_after_fork(void)
{
	atomic_store(&woken, 0);
	atomic_store(&wanted, false);
	pthread_mutex_init(&lock, NULL);
	pthread_cond_init(&cond, NULL);
}
