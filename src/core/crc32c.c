/*
 * crc32c -- CRC-32C over byte buffers, by Intel's ISA-L (crc32_iscsi: the
 * same polynomial, folded with PCLMULQDQ; about 2.5x the crc32 instruction
 * alone on 4 KiB here). ISA-L takes and returns the register without the
 * final inversion, so the standard value is ~crc32_iscsi(p, n, ~crc).
 *
 * ISA-L is loaded, not linked (as libpmem2, core/pmem.h): a process under
 * tdax that never opens a device -- a shell, a build step -- does not load
 * it at start.
 */
#define _GNU_SOURCE
#include "core/crc32c.h"

#include <dlfcn.h>
#include <isa-l/crc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define ISAL_SONAME "libisal.so.2"

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

uint32_t tdax_crc32c(uint32_t crc, const void *p, size_t len)
{
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
