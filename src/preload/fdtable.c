/*
 * fdtable -- managed descriptors and tdax's own descriptors (fdtable.h).
 */
#define _GNU_SOURCE
#include "preload/fdtable.h"
#include "core/sys.h"
#include "preload/state.h"
#include "preload/tracking.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/close_range.h>
#include <stdio.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

struct tdax_fd *tdax_fds;
_Atomic uint32_t tdax_fds_promoted;

int tdax_fdtable_init(void)
{
	void *p = tdax_sys_mmap(NULL, sizeof(struct tdax_fd) * TDAX_MAX_FDS, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	tdax_fds = p;
	return 0;
}

static _Atomic int hiwater;

void tdax_fd_used(int fd)
{
	int hi = atomic_load_explicit(&hiwater, memory_order_relaxed);
	while (fd > hi && !atomic_compare_exchange_weak(&hiwater, &hi, fd))
		;
}

int tdax_fd_hiwater(void)
{
	return atomic_load(&hiwater);
}

int tdax_fd_naming(uint64_t dev, uint64_t ino, int from)
{
	int hi = tdax_fds ? tdax_fd_hiwater() : -1;
	for (int fd = from < 0 ? 0 : from; fd <= hi; fd++) {
		const struct tdax_fd *e = &tdax_fds[fd];
		if (__atomic_load_n(&e->file_plus1, __ATOMIC_ACQUIRE) && e->dev == dev && e->ino == ino)
			return fd;
	}
	return -1;
}

void tdax_fd_forget(int fd)
{
	if (fd < 0 || fd >= TDAX_MAX_FDS || !tdax_fds)
		return;
	struct tdax_fd *e = &tdax_fds[fd];
	uint32_t plus1 = e->file_plus1;
	if (!plus1)
		return;
	if (e->twin_plus1)
		tdax_twin_unref(e->twin_plus1);
	e->file_plus1 = 0;
	e->twin_plus1 = 0;
	if (plus1 != TDAX_FD_UNREGISTERED)
		tdax_fd_unhold(plus1 - 1, e->gen);
	else
		tdax_tracking_closed_unregistered(e->ino, atomic_load_explicit(&e->synced_ns, memory_order_relaxed));
}

void tdax_fd_hold(uint32_t idx)
{
	atomic_fetch_add(&tdax_rt.opens[idx], 1);
}

void tdax_fd_unhold(uint32_t idx, uint32_t gen)
{
	/* The process's last hold of the file: its entry can go if there is
	 * nothing in it to keep (files.h), so that a device serves any
	 * number of files over time, not the first max_files. */
	if (atomic_fetch_sub(&tdax_rt.opens[idx], 1) == 1 && tdax_rt.dev &&
	    !atomic_load_explicit(&tdax_rt.lost, memory_order_relaxed)) { /* (a lost region: watch.h) */
		tdax_tracking_closed(idx, gen); /* before its ranges go with the entry */
		tdax_files_let_go(tdax_rt.dev, idx, gen);
	}
}

void tdax_fd_forget_range(unsigned first, unsigned last)
{
	for (unsigned fd = first; fd <= last && fd < TDAX_MAX_FDS; fd++)
		tdax_fd_forget((int)fd);
}

bool tdax_fd_still(int fd, const struct tdax_fd *e, uint64_t *size)
{
	struct statx stx;
	if (tdax_statx_fd(fd, STATX_SIZE | STATX_INO | STATX_TYPE, &stx) != 0)
		return false;
	*size = stx.stx_size;
	return S_ISREG(stx.stx_mode) && stx.stx_ino == e->ino &&
	       makedev(stx.stx_dev_major, stx.stx_dev_minor) == e->dev;
}

/* ---- tdax's own descriptors ----------------------------------------- */

/*
 * A slot per descriptor tdax keeps: where its holder keeps the number (the
 * trace's variable, or the slot itself for a twin) and, for a twin, how
 * many managed entries use it. A bit per number answers "is it tdax's?"
 * in the close path without a search.
 */
#define OWN_MAX 256
static struct own {
	int *holder; /* NULL: free */
	int fd;
	int refs;
} own[OWN_MAX];
_Atomic uint64_t tdax_own_bits[TDAX_MAX_FDS / 64];

static void mark(int fd, bool on)
{
	if (fd < 0 || fd >= TDAX_MAX_FDS)
		return;
	uint64_t bit = 1ull << (fd % 64);
	if (on)
		atomic_fetch_or(&tdax_own_bits[fd / 64], bit);
	else
		atomic_fetch_and(&tdax_own_bits[fd / 64], ~bit);
}

/* Lowest number for tdax's own: out of the range programs use, below the
 * soft limit, and not so high that the kernel's table has to grow much. */
static int own_floor(void)
{
	struct rlimit rl;
	rlim_t top = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
	if (top > 1024 + 32)
		top = 1024 + 32;
	return top > 64 ? (int)top - 32 : 3;
}

static int move_high(int fd)
{
	int to = TDAX_REAL(fcntl)(fd, F_DUPFD_CLOEXEC, own_floor());
	if (to < 0)
		to = TDAX_REAL(fcntl)(fd, F_DUPFD_CLOEXEC, 3);
	return to;
}

/* Move fd high and give it a slot; -1 (fd closed) if either fails. */
static int adopt(int fd, int *holder)
{
	int to = move_high(fd);
	tdax_syscall(SYS_close, fd);
	if (to < 0)
		return -1;
	for (int i = 0; i < OWN_MAX; i++)
		if (!own[i].holder) {
			own[i] = (struct own){ .holder = holder ? holder : &own[i].fd, .fd = to, .refs = 1 };
			*own[i].holder = to;
			tdax_fd_forget(to);
			mark(to, true);
			return i;
		}
	tdax_syscall(SYS_close, to);
	return -1;
}

static bool is_twin(int fd)
{
	for (int i = 0; i < OWN_MAX; i++)
		if (own[i].holder && own[i].fd == fd)
			return own[i].holder == &own[i].fd;
	return false;
}

static void release(int i)
{
	int fd = own[i].fd;
	mark(fd, false);
	*own[i].holder = -1;
	own[i].holder = NULL;
	tdax_syscall(SYS_close, fd);
}

int tdax_ownfd_keep(int *fdp)
{
	int i = adopt(*fdp, fdp);
	if (i < 0)
		*fdp = -1;
	return i < 0 ? -1 : 0;
}

void tdax_ownfd_close(int *fdp)
{
	for (int i = 0; i < OWN_MAX; i++)
		if (own[i].holder == fdp)
			release(i);
}

/* Another thread may be writing through the old number while it moves; the
 * window is the application's dup2 onto a number it never opened. */
void tdax_ownfd_evict(int fd)
{
	if (!tdax_ownfd_is(fd))
		return;
	for (int i = 0; i < OWN_MAX; i++)
		if (own[i].holder && own[i].fd == fd) {
			int to = move_high(fd);
			mark(to, true);
			own[i].fd = *own[i].holder = to;
			mark(fd, false);
			tdax_syscall(SYS_close, fd);
		}
}

/* The lowest of tdax's own descriptors in [lo, hi] (twins only if
 * `twins`), or UINT_MAX. */
static unsigned next_own(unsigned lo, unsigned hi, bool twins)
{
	for (unsigned fd = lo; fd <= hi && fd < TDAX_MAX_FDS; fd++) {
		uint64_t w = atomic_load_explicit(&tdax_own_bits[fd / 64], memory_order_relaxed) >> (fd % 64);
		for (; w; w &= w - 1) {
			unsigned at = fd + (unsigned)__builtin_ctzll(w);
			if (at > hi)
				return UINT_MAX;
			if (twins || !is_twin((int)at))
				return at;
		}
		fd |= 63; /* the rest of this word is done */
	}
	return UINT_MAX;
}

/* close_range(first, last, flags) around tdax's own descriptors (all of
 * them, or all but the twins); forget the closed numbers' entries if
 * `forget`. */
static int close_around(unsigned first, unsigned last, int flags, bool forget, bool twins)
{
	for (unsigned lo = first;;) {
		unsigned next = next_own(lo, last, twins);
		if (next != lo) { /* [lo, next - 1] (or [lo, last]) holds none to keep */
			unsigned hi = next == UINT_MAX ? last : next - 1;
			if (tdax_syscall(SYS_close_range, lo, hi, flags) != 0)
				return -1;
			if (forget && !(flags & CLOSE_RANGE_CLOEXEC))
				tdax_fd_forget_range(lo, hi);
		}
		if (next >= last)
			return 0;
		lo = next + 1;
	}
}

int tdax_ownfd_close_range(unsigned first, unsigned last, int flags)
{
	return close_around(first, last, flags, true, true);
}

void tdax_fdtable_unshare(void)
{
	if (tdax_syscall(SYS_unshare, CLONE_FILES) == 0) { /* not the hook: tdax's own */
		close_around(0, ~0u, 0, false, false);
		tdax_fds_private = true;
	}
}

/* ---- twins ------------------------------------------------------------ */

int tdax_twin_open(int fd, int flags)
{
	int acc = (flags & O_ACCMODE) == O_RDWR ? O_RDWR : O_WRONLY;
	int t = tdax_fd_reopen(fd, acc | (flags & (O_APPEND | O_LARGEFILE)) | O_CLOEXEC);
	if (t < 0)
		return 0;
	int i = adopt(t, NULL);
	return i < 0 ? 0 : i + 1;
}

int tdax_twin_fd(uint32_t twin_plus1)
{
	return own[twin_plus1 - 1].fd;
}

void tdax_twin_ref(uint32_t twin_plus1)
{
	__atomic_fetch_add(&own[twin_plus1 - 1].refs, 1, __ATOMIC_RELAXED);
}

void tdax_twin_unref(uint32_t twin_plus1)
{
	if (__atomic_sub_fetch(&own[twin_plus1 - 1].refs, 1, __ATOMIC_ACQ_REL) == 0)
		release((int)twin_plus1 - 1);
}
