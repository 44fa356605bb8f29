/*
 * cacheflush -- cache-line flushes and a fence (cacheflush.h).
 */
#include "core/cacheflush.h"

#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define LINE 64

/* The lines of [p, p + n), one instruction each. */
#define EACH_LINE(p, n, insn)                                                           \
	for (uintptr_t a = (uintptr_t)(p) & ~(uintptr_t)(LINE - 1); a < (uintptr_t)(p) + (n); \
	     a += LINE)                                                                  \
		insn((void *)a)

__attribute__((target("clwb"))) static void flush_clwb(const void *p, size_t n)
{
	EACH_LINE(p, n, _mm_clwb);
}

__attribute__((target("clflushopt"))) static void flush_clflushopt(const void *p, size_t n)
{
	EACH_LINE(p, n, _mm_clflushopt);
}

static void flush_clflush(const void *p, size_t n)
{
	EACH_LINE(p, n, _mm_clflush);
}

pmem2_flush_fn tdax_cacheflush_fn(void)
{
	unsigned a, b = 0, c, d;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
		if (b & bit_CLWB)
			return flush_clwb;
		if (b & bit_CLFLUSHOPT)
			return flush_clflushopt;
	}
	return flush_clflush;
}

void tdax_cacheflush_drain(void)
{
	_mm_sfence();
}

void *tdax_cacheflush_memcpy(void *dst, const void *src, size_t n, unsigned flags)
{
	static _Atomic(pmem2_flush_fn) chosen;
	pmem2_flush_fn flush = atomic_load_explicit(&chosen, memory_order_relaxed);
	if (!flush) {
		flush = tdax_cacheflush_fn();
		atomic_store_explicit(&chosen, flush, memory_order_relaxed);
	}
	memcpy(dst, src, n);
	flush(dst, n);
	if (!(flags & PMEM2_F_MEM_NODRAIN))
		tdax_cacheflush_drain();
	return dst;
}
