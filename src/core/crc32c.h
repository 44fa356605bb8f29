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

#include "core/util.h" /* struct tdax_err */

/* Load ISA-L (dlopen, once): 0, or -1 with err. Opening or creating a
 * device does it first, so that a missing library is an error there;
 * tdax_crc32c loads it itself otherwise, and stops the process if it
 * cannot. */
int tdax_crc32c_load(struct tdax_err *err);

/* Extend crc (0 to start) over len bytes at p. */
uint32_t tdax_crc32c(uint32_t crc, const void *p, size_t len);

#endif
