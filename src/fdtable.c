/*
 * fdtable -- managed descriptors and tdax's own descriptors (fdtable.h).
 */
#define _GNU_SOURCE
#include "fdtable.h"
#include "lsync.h"
#include "runtime.h"
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/close_range.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

struct tdax_fd *tdax_fds;

int tdax_fdtable_init(void)
{
	void *p = mmap(NULL, sizeof(struct tdax_fd) * TDAX_MAX_FDS, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	tdax_fds = p;
	return 0;
}

void tdax_fd_forget(int fd)
{
	if (fd >= 0 && fd < TDAX_MAX_FDS && tdax_fds)
		tdax_fds[fd].file_plus1 = 0;
}

void tdax_fd_forget_range(unsigned first, unsigned last)
{
	if (!tdax_fds)
		return;
	for (unsigned fd = first; fd <= last && fd < TDAX_MAX_FDS; fd++)
		tdax_fds[fd].file_plus1 = 0;
}

void tdax_fd_copy(int from, int to)
{
	if (to < 0 || to >= TDAX_MAX_FDS || !tdax_fds)
		return;
	const struct tdax_fd *e = tdax_fd_get(from);
	if (e)
		tdax_fds[to] = *e;
	else
		tdax_fds[to].file_plus1 = 0;
}

/* File systems where a sync costs nothing or tdax has no business. */
static bool fs_excluded(int fd)
{
	struct statfs sf;
	if (fstatfs(fd, &sf) != 0)
		return true;
	switch ((unsigned long)sf.f_type) {
	case TMPFS_MAGIC: case PROC_SUPER_MAGIC: case SYSFS_MAGIC: case DEVPTS_SUPER_MAGIC:
	case HUGETLBFS_MAGIC: case RAMFS_MAGIC: case CGROUP2_SUPER_MAGIC:
		return true;
	}
	return false;
}

void tdax_fd_manage(int fd, const char *path_or_null, int flags)
{
	if (fd < 0 || fd >= TDAX_MAX_FDS)
		return;
	tdax_fd_forget(fd); /* whatever the number was before, it is this now */
	struct stat st;
	if ((flags & O_ACCMODE) == O_RDONLY || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    fs_excluded(fd))
		return;
	/* The path recovery will use: absolute and canonical. */
	char link[64], path[TDAX_FILE_PATH_MAX + 1];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0 || n >= (ssize_t)sizeof(path) - 1) {
		tdax_fallback(TDAX_FB_UNREGISTERED, path_or_null ? path_or_null : link);
		return;
	}
	path[n] = '\0';
	uint32_t idx, gen;
	bool created;
	struct tdax_err e;
	if (tdax_files_register(tdax_rt.dev, fd, path, &idx, &gen, &created, &e) != 0) {
		tdax_fallback(TDAX_FB_UNREGISTERED, path);
		return;
	}
	struct tdax_file_rt *rt = &tdax_file_at(tdax_rt.dev, idx)->rt;
	uint64_t seen = atomic_load(&rt->size_seen);
	if (created || seen != (uint64_t)st.st_size) {
		/* New to tdax, or changed by someone tdax did not see. */
		atomic_store(&rt->size_seen, (uint64_t)st.st_size);
		atomic_fetch_add(&rt->uncovered, 1);
	}
	if (tdax_tracing) {
		if (!tdax_rt.named[idx]) {
			tdax_rt.named[idx] = 1;
			tdax_trace_name(idx, path);
		}
		tdax_trace_event(TDAX_TR_OPEN, idx, gen, 0, (uint16_t)(created ? TDAX_TRF_CREATE : 0));
	}
	if (flags & (O_CREAT | O_TRUNC))
		tdax_lsync_uncover(idx, TDAX_FB_METADATA); /* the directory entry / size need the kernel */
	if (tdax_rt.blind)
		tdax_lsync_unmanage(fd, idx, gen, TDAX_FB_ASYNC);
	tdax_fds[fd] = (struct tdax_fd){
		.file_plus1 = idx + 1, .gen = gen,
		.flags = ((flags & O_APPEND) ? TDAX_FD_APPEND : 0) |
			 ((flags & O_SYNC) == O_SYNC ? TDAX_FD_SYNC : (flags & O_DSYNC) ? TDAX_FD_DSYNC : 0) |
			 ((flags & O_DIRECT) ? TDAX_FD_NOLOG : 0),
		.dev = st.st_dev, .ino = st.st_ino,
	};
}

