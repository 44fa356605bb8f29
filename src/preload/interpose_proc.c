/*
 * interpose_proc -- the hooks of calls that start another process or
 * program: fork (the child shares the open files), exec (this image ends:
 * its counters reach the device first) and spawns (posix_spawn, system,
 * popen: a child runs another program with this process's descriptors),
 * all of which lease.h follows; _exit (this image ends without atexit);
 * and the disposition of the signal of tdax's leases.
 *
 * glibc's execl, execlp, execle, system and popen call its internal execve
 * and clone, which no hook sees: each is hooked for itself. A program that
 * skips libc is started through tdax run (launch.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/sys.h"
#include "core/trace.h"
#include "core/util.h"
#include "preload/promoted.h"
#include "preload/fdtable.h"
#include "preload/interpose.h"
#include "preload/launch.h"
#include "preload/start.h"
#include "preload/lease.h"
#include "preload/state.h"

/* A child will run another program with the descriptors it inherits
 * (all: file actions may dup any of them onto another number). */
static void handing_on(bool all)
{
	if (tdax_fds) {
		tdax_promoted_settle_all(); /* its leases go: the files get their bytes */
		tdax_lease_hand_on(all);
	}
}

/* This image ends: its counters and trace reach the device. */
static void image_ends(void)
{
	if (tdax_on()) {
		tdax_stats_flush();
		tdax_trace_flush();
	}
}

/* The new image starts its own tdax (it inherits LD_PRELOAD and adopts
 * the open descriptors). */
static void before_exec(void)
{
	image_ends();
	handing_on(false);
}

/* ---- _exit ------------------------------------------------------------ */

/*
 * _exit and _Exit skip the atexit handlers, tdax's among them (start.c):
 * a promoted file would lack its deferred bytes until some process's
 * write-back found the orphan -- a parent that waits for its child and
 * reads the file would read it short -- and the counters not yet added
 * would be lost. So the files get their bytes first, as at an exec. Not
 * in a child of a clone that shares this memory without a fork (its
 * process ID is not the one tdax knows): what it would settle is its
 * parent's. (glibc's own children -- posix_spawn's -- exit without this
 * hook.)
 */
static void before_exit(void)
{
	if (!tdax_fds || (uint32_t)tdax_syscall(SYS_getpid) != tdax_pid())
		return;
	image_ends();
	tdax_promoted_settle_all();
}

EXPORT void _exit(int status)
{
	before_exit();
	TDAX_REAL(_exit)(status);
	for (;;)
		tdax_syscall(SYS_exit_group, status);
}

EXPORT void _Exit(int status)
{
	_exit(status);
}

/* ---- exec ------------------------------------------------------------ */

/* tdax run, started for a program that skips libc (launch.h). */
static int exec_(const char *path, char *const argv[], char *const envp[], void *ctx)
{
	(void)ctx;
	return TDAX_REAL(execve)(path, argv, envp);
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	before_exec();
	tdax_launch(path, false, argv, envp, exec_, NULL);
	return TDAX_REAL(execve)(path, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[])
{
	before_exec();
	tdax_launch(path, false, argv, environ, exec_, NULL);
	return TDAX_REAL(execve)(path, argv, environ);
}

EXPORT int execvp(const char *file, char *const argv[])
{
	before_exec();
	tdax_launch(file, true, argv, environ, exec_, NULL);
	return TDAX_REAL(execvpe)(file, argv, environ);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	before_exec();
	tdax_launch(file, true, argv, envp, exec_, NULL);
	return TDAX_REAL(execvpe)(file, argv, envp);
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	before_exec();
	return REAL(fexecve)(fd, argv, envp);
}

EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	before_exec();
	return REAL(execveat)(dirfd, path, argv, envp, flags);
}

/* The list of an execl-style call as an array: argv must have room for
 * arg, the rest up to the terminating NULL, and that NULL; the pointer
 * after it (execle's envp) is returned. */
static char *const *list_to_argv(char **argv, const char *arg, va_list ap)
{
	size_t i = 0;
	argv[i++] = (char *)arg;
	while ((argv[i++] = va_arg(ap, char *)))
		;
	return va_arg(ap, char *const *);
}

