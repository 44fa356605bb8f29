/*
 * intercept -- the start of tdax run --intercept syscall (intercept.h): a
 * seccomp filter that hands to a supervisor (SECCOMP_RET_USER_NOTIF) the
 * file system calls tdax must see, whoever makes them: a Go runtime, a
 * static binary, inline `syscall` instructions.
 *
 * Which: every open for writing, creating or truncating (the supervisor
 * makes it and places the descriptor at TDAX_INTERCEPT_FD_BASE or above),
 * every change of names, and the writes, syncs, closes, duplications and
 * shared mappings of descriptors at the base or above -- so a socket's or a
 * pipe's writes, at the low numbers the kernel hands out, never leave the
 * kernel, nor do reads, futexes or anything else.
 *
 * tdax run forks: the child installs the filter and passes its listener
 * up, then becomes the command (without libtdax.so: the supervisor does
 * for it what the hooks would); tdax run becomes the supervisor by
 * executing itself as `tdax serve-syscalls` with libtdax.so preloaded, so
 * that the calls it makes for the command go through the same hooks, the
 * same log and the same promise as any libc program's (notify.c).
 *
 * The filter is inherited by every process the command starts and kept
 * across exec. SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV keeps a trapped call
 * from being restarted by a signal once the supervisor has it (Go signals
 * its threads often): a write made twice would be appended twice. A
 * system call of another ABI (int 0x80, x32) fails with ENOSYS rather
 * than pass unseen.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/intercept.h"
#include "cli/supervise.h"
#include "core/fsioctl.h"

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif

/* Always handed over: they change names, or end what the supervisor keeps. */
static const int always[] = {
	SYS_rename, SYS_renameat, SYS_renameat2, SYS_unlink, SYS_unlinkat, SYS_truncate, SYS_creat,
	SYS_close_range, SYS_execve, SYS_execveat, SYS_io_uring_setup, SYS_io_submit,
	/* Its flags lie behind a pointer: a thread may get a table of its own. */
	SYS_clone3,
	/* A root or mount namespace of its own: paths name other files; a
	 * sandbox the supervisor is not in. */
	SYS_chroot, SYS_pivot_root, SYS_setns, SYS_landlock_restrict_self,
	/* They pass a descriptor on, to a low number of its receiver's. */
	SYS_sendmsg, SYS_sendmmsg, SYS_pidfd_getfd,
	/* They make durable what tdax did not log too (checkpoint.h). */
	SYS_sync, SYS_syncfs,
};

/* Handed over when their descriptor (argument 0) is at TDAX_INTERCEPT_FD_BASE
 * or above: one the supervisor placed there (intercept.h). */
static const int on_placed[] = {
	SYS_write, SYS_pwrite64, SYS_writev, SYS_pwritev, SYS_pwritev2, SYS_fsync, SYS_fdatasync,
	SYS_ftruncate, SYS_fallocate, SYS_sendfile, SYS_close, SYS_dup,
};

/* ioctl requests handed over on a placed descriptor: those that change
 * the file's bytes. */
static const unsigned changing[] = {
	FICLONE, FICLONERANGE, TDAX_XFS_IOC_UNRESVSP, TDAX_XFS_IOC_UNRESVSP64, TDAX_XFS_IOC_ZERO_RANGE,
	TDAX_XFS_IOC_EXCHANGE_RANGE, TDAX_XFS_IOC_COMMIT_RANGE,
};

enum { NEXT = -1, ALLOW = -2, NOTIFY = -3, NOSYS = -4 };

struct prog {
	struct sock_filter f[160]; /* (a jump reaches 255 ahead at most) */
	int jt[160], jf[160];      /* symbolic targets, resolved by finish() */
	unsigned n;
};

static void emit(struct prog *p, unsigned short code, unsigned k, int jt, int jf)
{
	if (p->n >= sizeof(p->f) / sizeof(p->f[0]))
		abort(); /* a filter longer than its table: a build-time mistake */
	p->f[p->n] = (struct sock_filter){ code, 0, 0, k };
	p->jt[p->n] = jt;
	p->jf[p->n] = jf;
	p->n++;
}

static unsigned arg_lo(int i)
{
	return (unsigned)offsetof(struct seccomp_data, args[i]); /* little-endian: the low word */
}

