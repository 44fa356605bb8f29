/*
 * intercept -- tdax run --intercept syscall: the file system calls of a
 * program libtdax.so cannot see (a Go program, a static binary) trapped by
 * a seccomp filter and made by a supervisor that has libtdax.so preloaded
 * (intercept.c: the filter and the start; notify.c: the supervisor).
 */
#ifndef TDAX_CLI_INTERCEPT_H
#define TDAX_CLI_INTERCEPT_H

/* Start argv with its file system calls trapped, and turn this process
 * into their supervisor: `tdax serve-syscalls` under the LD_PRELOAD of the
 * environment; the command's own LD_PRELOAD becomes app_preload (NULL:
 * none). Returns only on failure, with the exit status to use. */
int tdax_intercept_start(char *const argv[], const char *app_preload);

/* tdax serve-syscalls LISTENER PID: serve what the filter of process PID
 * (and of everything it starts) traps, until they have all ended; exit as
 * PID did. Run by tdax_intercept_start only. */
int cmd_serve_syscalls(int argc, char **argv);

#endif
