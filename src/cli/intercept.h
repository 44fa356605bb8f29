/*
 * intercept -- tdax run --intercept syscall: the file system calls of a
 * program libtdax.so cannot see (a Go program, a static binary) trapped by
 * a seccomp filter and made by a supervisor that has libtdax.so preloaded
 * (intercept.c: the filter and the start; notify.c: the supervisor).
 */
#ifndef TDAX_CLI_INTERCEPT_H
#define TDAX_CLI_INTERCEPT_H

/* The supervisor gives every file the command opens for writing a
 * descriptor number at or above this (from the top of the command's
 * RLIMIT_NOFILE down, where the kernel's lowest-first allocation does not
 * reach), and the filter hands over writes, syncs and closes only of such
 * numbers: a socket's or a pipe's stay in the kernel. A write through a
 * lower number of a file (inherited, duplicated down, or the limit too
 * low to place it) is unseen, so that file's syncs are made real. */
#define TDAX_INTERCEPT_FD_BASE 512

/* 0 if this process can trap the system calls of a command it starts
 * (seccomp user notification, Linux 5.19 or later), else why not (an
 * errno value). Forks a child to try. */
int tdax_intercept_probe(void);

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
