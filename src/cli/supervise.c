/*
 * supervise -- tdax run in bypass mode: stay the parent of the command.
 *
 * A process that dies with files promoted (bypass mode) leaves bytes in
 * the device alone, not in the files (core/files.h rt.deferred). tdax run
 * forks the command and stays behind as a child subreaper
 * (PR_SET_CHILD_SUBREAPER: a daemon the command starts becomes its child
 * when its own parent exits), reaps every process below it, and after each
 * death writes in what a dead promoter deferred (core/recover.h
 * orphans_only) -- at once, not at the next pass of some other process.
 * Nothing is in the way of an open by someone else in between: without a
 * kernel part (the paper's ktdm) that window cannot be closed, only made
 * short (docs/durability.md).
 *
 * Signals: one sent to tdax run by a process (kill) goes on to the command;
 * one the kernel sent (a terminal's ^C reaches the whole process group, so
 * the command got it too) does not, or it would get it twice. tdax run
 * ends when the command and every process that became its child have
 * ended, with the command's status; a command killed by a signal makes
 * tdax run die of the same signal (without a core dump of its own).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/supervise.h"
#include "core/device.h"
#include "core/env.h"
#include "core/recover.h"

/* What is passed on to the command; SIGCHLD is waited for too. */
static const int forwarded[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2,
				 SIGWINCH, SIGCONT, SIGALRM, SIGPIPE };

/* Write in what dead promoters deferred; say so if it fails. */
static void write_orphans_back(struct tdax_device *dev)
{
	struct tdax_err e;
	int rc = tdax_recover_orphans(dev, &e);
	if (rc < 0)
		fprintf(stderr, "tdax: writing back what a dead process left in %s failed: %s; run "
			"'tdax recover --device %s'\n", dev->path, e.msg, dev->path);
	else if (rc > 0)
		fprintf(stderr, "tdax: some files a dead process had promoted keep their bytes in %s; "
			"see 'tdax recover --device %s'\n", dev->path, dev->path);
}

/* Die as the command died: of its signal, or with its exit status. */
static int end_as(int status)
{
	if (!WIFSIGNALED(status))
		return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	int sig = WTERMSIG(status);
	setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 }); /* the command's core, not ours */
	signal(sig, SIG_DFL);
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, sig);
	sigprocmask(SIG_UNBLOCK, &s, NULL);
	raise(sig);
	return 128 + sig; /* a signal that does not kill (SIGCONT ...) */
}

/* The signals the wait takes: SIGCHLD and the forwarded ones. */
static void watched_set(sigset_t *watched)
{
	sigemptyset(watched);
	sigaddset(watched, SIGCHLD);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaddset(watched, forwarded[i]);
}

pid_t tdax_supervise_fork(const char *what, sigset_t *old)
{
	/* Before the fork: no signal is missed between it and the wait. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
		fprintf(stderr, "tdax: cannot become a subreaper (%s): a daemon %s starts is not "
			"this process's to wait for\n", strerror(errno), what);
	sigset_t watched;
	watched_set(&watched);
	sigprocmask(SIG_BLOCK, &watched, old);
	pid_t cmd = fork();
	if (cmd < 0)
		fprintf(stderr, "tdax: cannot start %s: fork failed: %s\n", what, strerror(errno));
	if (cmd == 0)
		prctl(PR_SET_CHILD_SUBREAPER, 0);
	return cmd;
}

int tdax_supervise(const char *device, char *const argv[])
{
	sigset_t old;
	pid_t cmd = tdax_supervise_fork(argv[0], &old);
	if (cmd < 0)
		return 126;
	if (cmd == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[0], argv);
		fprintf(stderr, "tdax: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	return tdax_supervise_wait(cmd, device);
}

int tdax_supervise_wait(pid_t cmd, const char *device)
{
	sigset_t watched;
	watched_set(&watched);
	struct tdax_device *dev = NULL;
	struct tdax_err e;
	if (device && tdax_device_open(device, tdax_env_open_flags(), &dev, &e) != 0)
		fprintf(stderr, "tdax: %s; what the command defers is written back by the next "
			"process on the device or 'tdax recover'\n", e.msg);
	int status = 0;
	bool cmd_done = false;
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&watched, &si);
		if (sig < 0)
			continue; /* EINTR: a stop and continue */
		if (sig != SIGCHLD) {
			if (si.si_code == SI_USER || si.si_code == SI_QUEUE || si.si_code == SI_TKILL)
				if (!cmd_done)
					kill(cmd, sig);
			continue;
		}
		bool reaped = false, left = true;
		for (;;) {
			int st;
			pid_t p = waitpid(-1, &st, WNOHANG);
			if (p == 0)
				break;
			if (p < 0) {
				left = errno != ECHILD;
				break;
			}
			reaped = true;
			if (p == cmd) {
				status = st;
				cmd_done = true;
			}
		}
		if (reaped && dev)
			write_orphans_back(dev);
		if (!left)
			break;
	}
	if (dev)
		tdax_device_close(dev);
	return end_as(status);
}
