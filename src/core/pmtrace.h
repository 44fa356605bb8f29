/*
 * pmtrace -- the persist-order trace: a test aid (test build only,
 * src/core/testaid.h) for the device's persistence primitives
 * (TDAX_TEST_PERSIST_TRACE=FILE).
 *
 * Traced, a flush records the bytes it makes persistent (whole cache lines,
 * as they are at the moment of the flush), a drain records a fence, and
 * tdax_pmtrace_mark() records an event of the program's (such as "this
 * write was acknowledged"). Non-temporal copies become copy + flush, so
 * every byte that can reach the media is seen; the device's own primitives
 * still run, so a traced device stays persistent. tests/crash/pmreorder.py
 * builds crash images from the trace: every fenced prefix, plus random
 * subsets of the flushes of the epoch after it -- what an ADR machine may
 * have persisted when the power went (unflushed stores are lost there).
 *
 * With TDAX_TEST_PERSIST_TRACE_NOFENCE=1 the fences are left out of the
 * trace: the positive control of that test (a tdax that never fences must
 * lose data).
 *
 * The trace is written with raw system calls (never through the
 * interposed write of libtdax.so). If it cannot be written (a full or
 * failing file system), tracing stops, the program goes on, stderr says so
 * once, and tdax_pmtrace_failed() is true: a short trace would pass for a
 * complete one.
 *
 * File format: "TDXPMTR1", u64 region size, then events of
 *   u8 kind ('F' flush, 'B' fence, 'M' mark), u8[3] 0, u32 len, u64 off,
 *   and for 'F' len bytes of data at offset off of the region; for 'M'
 *   off is the mark's value and len its tag.
 *
 * In the product build tdax_pmtrace_attach() is the constant 0 and the rest
 * does not exist.
 */
#ifndef TDAX_PMTRACE_H
#define TDAX_PMTRACE_H

#include <libpmem2.h>
#include <stdbool.h>
#include <stdint.h>

/* Named in device.c's error message, on a path the product build drops. */
#define TDAX_PMTRACE_ENV "TDAX_TEST_PERSIST_TRACE"

#ifdef TDAX_TEST_BUILD
/* Called by device.c once the region [base, base + size) is mapped: if the
 * environment asks for it, swap its primitives (*flush, *drain, *memcpy)
 * for traced ones. One traced device per process. Returns -1 (errno set)
 * if the trace file cannot be made. */
int tdax_pmtrace_attach(char *base, uint64_t size, pmem2_flush_fn *flush, pmem2_drain_fn *drain,
			pmem2_memcpy_fn *memcpy_fn);

/* Record a program event in the trace (nothing when not tracing). */
void tdax_pmtrace_mark(uint32_t tag, uint64_t value);

/* True once tracing stopped on a write error: the trace is incomplete. */
bool tdax_pmtrace_failed(void);
#else
/* A constant, not a function: the error path after it is gone even at -O0. */
#define tdax_pmtrace_attach(base, size, flush, drain, memcpy_fn) \
	((void)(base), (void)(size), (void)(flush), (void)(drain), (void)(memcpy_fn), 0)
#endif

#endif