bool tdax_fd_still(int fd, const struct tdax_fd *e, uint64_t *size)
{
	struct statx stx;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_SIZE | STATX_INO | STATX_TYPE, &stx) != 0)
		return false;
	*size = stx.stx_size;
	return S_ISREG(stx.stx_mode) && stx.stx_ino == e->ino &&
	       makedev(stx.stx_dev_major, stx.stx_dev_minor) == e->dev;
}

/* ---- tdax's own descriptors ----------------------------------------- */

#define OWN_MAX 8
static int *own[OWN_MAX]; /* where each holder keeps its descriptor */

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

bool tdax_ownfd_is(int fd)
{
	for (int i = 0; i < OWN_MAX; i++)
		if (own[i] && *own[i] == fd)
			return true;
	return false;
}

static int move_high(int fd)
{
	int to = tdax_real.fcntl(fd, F_DUPFD_CLOEXEC, own_floor());
	if (to < 0)
		to = tdax_real.fcntl(fd, F_DUPFD_CLOEXEC, 3);
	return to;
}

int tdax_ownfd_keep(int *fdp)
{
	int to = move_high(*fdp);
	syscall(SYS_close, *fdp);
	*fdp = to;
	if (to < 0)
		return -1;
	tdax_fd_forget(to);
	for (int i = 0; i < OWN_MAX; i++)
		if (!own[i]) {
			own[i] = fdp;
			return 0;
		}
	syscall(SYS_close, to); /* more than tdax ever keeps: a bug, not a user error */
	*fdp = -1;
	return -1;
}

void tdax_ownfd_close(int *fdp)
{
	for (int i = 0; i < OWN_MAX; i++)
		if (own[i] == fdp)
			own[i] = NULL;
	if (*fdp >= 0)
		syscall(SYS_close, *fdp);
	*fdp = -1;
}

/* Another thread may be writing through the old number while it moves; the
 * window is the application's dup2 onto a number it never opened. */
void tdax_ownfd_evict(int fd)
{
	for (int i = 0; i < OWN_MAX; i++)
		if (own[i] && *own[i] == fd) {
			int to = move_high(fd);
			*own[i] = to;
			syscall(SYS_close, fd);
		}
}

/* The lowest of tdax's own descriptors in [lo, hi], or UINT_MAX. */
static unsigned next_own(unsigned lo, unsigned hi)
{
	unsigned best = UINT_MAX;
	for (int i = 0; i < OWN_MAX; i++)
		if (own[i] && *own[i] >= 0 && (unsigned)*own[i] >= lo && (unsigned)*own[i] <= hi &&
		    (unsigned)*own[i] < best)
			best = (unsigned)*own[i];
	return best;
}

int tdax_ownfd_close_range(unsigned first, unsigned last, int flags)
{
	for (unsigned lo = first;;) {
		unsigned next = next_own(lo, last);
		if (next != lo) { /* [lo, next - 1] (or [lo, last]) holds none of tdax's */
			unsigned hi = next == UINT_MAX ? last : next - 1;
			if (syscall(SYS_close_range, lo, hi, flags) != 0)
				return -1;
			if (!(flags & CLOSE_RANGE_CLOEXEC))
				tdax_fd_forget_range(lo, hi);
		}
		if (next >= last)
			return 0;
		lo = next + 1;
	}
}
