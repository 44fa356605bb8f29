/*
 * fault -- tdax's SIGSEGV and SIGBUS handlers, and the probes of the
 * caller's memory they guard (fault.h).
 */
#define _GNU_SOURCE
#include "preload/fault.h"
#include "preload/state.h"
#include "preload/watch.h"

#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define PAGE 4096

/* The handlers that were there before tdax's. */
static struct sigaction before_segv, before_bus;
static _Atomic bool installed;

/* Where a fault in this thread's probe goes back to; NULL outside one. */
static __thread sigjmp_buf *probing TDAX_TLS;

enum access { READ, WRITE };

/* What a probe touches: buffers (an iovec array), or a string. */
struct target {
	const struct iovec *iov;
	int n;
	enum access how;
	size_t limit;
	const char *string;
};

/* One access a page of each buffer, within its first `limit` bytes in all
 * (0: only the entries of the array); or each byte of a string up to its
 * NUL, which must come within PATH_MAX bytes (the kernel's limit for a
 * path: past it the kernel says ENAMETOOLONG, and tdax's own reads of the
 * string could run into memory that is not the caller's). Out of line, so
 * that nothing of the probe's frame lives across its sigsetjmp. */
__attribute__((noinline)) static void touch(const struct target *t)
{
	const struct iovec *iov = t->iov;
	enum access how = t->how;
	size_t limit = t->limit, i = 0;
	while (t->string && i < PATH_MAX && ((const volatile char *)t->string)[i])
		i++;
	if (t->string && i == PATH_MAX)
		siglongjmp(*probing, 1);
	for (int k = 0; k < t->n; k++) {
		struct iovec v = *(const volatile struct iovec *)&iov[k];
		if (v.iov_len == 0 || limit == 0)
			continue;
		size_t len = v.iov_len < limit ? v.iov_len : limit;
		limit -= len;
		uintptr_t a = (uintptr_t)v.iov_base, end = a + len;
		if (end < a)
			siglongjmp(*probing, 1); /* wraps around: the kernel's EFAULT */
		for (; a < end; a = (a | (PAGE - 1)) + 1) {
			volatile char *c = (volatile char *)a;
			if (how == READ)
				(void)*c;
			else
				*c = *c; /* (the read this is for overwrites it) */
		}
	}
}

static bool probe(const struct target *t)
{
	if (!atomic_load_explicit(&installed, memory_order_relaxed))
		return true; /* not attached: nothing of tdax reads the caller's memory */
	/* (A probe of a signal handler's call inside this thread's own
	 * probe: the outer one is back in place when the inner one ends.) */
	sigjmp_buf back, *outer = probing;
	if (sigsetjmp(back, 0)) {
		probing = outer;
		return false;
	}
	probing = &back;
	touch(t);
	probing = outer;
	return true;
}

bool tdax_fault_iovec_readable(const struct iovec *iov, int n)
{
	return probe(&(struct target){ .iov = iov, .n = n, .how = READ, .limit = 0 });
}

bool tdax_fault_readable(const struct iovec *iov, int n)
{
	return probe(&(struct target){ .iov = iov, .n = n, .how = READ, .limit = SIZE_MAX });
}

bool tdax_fault_writable(const struct iovec *iov, int n, size_t len)
{
	return probe(&(struct target){ .iov = iov, .n = n, .how = WRITE, .limit = len });
}

bool tdax_fault_path_readable(const char *path)
{
	return path && probe(&(struct target){ .string = path });
}

/* As if tdax had no handler: the one before it runs; with none, the
 * default action -- a fault the kernel raised faults again on return, at
 * the same instruction, one sent (kill) is sent again. */
static void pass_on(int sig, siginfo_t *si, void *uc, const struct sigaction *before)
{
	bool sent = si->si_code <= 0;
	if (before->sa_flags & SA_SIGINFO) {
		before->sa_sigaction(sig, si, uc);
	} else if (before->sa_handler != SIG_IGN && before->sa_handler != SIG_DFL) {
		before->sa_handler(sig);
	} else if (before->sa_handler == SIG_DFL || !sent) {
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		TDAX_REAL(sigaction)(sig, &dfl, NULL);
		if (sent)
			raise(sig);
	}
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	if (probing && si->si_code > 0)
		siglongjmp(*probing, 1);
	if (sig == SIGBUS && tdax_watch_sigbus(si->si_addr))
		return;
	pass_on(sig, si, uc, sig == SIGSEGV ? &before_segv : &before_bus);
}

void tdax_fault_start(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	/* NODEFER: a probe's siglongjmp leaves the handler without
	 * sigreturn, and must not leave its signal blocked. ONSTACK: a fault
	 * of a program on its alternate signal stack (a stack overflow) is
	 * still handled there, as its own handler would be. */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	TDAX_REAL(sigaction)(SIGBUS, &sa, &before_bus);
	TDAX_REAL(sigaction)(SIGSEGV, &sa, &before_segv);
	atomic_store(&installed, true);
}
