/*
 * wake -- the write-back thread's wake-up (wake.h): a flag, so that a
 * write path that finds it set costs one atomic exchange, which is also
 * the futex the thread sleeps on. Waking is two system-call-free steps at
 * most and a futex wake: safe in a signal handler. A signal handled on the
 * waiting thread itself (a lease break, lease.h) ends its wait too.
 */
#define _GNU_SOURCE
#include "preload/wake.h"
#include "core/sys.h"

#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>

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
	tdax_syscall(SYS_futex, (void *)&woken, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

bool tdax_wake_wait(uint64_t timeout_ns)
{
	struct timespec rel = { .tv_sec = (time_t)(timeout_ns / 1000000000u),
				.tv_nsec = (long)(timeout_ns % 1000000000u) };
	/* Returns when woken, at the timeout, or after a signal's handler ran
	 * on this thread: each is a reason for a pass. */
	if (!atomic_load(&woken))
		tdax_syscall(SYS_futex, (void *)&woken, FUTEX_WAIT_PRIVATE, 0, &rel, NULL, 0);
	return atomic_exchange(&woken, 0);
}

void tdax_wake_after_fork(void)
{
	atomic_store(&woken, 0);
	atomic_store(&wanted, false);
}
