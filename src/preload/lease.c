/*
 * lease -- write leases on the open files of managed descriptors (lease.h).
 */
#define _GNU_SOURCE
#include "preload/lease.h"
#include "preload/wake.h"
#include "core/sys.h"
#include "preload/mode.h"
#include "core/testaid.h"
#include "core/util.h"
#include "preload/state.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

_Atomic uint32_t tdax_lease_epoch = 1;
_Atomic uint64_t tdax_lease_grants;

/* Descriptors opened at an epoch below this one were not opened by this
 * process (inherited across fork) or were handed on: never leased. */
static _Atomic uint32_t born = 1;

/*
 * Children of fork, with the epoch each was forked at: while one lives, a
 * descriptor opened before its fork (its open file is the child's too) is
 * not leased. Were this process to die first, its lease would stay with
 * the child's open file with nobody to answer a break: another open would
 * wait out lease-break-time. A child that execs or spawns hands the open
 * file on for good (rt.handed_on).
 */
#define KIDS 16
static struct {
	_Atomic pid_t pid;
	uint32_t epoch;
} kids[KIDS];

/* After a refusal (another open exists) or a break: when to try again. */
#define RETRY_MS 100u

/* The leases this process holds, as descriptor number + 1 (0: free): a
 * lease needs a place here, so that a hand-over or the exit finds them. */
#define SLOTS 16
static _Atomic int slots[SLOTS];

/* Breaks of leases on promoted files (bypass.h), as descriptor number + 1:
 * the write-back thread demotes the file first, then lets the lease go
 * (the handler cannot: writing the records back takes locks). */
static _Atomic int breaking[SLOTS];

static _Atomic pid_t owner_tid; /* the write-back thread (signals go to it); 0: none yet */
static int pidfd = -1;          /* this process, in that thread's descriptor table */
static _Atomic bool off;        /* no leases in this process (any more) */
static uint32_t trust_ms = TDAX_LEASE_TRUST_MS;

/* The coarse clock in ms, as the entries keep it (wraps after 49 days:
 * only differences are taken). */
static uint32_t now_ms(void)
{
	return (uint32_t)(tdax_coarse_ns() / 1000000u);
}
#ifdef TDAX_TEST_BUILD
/* Test aids: TDAX_TEST_LEASE_TRUST_MS sets the trust of a look;
 * TDAX_TEST_LEASE_DEAF=1 makes the handler ignore breaks (a lost signal:
 * the other open then waits out lease-break-time). */
static bool deaf;
#endif

/* The signal of a break (TDAX_LEASE_SIGNAL, SIGRTMAX - 2 by default): one
 * the application does not use; one that sets its own disposition for it
 * turns leases off in its process. */
static int lease_signal(void)
{
	return tdax_rt.lease_signal;
}

static bool ours(const struct tdax_fd *e)
{
	uint32_t in = atomic_load_explicit(&e->opened_in, memory_order_relaxed);
	return in != 0 && in >= atomic_load_explicit(&born, memory_order_relaxed);
}

/* Is a child forked after epoch `in` alive? (A child reaped is gone; one
 * not reaped yet has closed its descriptors but still counts.) */
static bool shared_with_a_child(uint32_t in)
{
	bool shared = false;
	for (int i = 0; i < KIDS; i++) {
		pid_t pid = atomic_load(&kids[i].pid);
		if (!pid)
			continue;
		if (pid < 0)
			shared = true; /* being filled in */
		else if (tdax_syscall(SYS_kill, pid, 0) != 0 && errno == ESRCH)
			atomic_compare_exchange_strong(&kids[i].pid, &pid, 0);
		else if (kids[i].epoch > in)
			shared = true;
	}
	return shared;
}

static int take_slot(int fd)
{
	for (int i = 0; i < SLOTS; i++) {
		int none = 0;
		if (atomic_compare_exchange_strong(&slots[i], &none, fd + 1))
			return i;
	}
	return -1;
}

/* false: fd held no lease of this process's (one inherited across fork is
 * the parent's, not this process's to let go). */
static bool free_slot(int fd)
{
	for (int i = 0; i < SLOTS; i++) {
		int mine = fd + 1;
		if (atomic_compare_exchange_strong(&slots[i], &mine, 0))
			return true;
	}
	return false;
}

/* Let the lease on the application's descriptor fd go, from any thread: the
 * write-back thread reaches the descriptor through pidfd_getfd (its own
 * table has other numbers; closing its copy drops no lock of the
 * application's, whose POSIX locks belong to the application's table). */