/* "if the call is nr and its argument arg has a bit of mask (and none of
 * unless), hand it over" */
static void emit_flagged(struct prog *p, int nr, int arg, unsigned mask, unsigned unless)
{
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, NEXT, unless ? 3 : 2);
	emit(p, BPF_LD | BPF_W | BPF_ABS, arg_lo(arg), NEXT, NEXT);
	if (unless)
		emit(p, BPF_JMP | BPF_JSET | BPF_K, unless, ALLOW, NEXT);
	emit(p, BPF_JMP | BPF_JSET | BPF_K, mask, NOTIFY, ALLOW);
}

/* "if the call is nr and its descriptor argument arg (or arg2, unless -1)
 * is a placed one, hand it over". Descriptors compare as unsigned: -1 is
 * handed over too (and fails there as it would have). */
static void emit_placed(struct prog *p, int nr, int arg, int arg2)
{
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, NEXT, arg2 < 0 ? 2 : 4);
	emit(p, BPF_LD | BPF_W | BPF_ABS, arg_lo(arg), NEXT, NEXT);
	emit(p, BPF_JMP | BPF_JGE | BPF_K, TDAX_INTERCEPT_FD_BASE, NOTIFY, arg2 < 0 ? ALLOW : NEXT);
	if (arg2 >= 0) {
		emit(p, BPF_LD | BPF_W | BPF_ABS, arg_lo(arg2), NEXT, NEXT);
		emit(p, BPF_JMP | BPF_JGE | BPF_K, TDAX_INTERCEPT_FD_BASE, NOTIFY, ALLOW);
	}
}

static void finish(struct prog *p)
{
	unsigned allow = p->n, notify = p->n + 1, nosys = p->n + 2;
	emit(p, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, NEXT, NEXT);
	emit(p, BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF, NEXT, NEXT);
	emit(p, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS, NEXT, NEXT);
	for (unsigned i = 0; i < p->n; i++) {
		int *t[2] = { &p->jt[i], &p->jf[i] };
		unsigned char *out[2] = { &p->f[i].jt, &p->f[i].jf };
		for (int j = 0; j < 2; j++) {
			int to = *t[j];
			unsigned dest = to == ALLOW ? allow : to == NOTIFY ? notify : to == NOSYS ? nosys
				      : to == NEXT ? i + 1 : i + 1 + (unsigned)to;
			*out[j] = (unsigned char)(dest - i - 1);
		}
	}
}

