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
