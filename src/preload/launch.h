/*
 * launch -- a managed process starting a program that skips libc: through
 * tdax run, so that its file calls are seen (launch.c).
 */
#ifndef TDAX_PRELOAD_LAUNCH_H
#define TDAX_PRELOAD_LAUNCH_H

#include <stdbool.h>

/* About to exec file (looked up in PATH if search) with argv and envp: if
 * it is a program that skips libc, exec tdax run for it instead; returns
 * if that is not to be (saying so on stderr) or failed, and the caller
 * execs file itself. Async-signal-safe. */
void tdax_launch(const char *file, bool search, char *const argv[], char *const envp[]);

#endif
