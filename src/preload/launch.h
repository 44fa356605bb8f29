/*
 * launch -- a managed process starting a program that skips libc: through
 * tdax run, so that its file calls are seen (launch.c).
 */
#ifndef TDAX_PRELOAD_LAUNCH_H
#define TDAX_PRELOAD_LAUNCH_H

#include <stdbool.h>

/* Starts a program: 0, or an error (exec: it returns only on failure). */
typedef int (*tdax_start_fn)(const char *path, char *const argv[], char *const envp[], void *ctx);

/* About to start file (looked up in PATH if search) with argv and envp: if
 * it is a program that skips libc, start tdax run for it instead, with
 * start (true if that returned 0). false if that is not to be (saying so
 * on stderr) or failed: the caller starts file itself. Async-signal-safe. */
bool tdax_launch(const char *file, bool search, char *const argv[], char *const envp[], tdax_start_fn start,
		 void *ctx);

#endif
