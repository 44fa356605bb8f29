/*
 * env -- the environment variables tdax reads (docs/cli.md "Environment"),
 * read in one place for the command and the preload library alike. Each is
 * read with secure_getenv(): a setuid or setgid program sees none of them.
 */
#ifndef TDAX_ENV_H
#define TDAX_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* TDAX_DEVICE if set and not empty, else the user's default device. */
const char *tdax_env_device(void);

/* Whether TDAX_DEVICE names the device (rather than the default). */
bool tdax_env_device_named(void);

/* The flags to open the device with (TDAX_OPEN_*), from TDAX_ALLOW_SHARED. */
int tdax_env_open_flags(void);

/* Whether the variable is set to exactly "1". */
bool tdax_env_on(const char *name);

/* A number (a size: 4096, 32M, 1GiB) from the variable: dflt if it is unset
 * or empty. A value that is not a number gives dflt, one outside lo..hi is
 * clamped into it; either way *why (why_len bytes) says what was done and
 * the result is 1. Otherwise 0. */
int tdax_env_u64(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi, uint64_t *out, char *why,
		 size_t why_len);

/* The write-back's tunables (docs/cli.md): variable, default and range, for
 * the library that reads them and the configuration file that checks them. */
struct tdax_env_number {
	const char *name;
	uint64_t dflt, lo, hi;
};
enum { TDAX_WB_INTERVAL_MS, TDAX_WB_AGE_MS, TDAX_WB_BYTES, TDAX_WB_HIGH_PCT, TDAX_WB_VARS };
extern const struct tdax_env_number tdax_wb_vars[TDAX_WB_VARS];

#endif