static void let_go(int fd)
{
	if (!tdax_fds_private) {
		tdax_syscall(SYS_fcntl, fd, F_SETLEASE, F_UNLCK);
		return;
	}
	int g = (int)tdax_syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	if (g >= 0) {
		tdax_syscall(SYS_fcntl, g, F_SETLEASE, F_UNLCK);
		tdax_syscall(SYS_close, g);
	}
}

/*
 * A break: another open of the file waits in the kernel. The state goes
 * first, so that no sync trusts the lease once the other open can go on;
 * then the lease. Runs on the write-back thread (F_SETOWN_EX), or on any
 * thread if a signal came in the moment before that was set.
 */
static void on_break(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
#ifdef TDAX_TEST_BUILD
	if (deaf)
		return;
#endif
	int saved = errno;
	int fd = si->si_fd;
	if (fd >= 0 && fd < TDAX_MAX_FDS && tdax_fds) {
		struct tdax_fd *e = &tdax_fds[fd];
		atomic_store(&e->lease_retry_ms, now_ms() + RETRY_MS);
		bool held = atomic_exchange(&e->lease, TDAX_LEASE_NONE) == TDAX_LEASE_HELD;
		/* (After the exchange: a promotion stores the mode, then looks
		 * at the lease -- one of the two sees the other.) */
		if (held && atomic_load(&tdax_fds_promoted) &&
		    __atomic_load_n(&e->mode, __ATOMIC_SEQ_CST) == TDAX_MODE_BYPASS) {
			for (int i = 0; i < SLOTS; i++) {
				int none = 0;
				if (atomic_compare_exchange_strong(&breaking[i], &none, fd + 1)) {
					tdax_count(TDAX_ST_LEASE_BREAKS, 1);
					tdax_wake(); /* a pass now, not at the next interval */
					errno = saved;
					return;
				}
			}
		}
		if (held)
			free_slot(fd);
	}
	let_go(fd);
	tdax_count(TDAX_ST_LEASE_BREAKS, 1);
	errno = saved;
}

/* lease-break-time: how long the kernel waits for a holder that does not
 * answer. The trust of a look (TDAX_LEASE_TRUST_MS) must be far below. */
