/*
 * env -- the environment variables tdax reads (env.h).
 */
#define _GNU_SOURCE
#include "core/env.h"
#include "core/device.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An interval of 0 would spin a CPU. */
const struct tdax_env_number tdax_wb_vars[TDAX_WB_VARS] = {
	[TDAX_WB_INTERVAL_MS] = { "TDAX_WB_INTERVAL_MS", 10, 1, 10000 },
	[TDAX_WB_AGE_MS] = { "TDAX_WB_AGE_MS", 1000, 1, 86400000 },
	[TDAX_WB_BYTES] = { "TDAX_WB_BYTES", 32u << 20, 4096, (uint64_t)1 << 40 },
	[TDAX_WB_HIGH_PCT] = { "TDAX_WB_HIGH_PCT", 90, 1, 100 },
};

const char *tdax_env_device(void)
{
	return tdax_env_device_named() ? secure_getenv("TDAX_DEVICE") : tdax_default_device();
}

bool tdax_env_device_named(void)
{
	const char *d = secure_getenv("TDAX_DEVICE");
	return d && *d;
}

bool tdax_env_on(const char *name)
{
	const char *s = secure_getenv(name);
	return s && strcmp(s, "1") == 0;
}

int tdax_env_open_flags(void)
{
	return TDAX_OPEN_NO_PREFAULT | (tdax_env_on("TDAX_ALLOW_SHARED") ? TDAX_OPEN_ALLOW_SHARED : 0);
}

int tdax_env_u64(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi, uint64_t *out, char *why,
		 size_t why_len)
{
	const char *s = secure_getenv(name);
	uint64_t v;
	*out = dflt;
	if (!s || !*s)
		return 0;
	if (tdax_parse_size(s, &v) != 0) {
		snprintf(why, why_len, "%s='%s' is not a number; using the default %llu", name, s,
			 (unsigned long long)dflt);
		return 1;
	}
	if (v >= lo && v <= hi) {
		*out = v;
		return 0;
	}
	*out = v < lo ? lo : hi;
	snprintf(why, why_len, "%s=%s is outside %llu..%llu; using %llu", name, s, (unsigned long long)lo,
		 (unsigned long long)hi, (unsigned long long)*out);
	return 1;
}
