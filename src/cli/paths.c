/*
 * paths -- where the tdax command finds its parts (paths.h).
 */
#define _GNU_SOURCE
#include "cli/paths.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int tdax_paths_self(char *out, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", out, len - 1);
	if (n <= 0)
		return -1;
	out[n] = '\0';
	*strrchr(out, '/') = '\0';
	return 0;
}

int tdax_paths_libdir(char *out, size_t len)
{
	static const char *const dirs[] = { "lib", "lib/tdax" }; /* a build tree's, an install's */
	char exe[PATH_MAX - 64], lib[PATH_MAX];
	if (tdax_paths_self(exe, sizeof(exe)) != 0)
		return -1;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(lib, sizeof(lib), "%s/../%s/libtdax.so", exe, dirs[i]);
		if (access(lib, R_OK) == 0) {
			snprintf(out, len, "%s/../%s", exe, dirs[i]);
			return 0;
		}
	}
	return -1;
}
