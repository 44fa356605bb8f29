/*
 * pmtrace -- the persist-order trace of the device's primitives (see pmtrace.h);
 * only the test build compiles this file. Slow on purpose (a write(2) per
 * event, one lock).
 */
#define _GNU_SOURCE
#include "pmtrace.h"
#include "device.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINE 64u

struct event {
	uint8_t kind;
	uint8_t pad[3];
	uint32_t len;
	uint64_t off;
};

static int trace_fd = -1;
static bool nofence; /* the positive control: a tdax that never fences */
static const char *base;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;

static void put(char kind, uint64_t off, uint32_t len, const void *data)
{
	struct event e = { .kind = (uint8_t)kind, .len = len, .off = off };
	pthread_mutex_lock(&trace_lock);
	if (write(trace_fd, &e, sizeof(e)) != (ssize_t)sizeof(e) ||
	    (data && write(trace_fd, data, len) != (ssize_t)len)) {
		close(trace_fd); /* a short trace would pass for a complete one */
		trace_fd = -1;
		abort();
	}
	pthread_mutex_unlock(&trace_lock);
}

static void traced_flush(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(LINE - 1);
	uintptr_t end = ((uintptr_t)p + n + LINE - 1) & ~(uintptr_t)(LINE - 1);
	if (n)
		put('F', (uint64_t)(a - (uintptr_t)base), (uint32_t)(end - a), (const void *)a);
}

static void traced_drain(void)
{
	if (!nofence)
		put('B', 0, 0, NULL);
}

static void *traced_memcpy(void *dst, const void *src, size_t n, unsigned flags)
{
	memcpy(dst, src, n);
	traced_flush(dst, n);
	if (!(flags & PMEM2_F_MEM_NODRAIN))
		traced_drain();
	return dst;
}

int tdax_pmtrace_attach(struct tdax_device *dev)
{
	const char *path = getenv(TDAX_PMTRACE_ENV);
	if (!path || !*path)
		return 0;
	trace_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (trace_fd < 0)
		return -1;
	base = dev->base;
	const char *nf = getenv(TDAX_PMTRACE_ENV "_NOFENCE");
	nofence = nf && strcmp(nf, "1") == 0;
	uint64_t size = dev->size;
	if (write(trace_fd, "TDXPMTR1", 8) != 8 || write(trace_fd, &size, 8) != 8)
		return -1;
	dev->flush = traced_flush;
	dev->drain = traced_drain;
	dev->memcpy = traced_memcpy;
	return 0;
}

void tdax_pmtrace_mark(uint32_t tag, uint64_t value)
{
	if (trace_fd >= 0)
		put('M', value, tag, NULL);
}