static struct sock_fprog build(struct prog *p)
{
	p->n = 0;
	emit(p, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch), NEXT, NEXT);
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, NEXT, NOSYS);
	emit(p, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr), NEXT, NEXT);
	emit(p, BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, NOSYS, NEXT); /* x32 */
	for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); i++)
		emit(p, BPF_JMP | BPF_JEQ | BPF_K, (unsigned)always[i], NOTIFY, NEXT);
	for (size_t i = 0; i < sizeof(on_placed) / sizeof(on_placed[0]); i++)
		emit_placed(p, on_placed[i], 0, -1);
	emit_placed(p, SYS_copy_file_range, 2, -1); /* (in, off, out, ...): the one written */
	emit_placed(p, SYS_splice, 2, -1);
	emit_placed(p, SYS_dup2, 0, 1); /* from a placed one, or over one */
	emit_placed(p, SYS_dup3, 0, 1);
	/* fcntl(placed, F_DUPFD, F_DUPFD_CLOEXEC or F_SETFL, ...) */
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, SYS_fcntl, NEXT, 6);
	emit(p, BPF_LD | BPF_W | BPF_ABS, arg_lo(1), NEXT, NEXT);
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, F_DUPFD, 2, NEXT);
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, F_DUPFD_CLOEXEC, 1, NEXT);
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, F_SETFL, NEXT, ALLOW);
	emit(p, BPF_LD | BPF_W | BPF_ABS, arg_lo(0), NEXT, NEXT);
	emit(p, BPF_JMP | BPF_JGE | BPF_K, TDAX_INTERCEPT_FD_BASE, NOTIFY, ALLOW);
	/* ioctl(placed, request, ...) that changes its bytes: a clone of blocks
	 * into it (FICLONE, FICLONERANGE), which the supervisor makes as it
	 * makes a copy, or a file system's own (fsioctl.h), which takes the
	 * file off the log first. */
	int nreq = (int)(sizeof(changing) / sizeof(changing[0]));
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, NEXT, nreq + 3);
	emit(p, BPF_LD | BPF_W | BPF_ABS, arg_lo(1), NEXT, NEXT);
	for (int i = 0; i < nreq; i++)
		emit(p, BPF_JMP | BPF_JEQ | BPF_K, changing[i], i + 1 < nreq ? nreq - i - 1 : NEXT,
		     i + 1 < nreq ? NEXT : ALLOW);
	emit(p, BPF_LD | BPF_W | BPF_ABS, arg_lo(0), NEXT, NEXT);
	emit(p, BPF_JMP | BPF_JGE | BPF_K, TDAX_INTERCEPT_FD_BASE, NOTIFY, ALLOW);
	/* Opens for writing (the supervisor makes them, and places the
	 * descriptor); shared mappings of a placed file (a writable one's
	 * writes are unseen: its syncs become real; a read-only one is a view,
	 * until a mapping is made writable: any mprotect that asks for
	 * PROT_WRITE, which Go's runtime never makes). */
	emit_flagged(p, SYS_open, 1, O_ACCMODE | O_CREAT | O_TRUNC, 0);
	emit_flagged(p, SYS_openat, 2, O_ACCMODE | O_CREAT | O_TRUNC, 0);
	emit_flagged(p, SYS_open_by_handle_at, 2, O_ACCMODE | O_TRUNC, 0);
	emit_flagged(p, SYS_mprotect, 2, PROT_WRITE, 0);
	emit_flagged(p, SYS_pkey_mprotect, 2, PROT_WRITE, 0);
	/* A thread that gets a descriptor table of its own: its numbers are
	 * no longer its process's (clone3: above); a mount namespace of its
	 * own: its paths name other files. */
	emit_flagged(p, SYS_unshare, 0, CLONE_FILES | CLONE_NEWNS, 0);
	emit_flagged(p, SYS_clone, 0, CLONE_THREAD, CLONE_FILES);
	/* A new file size limit (setrlimit; prlimit64 with one, its pointer
	 * compared word by word): the supervisor writes under the limit the
	 * command started with. */
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, SYS_setrlimit, NEXT, 2);
	emit(p, BPF_LD | BPF_W | BPF_ABS, arg_lo(0), NEXT, NEXT);
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, RLIMIT_FSIZE, NOTIFY, ALLOW);
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, SYS_prlimit64, NEXT, 6);
	emit(p, BPF_LD | BPF_W | BPF_ABS, arg_lo(1), NEXT, NEXT);
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, RLIMIT_FSIZE, NEXT, ALLOW);
	emit(p, BPF_LD | BPF_W | BPF_ABS, arg_lo(2), NEXT, NEXT);
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, NEXT, NOTIFY);
	emit(p, BPF_LD | BPF_W | BPF_ABS, arg_lo(2) + 4, NEXT, NEXT);
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, ALLOW, NOTIFY);
	/* openat2: its flags are behind a pointer a filter cannot follow, and
	 * an open for writing through it would get a low number, its writes
	 * unseen. ENOSYS, as on a kernel before 5.6: programs fall back to
	 * openat. */
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, NOSYS, NEXT);
	emit(p, BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, NEXT, 5);
	emit(p, BPF_LD | BPF_W | BPF_ABS, arg_lo(3), NEXT, NEXT);
	emit(p, BPF_JMP | BPF_JSET | BPF_K, MAP_ANONYMOUS, ALLOW, NEXT);
	emit(p, BPF_JMP | BPF_JSET | BPF_K, MAP_SHARED, NEXT, ALLOW);
	emit(p, BPF_LD | BPF_W | BPF_ABS, arg_lo(4), NEXT, NEXT);
	emit(p, BPF_JMP | BPF_JGE | BPF_K, TDAX_INTERCEPT_FD_BASE, NOTIFY, ALLOW);
	finish(p); /* the last check falls through to ALLOW */
	return (struct sock_fprog){ .len = (unsigned short)p->n, .filter = p->f };
}

/* Install the filter on this (single-threaded) process: its listener, or -1
 * with errno. Without CAP_SYS_ADMIN a filter needs no_new_privs. */
