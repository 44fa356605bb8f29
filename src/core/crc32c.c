/*
 * crc32c -- CRC-32C over byte buffers, by Intel's ISA-L (crc32_iscsi: the
 * same polynomial, folded with PCLMULQDQ; about 2.5x the crc32 instruction
 * alone on 4 KiB here). ISA-L takes and returns the register without the
 * final inversion, so the standard value is ~crc32_iscsi(p, n, ~crc).
 */
#include "core/crc32c.h"

#include <isa-l/crc.h>

uint32_t tdax_crc32c(uint32_t crc, const void *p, size_t len)
{
	const unsigned char *b = p;
	while (len > (size_t)1 << 30) { /* ISA-L takes an int length */
		crc = ~crc32_iscsi((unsigned char *)b, 1 << 30, ~crc);
		b += (size_t)1 << 30;
		len -= (size_t)1 << 30;
	}
	return ~crc32_iscsi((unsigned char *)b, (int)len, ~crc);
}
