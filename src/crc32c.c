/*
 * crc32c -- CRC-32C over byte buffers: hardware (SSE4.2) or table.
 */
#include "crc32c.h"

#include <stdbool.h>
#include <string.h>

#define POLY 0x82F63B78u /* reflected Castagnoli polynomial */

static uint32_t table[256];
static bool have_sse42;

__attribute__((constructor)) static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
		table[i] = c;
	}
#if defined(__x86_64__)
	__builtin_cpu_init();
	have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw(uint32_t c, const unsigned char *p, size_t n)
{
	while (n--)
		c = table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p, size_t n)
{
	uint64_t c64 = c;
	while (n >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c64 = __builtin_ia32_crc32di(c64, v);
		p += 8;
		n -= 8;
	}
	c = (uint32_t)c64;
	while (n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
#endif

uint32_t tdax_crc32c(uint32_t crc, const void *p, size_t len)
{
	uint32_t c = ~crc;
#if defined(__x86_64__)
	if (have_sse42)
		return ~crc_hw(c, p, len);
#endif
	return ~crc_sw(c, p, len);
}