static size_t list_length(va_list ap)
{
	size_t n = 2; /* the first argument and the NULL */
	while (va_arg(ap, char *))
		n++;
	return n;
}

#define LIST_TO_ARGV(arg, argv, after)                  \
	va_list ap_;                                    \
	va_start(ap_, arg);                             \
	char *argv[list_length(ap_)];                   \
	va_end(ap_);                                    \
	va_start(ap_, arg);                             \
	char *const *after = list_to_argv(argv, arg, ap_); \
	va_end(ap_)

EXPORT int execl(const char *path, const char *arg, ...)
{
	LIST_TO_ARGV(arg, argv, envp);
	(void)envp;
	return execv(path, argv);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
	LIST_TO_ARGV(arg, argv, envp);
	(void)envp;
	return execvp(file, argv);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
	LIST_TO_ARGV(arg, argv, envp);
	return execve(path, argv, envp);
}

/* ---- fork ------------------------------------------------------------ */

/* The child shares every open file: lease.h follows it (the leases went in
 * the prepare handler, start.c). */
EXPORT pid_t fork(void)
{
	pid_t pid = REAL(fork)();
	if (pid > 0 && tdax_fds)
		tdax_lease_forked(pid);
	return pid;
}

/* The C library's other public name of fork (GLIBC_2.2.5). */
EXPORT_ALIAS(__fork, fork);

/* _Fork (glibc 2.34) runs no pthread_atfork handler: tdax's own run here
 * (a child must not append into its parent's log segment), the
 * application's do not, as without tdax. */
EXPORT pid_t _Fork(void)
{
	tdax_fork_prepare();
	return tdax_fork_done(REAL(_Fork)());
}

/* daemon() forks, and in its child points 0, 1 and 2 at /dev/null with its
 * own dup2s, which no hook sees: their entries go (a promoted file there is
 * demoted first), as the dup2 hook would let them go -- an entry left
 * named the old file, and a pwrite to /dev/null through it was logged as
 * that file's bytes. */
EXPORT int daemon(int nochdir, int noclose)
{
	for (int fd = STDIN_FILENO; !noclose && fd <= STDERR_FILENO; fd++)
		tdax_promoted_settle_fd(fd);
	int r = REAL(daemon)(nochdir, noclose);
	for (int fd = STDIN_FILENO; r == 0 && !noclose && fd <= STDERR_FILENO; fd++) {
		tdax_fd_forget(fd);
		tdax_inherited_closed(fd);
	}
	return r;
}

/* ---- spawn ----------------------------------------------------------- */

struct spawn {
	pid_t *pid;
	const posix_spawn_file_actions_t *fa;
	const posix_spawnattr_t *attr;
};

/* tdax run, spawned for a program that skips libc (launch.h). */
static int spawn_(const char *path, char *const argv[], char *const envp[], void *ctx)
{
	const struct spawn *s = ctx;
	return REAL(posix_spawn)(s->pid, path, s->fa, s->attr, argv, envp);
}

EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	handing_on(true);
	if (tdax_launch(path, false, argv, envp, spawn_, &(struct spawn){ pid, fa, attr }))
		return 0;
	return REAL(posix_spawn)(pid, path, fa, attr, argv, envp);
}

EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	handing_on(true);
	if (tdax_launch(file, true, argv, envp, spawn_, &(struct spawn){ pid, fa, attr }))
		return 0;
	return REAL(posix_spawnp)(pid, file, fa, attr, argv, envp);
}

EXPORT int system(const char *command)
{
	handing_on(false);
	return REAL(system)(command);
}

EXPORT FILE *popen(const char *command, const char *type)
{
	handing_on(false);
	return REAL(popen)(command, type);
}

/* ---- signals --------------------------------------------------------- */

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (act)
		tdax_lease_signal_claimed(sig);
	return TDAX_REAL(sigaction)(sig, act, old);
}

EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	tdax_lease_signal_claimed(sig);
	return REAL(signal)(sig, handler);
}
