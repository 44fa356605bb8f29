/*
 * pmtrace -- the persist-order trace of the device's primitives (see
 * pmtrace.h); only the test build compiles this file. Slow on purpose: a
 * write(2) per event, under one lock. Every system call here is a raw one:
 * inside libtdax.so, write() and close() are the interposed ones, and a
 * traced write to a managed file would log, trace and take the lock again.
 */
#define _GNU_SOURCE
#include "core/pmtrace.h"
#include "core/sys.h"
#include "core/testaid.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LINE 64u

struct event {
	uint8_t kind;
	uint8_t pad[3];
	uint32_t len;
	uint64_t off;
};

static int trace_fd = -1;           /* under trace_lock; -1: not tracing */
static bool trace_failed;           /* under trace_lock */
static bool nofence;                /* the positive control: a tdax that never fences */
static const char *base;
static char trace_path[PATH_MAX];
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
/* The device's own primitives: a traced device still persists. */
static pmem2_flush_fn real_flush;
static pmem2_drain_fn real_drain;

static bool write_all(int fd, const void *p, size_t n)
{
	while (n) {
		long w = tdax_syscall(SYS_write, fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = ENOSPC;
			return false;
		}
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return true;
}

/* Tracing stops for good; the program goes on. Called with trace_lock held. */
static void stop(int err)
{
	tdax_syscall(SYS_close, trace_fd);
	trace_fd = -1;
	trace_failed = true;
	char msg[PATH_MAX + 200];
	int n = snprintf(msg, sizeof(msg), "tdax[%d]: cannot write the persist-order trace %s: %s; "
			 "tracing stopped and the trace is incomplete: make room on (or repair) "
			 "its file system and run again\n", (int)getpid(), trace_path, strerror(err));
	if (n > (int)sizeof(msg) - 1)
		n = (int)sizeof(msg) - 1;
	(void)tdax_syscall(SYS_write, 2, msg, (size_t)n);
}

static void put(char kind, uint64_t off, uint32_t len, const void *data)
{
	struct event e = { .kind = (uint8_t)kind, .len = len, .off = off };
	pthread_mutex_lock(&trace_lock);
	if (trace_fd >= 0 && (!write_all(trace_fd, &e, sizeof(e)) ||
			      (data && !write_all(trace_fd, data, len))))
		stop(errno);
	pthread_mutex_unlock(&trace_lock);
}

static void traced_flush(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(LINE - 1);
	uintptr_t end = ((uintptr_t)p + n + LINE - 1) & ~(uintptr_t)(LINE - 1);
	if (n)
		put('F', (uint64_t)(a - (uintptr_t)base), (uint32_t)(end - a), (const void *)a);
	real_flush(p, n);
}

static void traced_drain(void)
{
	if (!nofence)
		put('B', 0, 0, NULL);
	real_drain();
}

static void *traced_memcpy(void *dst, const void *src, size_t n, unsigned flags)
{
	memcpy(dst, src, n);
	traced_flush(dst, n);
	if (!(flags & PMEM2_F_MEM_NODRAIN))
		traced_drain();
	return dst;
}

int tdax_pmtrace_attach(char *region, uint64_t size, pmem2_flush_fn *flush, pmem2_drain_fn *drain,
			pmem2_memcpy_fn *memcpy_fn)
{
	const char *path = TDAX_TEST_ENV("PERSIST_TRACE");
	if (!path || !*path)
		return 0;
	snprintf(trace_path, sizeof(trace_path), "%s", path);
	int fd = (int)tdax_syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (!write_all(fd, "TDXPMTR1", 8) || !write_all(fd, &size, 8)) {
		int e = errno;
		tdax_syscall(SYS_close, fd);
		errno = e;
		return -1;
	}
	const char *nf = TDAX_TEST_ENV("PERSIST_TRACE_NOFENCE");
	nofence = nf && strcmp(nf, "1") == 0;
	base = region;
	real_flush = *flush;
	real_drain = *drain;
	pthread_mutex_lock(&trace_lock);
	trace_fd = fd;
	pthread_mutex_unlock(&trace_lock);
	*flush = traced_flush;
	*drain = traced_drain;
	*memcpy_fn = traced_memcpy;
	return 0;
}

void tdax_pmtrace_mark(uint32_t tag, uint64_t value)
{
	put('M', value, tag, NULL);
}

bool tdax_pmtrace_failed(void)
{
	pthread_mutex_lock(&trace_lock);
	bool failed = trace_failed;
	pthread_mutex_unlock(&trace_lock);
	return failed;
}
