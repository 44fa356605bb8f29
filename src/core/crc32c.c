/*
 * crc32c -- CRC-32C over byte buffers, by Intel's ISA-L (crc32_iscsi: the
 * same polynomial, folded with PCLMULQDQ; about 2.5x the crc32 instruction
 * alone on 4 KiB here). ISA-L takes and returns the register without the
 * final inversion, so the standard value is ~crc32_iscsi(p, n, ~crc).
 *
 * ISA-L is loaded, not linked (as libpmem2, core/pmem.h): a process under
 * tdax that never opens a device -- a shell, a build step -- does not load
 * it at start.
 *
 * A short buffer -- a record's header, the 128 bytes of a small write or
 * persist -- is checksummed with the crc32 instruction itself: ISA-L's
 * folding pays a set-up that only pays off from ~200 bytes (64 B: 19 ns
 * against 12; 128 B: 27 against 19; 256 B: 23 against 32, on this
 * machine), and a persist checksums two such buffers.
 */
#define _GNU_SOURCE
#include "core/crc32c.h"

#include <dlfcn.h>
#include <isa-l/crc.h>
#include <nmmintrin.h>
#include <stdbool.h>
#include <string.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define ISAL_SONAME "libisal.so.2"

enum { SHORT = 128 }; /* bytes up to which the crc32 instruction is faster */

static __typeof__(crc32_iscsi) *_Atomic iscsi;

int tdax_crc32c_load(struct tdax_err *err)
{
	if (atomic_load_explicit(&iscsi, memory_order_acquire))
		return 0;
	void *h = dlopen(ISAL_SONAME, RTLD_NOW | RTLD_LOCAL);
	void *fn = h ? dlsym(h, "crc32_iscsi") : NULL;
	if (!fn)
		return tdax_errf(err, "cannot load crc32_iscsi from %s (Intel ISA-L, the checksum of "
			"every device record): %s; install it with 'apt-get install libisal2'",
			ISAL_SONAME, dlerror());
	atomic_store_explicit(&iscsi, (__typeof__(crc32_iscsi) *)fn, memory_order_release);
	return 0;
}

static bool have_crc32_instruction(void)
{
	static _Atomic int have = -1;
	int h = atomic_load_explicit(&have, memory_order_relaxed);
	if (__builtin_expect(h < 0, 0)) {
		__builtin_cpu_init();
		h = __builtin_cpu_supports("sse4.2") ? 1 : 0;
		atomic_store_explicit(&have, h, memory_order_relaxed);
	}
	return h;
}

__attribute__((target("sse4.2"))) static uint32_t crc32_short(uint32_t crc, const unsigned char *b, size_t len)
{
	uint64_t c = ~crc;
	for (; len >= 8; b += 8, len -= 8) {
		uint64_t v;
		memcpy(&v, b, 8);
		c = _mm_crc32_u64(c, v);
	}
	uint32_t c32 = (uint32_t)c;
	for (; len; b++, len--)
		c32 = _mm_crc32_u8(c32, *b);
	return ~c32;
}

uint32_t tdax_crc32c(uint32_t crc, const void *p, size_t len)
{
	if (len <= SHORT && have_crc32_instruction())
		return crc32_short(crc, p, len);
	__typeof__(crc32_iscsi) *fn = atomic_load_explicit(&iscsi, memory_order_acquire);
	if (__builtin_expect(!fn, 0)) {
		struct tdax_err e;
		if (tdax_crc32c_load(&e) != 0) {
			fprintf(stderr, "tdax: %s\n", e.msg);
			abort(); /* a checksum that cannot be computed must not be guessed */
		}
		fn = atomic_load_explicit(&iscsi, memory_order_acquire);
	}
	const unsigned char *b = p;
	while (len > (size_t)1 << 30) { /* ISA-L takes an int length */
		crc = ~fn((unsigned char *)b, 1 << 30, ~crc);
		b += (size_t)1 << 30;
		len -= (size_t)1 << 30;
	}
	return ~fn((unsigned char *)b, (int)len, ~crc);
}
