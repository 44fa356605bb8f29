/*
 * crc32c -- CRC-32C (Castagnoli), the checksum of every device record.
 *
 * Uses the SSE4.2 crc32 instruction when the CPU has it and a table
 * otherwise; both give the same value (crc32c("123456789") == 0xE3069283).
 */
#ifndef TDAX_CRC32C_H
#define TDAX_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extend crc (0 to start) over len bytes at p. */
uint32_t tdax_crc32c(uint32_t crc, const void *p, size_t len);

#endif
