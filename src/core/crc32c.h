/*
 * crc32c -- CRC-32C (Castagnoli), the checksum of every device record.
 *
 * crc32c("123456789") == 0xE3069283; values chain: crc(a||b) ==
 * tdax_crc32c(tdax_crc32c(0, a), b).
 */
#ifndef TDAX_CRC32C_H
#define TDAX_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extend crc (0 to start) over len bytes at p. */
uint32_t tdax_crc32c(uint32_t crc, const void *p, size_t len);

#endif
