/*
 * supervise -- tdax run stays the parent of the command (bypass mode, and
 * the supervisor of --intercept syscall): reaps it and every process that
 * becomes a child of this one, forwards signals, and in bypass mode writes
 * in what a dead process deferred (supervise.c).
 */
#ifndef TDAX_CLI_SUPERVISE_H
#define TDAX_CLI_SUPERVISE_H

#include <signal.h>
#include <sys/types.h>

/* Run argv under this process on the device at path (bypass mode); the
 * command's exit status (dies of its signal if it died of one). */
int tdax_supervise(const char *device, char *const argv[]);

/* Fork a command to wait for (what names it in messages): this process
 * becomes a child subreaper and blocks the signals the wait takes (the old
 * mask into old, for the child to restore before it executes; the child's
 * subreaper flag is cleared). The child's pid, 0 in the child, -1 (said
 * on stderr) on failure. */
pid_t tdax_supervise_fork(const char *what, sigset_t *old);

/* Wait for cmd, forked by tdax_supervise_fork (in this process or
 * before an exec of it), and every process left to this one; with a
 * device path, write in what each dead one deferred. As tdax_supervise. */
int tdax_supervise_wait(pid_t cmd, const char *device);

#endif
