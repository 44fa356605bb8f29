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

void tdax_cacheflush_none(const void *p, size_t n)
{
	(void)p;
	(void)n;
}

void tdax_cacheflush_drain(void)
{
	_mm_sfence();
}

static pmem2_flush_fn chosen_flush(void)
{
	static _Atomic(pmem2_flush_fn) chosen;
	pmem2_flush_fn flush = atomic_load_explicit(&chosen, memory_order_relaxed);
	if (!flush) {
		flush = tdax_cacheflush_fn();
		atomic_store_explicit(&chosen, flush, memory_order_relaxed);
	}
	return flush;
}

/*
 * Copies of NT_MIN bytes or more go around the cache (non-temporal stores,
 * which the drain's fence orders as it orders flushes), as libpmem2 copies
 * on real persistent memory (its movnt threshold): a copy into the cache
 * and a write-back of each line reads every line in first and then waits
 * for each write-back. Measured here (4 KiB into the emulated region):
 * 1.0-1.5 us cached and flushed, 0.4 us non-temporal; below ~512 bytes the
 * cached copy is as fast or faster.
 */
#define NT_MIN 512

static void copy_nt(char *d, const char *s, size_t n, pmem2_flush_fn flush)
{
	size_t head = (size_t)(-(uintptr_t)d & 15);
	if (head) {
		memcpy(d, s, head);
		flush(d, head);
	}
	size_t i = head, body = head + ((n - head) & ~(size_t)15);
	for (; i < body; i += 16)
		_mm_stream_si128((__m128i *)(d + i), _mm_loadu_si128((const __m128i *)(s + i)));
	if (i < n) {
		memcpy(d + i, s + i, n - i);
		flush(d + i, n - i);
	}
}

static void *copy(void *dst, const void *src, size_t n, unsigned flags, pmem2_flush_fn flush)
{
	if (n >= NT_MIN) {
		copy_nt(dst, src, n, flush);
	} else {
		memcpy(dst, src, n);
		flush(dst, n);
	}
	if (!(flags & PMEM2_F_MEM_NODRAIN))
		tdax_cacheflush_drain();
	return dst;
}

void *tdax_cacheflush_memcpy(void *dst, const void *src, size_t n, unsigned flags)
{
	return copy(dst, src, n, flags, chosen_flush());
}

/* From NT_MIN on still non-temporal: such stores do not read the lines in
 * first, persistent caches or not. */
void *tdax_cacheflush_memcpy_gpf(void *dst, const void *src, size_t n, unsigned flags)
{
	return copy(dst, src, n, flags, tdax_cacheflush_none);
}