static int install_filter(void)
{
	static struct prog p;
	struct sock_fprog prog = build(&p);
	unsigned long flags = SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
	long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
	if (fd < 0 && errno == EACCES) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
			return -1;
		fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
	}
	return (int)fd;
}

int tdax_intercept_probe(void)
{
	pid_t c = fork();
	if (c < 0)
		return errno;
	if (c == 0)
		_exit(install_filter() >= 0 ? 0 : errno);
	int st;
	while (waitpid(c, &st, 0) < 0)
		if (errno != EINTR)
			return errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : EINVAL;
}

/* The listener of the child's filter, taken from it (pidfd_getfd) once it
 * says its number over sock; -1 if it said none (it then says why). The
 * child cannot send the descriptor itself: its sendmsg is trapped, and
 * nobody serves the filter yet. */
static int take_listener(pid_t child, int sock)
{
	int n, mine = -1;
	if (read(sock, &n, sizeof(n)) != sizeof(n))
		return -1;
	int pidfd = (int)syscall(SYS_pidfd_open, child, 0);
	if (pidfd >= 0)
		mine = (int)syscall(SYS_pidfd_getfd, pidfd, n, 0);
	if (mine < 0)
		fprintf(stderr, "tdax: cannot take over the system calls of process %d: pidfd_getfd: %s\n",
			(int)child, strerror(errno));
	if (pidfd >= 0)
		close(pidfd);
	char done = mine >= 0;
	if (write(sock, &done, 1) != 1 && mine >= 0) {
		close(mine);
		mine = -1;
	}
	return mine;
}

/* The child: filter, hand the listener up, become the command. */
static void become_command(char *const argv[], const char *app_preload, int sock, const sigset_t *old)
{
	if (app_preload && *app_preload)
		setenv("LD_PRELOAD", app_preload, 1);
	else
		unsetenv("LD_PRELOAD");
	int fd = install_filter();
	if (fd < 0) {
		fprintf(stderr, "tdax: cannot trap the system calls of %s: seccomp: %s (needs Linux "
			"5.19 or later); run it with --intercept libc\n", argv[0], strerror(errno));
		_exit(126);
	}
	/* Its number up; the listener stays open here until the supervisor
	 * has its own (a write and a read on a socket are not trapped). */
	char taken = 0;
	if (write(sock, &fd, sizeof(fd)) != sizeof(fd) || read(sock, &taken, 1) != 1 || !taken) {
		fprintf(stderr, "tdax: cannot hand the system calls of %s to tdax\n", argv[0]);
		_exit(126);
	}
	close(fd);
	close(sock);
	sigprocmask(SIG_SETMASK, old, NULL);
	execvp(argv[0], argv);
	fprintf(stderr, "tdax: cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

int tdax_intercept_start(char *const argv[], const char *app_preload)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		fprintf(stderr, "tdax: cannot start %s: socketpair: %s\n", argv[0], strerror(errno));
		return 126;
	}
	sigset_t old; /* the mask is kept across exec: the supervisor misses nothing */
	pid_t cmd = tdax_supervise_fork(argv[0], &old);
	if (cmd < 0) {
		close(sv[0]);
		close(sv[1]);
		return 126;
	}
	if (cmd == 0) {
		close(sv[0]);
		become_command(argv, app_preload, sv[1], &old);
	}
	close(sv[1]);
	int listener = take_listener(cmd, sv[0]);
	close(sv[0]);
	if (listener < 0) { /* the child said why */
		int st;
		waitpid(cmd, &st, 0);
		return WIFEXITED(st) ? WEXITSTATUS(st) : 126;
	}
	char lfd[16], pid[16];
	snprintf(lfd, sizeof(lfd), "%d", listener);
	snprintf(pid, sizeof(pid), "%d", (int)cmd);
	fcntl(listener, F_SETFD, 0);
	setenv("TDAX_SUPERVISOR", "1", 1); /* its libtdax.so manages what it borrows */
	char *const self[] = { "tdax", "serve-syscalls", lfd, pid, NULL };
	execv("/proc/self/exe", self);
	fprintf(stderr, "tdax: cannot become the supervisor of %s: exec /proc/self/exe: %s\n", argv[0],
		strerror(errno));
	return 126;
}