static bool break_time_long_enough(void)
{
	char buf[32];
	int fd = tdax_sys_open("/proc/sys/fs/lease-break-time", O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return false;
	ssize_t n = tdax_syscall(SYS_read, fd, buf, sizeof(buf) - 1);
	tdax_sys_close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	return atoi(buf) >= 1;
}

void tdax_lease_thread_start(void)
{
	if (!tdax_rt.leases || atomic_load(&off))
		return;
#ifdef TDAX_TEST_BUILD
	const char *t = TDAX_TEST_ENV("LEASE_TRUST_MS"), *d = TDAX_TEST_ENV("LEASE_DEAF");
	if (t)
		trust_ms = (uint32_t)strtoul(t, NULL, 10);
	deaf = d && !strcmp(d, "1");
#endif
	int sig = lease_signal();
	struct sigaction old;
	if (!break_time_long_enough() || TDAX_REAL(sigaction)(sig, NULL, &old) != 0 ||
	    ((old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != on_break : old.sa_handler != SIG_DFL)) {
		atomic_store(&off, true); /* the application's signal, or no way to answer in time */
		return;
	}
	if (tdax_fds_private) {
		pidfd = (int)tdax_syscall(SYS_pidfd_open, getpid(), 0);
		if (pidfd < 0) {
			atomic_store(&off, true);
			return;
		}
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_break;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&sa.sa_mask);
	if (TDAX_REAL(sigaction)(sig, &sa, NULL) != 0) {
		atomic_store(&off, true);
		return;
	}
	sigset_t one;
	sigemptyset(&one);
	sigaddset(&one, sig);
	pthread_sigmask(SIG_UNBLOCK, &one, NULL);
	atomic_store(&owner_tid, (pid_t)tdax_syscall(SYS_gettid));
}

bool tdax_lease_check(int fd, const struct tdax_file_rt *rt)
{
	struct tdax_fd *e = &tdax_fds[fd];
	if (!ours(e) || atomic_load(&rt->handed_on)) {
		tdax_lease_drop(fd);
		return false;
	}
	uint32_t now = now_ms();
	if (now - atomic_load_explicit(&e->lease_seen_ms, memory_order_relaxed) < trust_ms)
		return true;
	/* Look again: a break in progress reads F_UNLCK (the other open still
	 * waits then); a number closed and reused behind tdax's back names a
	 * file without tdax's lease. */
	if (tdax_syscall(SYS_fcntl, fd, F_GETLEASE) != F_WRLCK) {
		tdax_lease_drop(fd);
		return false;
	}
	if (atomic_load(&e->lease) != TDAX_LEASE_HELD)
		return false; /* broken since */
	atomic_store_explicit(&e->lease_seen_ms, now, memory_order_relaxed);
	return true;
}

void tdax_lease_try(int fd, const struct tdax_file_rt *rt)
{
	struct tdax_fd *e = &tdax_fds[fd];
	if (atomic_load_explicit(&e->lease, memory_order_relaxed) != TDAX_LEASE_NONE || !ours(e) ||
	    (e->flags & (TDAX_FD_DSYNC | TDAX_FD_SYNC | TDAX_FD_NOLOG)))
		return;
	/* (Threads syncing it at once may lose a count: a sync later, then.) */
	uint8_t seen = __atomic_load_n(&e->guarded, __ATOMIC_RELAXED);
	if (seen + 1u < TDAX_LEASE_AFTER_SYNCS) {
		__atomic_store_n(&e->guarded, (uint8_t)(seen + 1), __ATOMIC_RELAXED);
		return;
	}
	pid_t tid = atomic_load(&owner_tid);
	uint32_t now = now_ms();
	uint32_t retry = atomic_load(&e->lease_retry_ms); /* 0: any time */
	if (!tid || atomic_load(&off) || atomic_load(&rt->handed_on) ||
	    (retry && (int32_t)(retry - now) > 0))
		return;
	if (shared_with_a_child(atomic_load(&e->opened_in))) {
		atomic_store(&e->lease_retry_ms, now + RETRY_MS);
		return;
	}
	uint32_t none = TDAX_LEASE_NONE;
	if (take_slot(fd) < 0) {
		atomic_store(&e->lease_retry_ms, now + RETRY_MS);
		return;
	}
	if (!atomic_compare_exchange_strong(&e->lease, &none, TDAX_LEASE_TAKING)) {
		free_slot(fd); /* another thread of the process is at it */
		return;
	}
	/* Where a break is told first: setting the lease keeps an owner set
	 * before it, so no break can signal the whole process. */
	struct f_owner_ex own = { .type = F_OWNER_TID, .pid = tid };
	int err = 0;
	if (tdax_syscall(SYS_fcntl, fd, F_SETSIG, lease_signal()) != 0 ||
	    tdax_syscall(SYS_fcntl, fd, F_SETOWN_EX, &own) != 0 ||
	    tdax_syscall(SYS_fcntl, fd, F_SETLEASE, F_WRLCK) != 0)
		err = errno;
	uint32_t taking = TDAX_LEASE_TAKING;
	if (err) {
		/* EAGAIN: another open exists (try again later); EACCES: not the
		 * file's owner; EINVAL: a file system without leases. */
		atomic_store(&e->lease_retry_ms, now + RETRY_MS);
		atomic_compare_exchange_strong(&e->lease, &taking,
					       err == EAGAIN ? TDAX_LEASE_NONE : TDAX_LEASE_NEVER);
		free_slot(fd);
		return;
	}
	atomic_store(&e->lease_seen_ms, now);
	atomic_fetch_add(&tdax_lease_grants, 1);
	if (!atomic_compare_exchange_strong(&e->lease, &taking, TDAX_LEASE_HELD)) {
		free_slot(fd); /* broken already: the handler let it go */
		return;
	}
	tdax_count(TDAX_ST_LEASES, 1);
}

int tdax_lease_borrow(uint32_t idx, uint32_t gen)
{
	if (!tdax_fds_private)
		return -1; /* a copy in the application's table would be seen by it */
	for (int i = 0; i < SLOTS; i++) {
		int fd = atomic_load(&slots[i]) - 1;
		if (fd < 0)
			continue;
		const struct tdax_fd *e = &tdax_fds[fd];
		if (e->file_plus1 == idx + 1 && e->gen == gen &&
		    atomic_load(&e->lease) == TDAX_LEASE_HELD) {
			int g = (int)tdax_syscall(SYS_pidfd_getfd, pidfd, fd, 0);
			if (g >= 0)
				return g;
		}
	}
	return -1;
}

void tdax_lease_drop(int fd)
{
	if (fd < 0 || fd >= TDAX_MAX_FDS || !tdax_fds)
		return;
	struct tdax_fd *e = &tdax_fds[fd];
	if (tdax_lease_finish_break(fd))
		return;
	if (atomic_load_explicit(&e->lease, memory_order_relaxed) == TDAX_LEASE_NONE)
		return;
	if (atomic_exchange(&e->lease, TDAX_LEASE_NONE) == TDAX_LEASE_HELD && free_slot(fd))
		let_go(fd);
}

int tdax_lease_next_break(void)
{
	for (int i = 0; i < SLOTS; i++) {
		int fd = atomic_load(&breaking[i]) - 1;
		if (fd >= 0)
			return fd;
	}
	return -1;
}

bool tdax_lease_finish_break(int fd)
{
	for (int i = 0; i < SLOTS; i++) {
		int mine = fd + 1;
		/* A load first: this runs at every close, and a locked
		 * instruction per slot cost more than the rest of the hook. */
		if (atomic_load_explicit(&breaking[i], memory_order_relaxed) == mine &&
		    atomic_compare_exchange_strong(&breaking[i], &mine, 0)) {
			free_slot(fd);
			let_go(fd);
			return true;
		}
	}
	return false;
}

int tdax_lease_reach(int fd)
{
	if (!tdax_fds_private)
		return fd;
	return pidfd < 0 ? -1 : (int)tdax_syscall(SYS_pidfd_getfd, pidfd, fd, 0);
}

void tdax_lease_drop_range(unsigned first, unsigned last)
{
	for (int i = 0; i < SLOTS; i++) {
		int fd = atomic_load(&slots[i]) - 1;
		if (fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last)
			tdax_lease_drop(fd);
	}
}

void tdax_lease_release_all(bool never)
{
	if (never)
		atomic_store(&off, true);
	tdax_lease_drop_range(0, ~0u);
}

void tdax_lease_after_fork(void)
{
	atomic_fetch_add(&tdax_lease_grants, 1);
	atomic_store(&born, atomic_fetch_add(&tdax_lease_epoch, 1) + 1);
	for (int i = 0; i < SLOTS; i++) {
		atomic_store(&slots[i], 0);
		atomic_store(&breaking[i], 0);
	}
	for (int i = 0; i < KIDS; i++)
		atomic_store(&kids[i].pid, 0); /* the parent's children */
	atomic_store(&owner_tid, 0);
	pidfd = -1; /* a number of the parent's write-back thread's table */
}

/* fd's open file may be written by a program tdax does not see. */
static void handed(struct tdax_fd *e)
{
	atomic_store(&e->opened_in, 0);
	if (e->file_plus1 != TDAX_FD_UNREGISTERED)
		atomic_store(&tdax_rt_of(e->file_plus1 - 1)->handed_on, 1);
}

void tdax_lease_before_fork(void)
{
	tdax_lease_release_all(false);
	atomic_fetch_add(&tdax_lease_epoch, 1);
	atomic_fetch_add(&tdax_lease_grants, 1);
	/* What this process inherited goes on to a grandchild of the process
	 * that opened it, which follows its own children only: an open file
	 * handed on, as far as that one knows. */
	int hi = tdax_fd_hiwater();
	for (int fd = 0; fd <= hi; fd++) {
		struct tdax_fd *e = &tdax_fds[fd];
		if (e->file_plus1 == TDAX_FD_UNREGISTERED || (e->file_plus1 && !ours(e)))
			handed(e);
	}
}

void tdax_lease_hand_on(bool all)
{
	if (!tdax_fds)
		return;
	int hi = tdax_fd_hiwater();
	for (int fd = 0; fd <= hi; fd++) {
		struct tdax_fd *e = &tdax_fds[fd];
		if (!e->file_plus1)
			continue;
		int fl = all ? 0 : (int)tdax_syscall(SYS_fcntl, fd, F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC))
			handed(e);
	}
	tdax_lease_release_all(false);
	atomic_store(&born, atomic_fetch_add(&tdax_lease_epoch, 1) + 1);
}

void tdax_lease_forked(pid_t child)
{
	uint32_t epoch = atomic_load(&tdax_lease_epoch);
	shared_with_a_child(epoch); /* (frees the places of children gone) */
	for (int i = 0; i < KIDS; i++) {
		pid_t none = 0;
		if (atomic_compare_exchange_strong(&kids[i].pid, &none, -1)) { /* taken, not filled */
			kids[i].epoch = epoch;
			atomic_store(&kids[i].pid, child);
			return;
		}
	}
	atomic_store(&born, epoch); /* no place to follow it: what is open now is never leased */
}

void tdax_lease_sent(int fd)
{
	const struct tdax_fd *sent = tdax_fd_get(fd);
	if (!sent)
		return;
	/* Every descriptor of the same file: a dup of it, the one it came from. */
	uint64_t dev = sent->dev, ino = sent->ino;
	for (int i = tdax_fd_naming(dev, ino, 0); i >= 0; i = tdax_fd_naming(dev, ino, i + 1)) {
		tdax_lease_drop(i);
		handed(&tdax_fds[i]);
	}
}

void tdax_lease_app_uses(int fd)
{
	if (!tdax_fd_get(fd))
		return;
	tdax_lease_drop(fd);
	atomic_store(&tdax_fds[fd].opened_in, 0);
}

void tdax_lease_signal_claimed(int sig)
{
	if (sig == lease_signal() && !atomic_load(&off))
		tdax_lease_release_all(true);
}
