/*
 * paths -- where the tdax command finds its parts, relative to its own
 * binary: in a build tree build/bin/tdax has build/lib (libtdax.so,
 * libtdaxtrack.so), build/venv and the sources' bench/; installed (make
 * install, the Debian package) PREFIX/bin/tdax has PREFIX/lib/tdax (the
 * libraries and python/, the simulator).
 */
#ifndef TDAX_CLI_PATHS_H
#define TDAX_CLI_PATHS_H

#include <stddef.h>

/* The directory this binary is in, into out: 0, or -1. */
int tdax_paths_self(char *out, size_t len);

/* The directory of the libraries (the one with libtdax.so) into out: 0,
 * or -1 (not found). */
int tdax_paths_libdir(char *out, size_t len);

#endif
