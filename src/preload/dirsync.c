/*
 * dirsync -- a directory's fsync answered from the log (dirsync.h).
 *
 * A directory sync promises every change of names in the directory. The
 * log holds two kinds: a file's creation (a create record: recovery makes
 * the file again) and an unlink of a file with records (recovery unlinks
 * it again). So a directory sync is answered from the log when, since the
 * directory's last real sync,
 *   - every change a process under tdax made there was one of those (any
 *     other -- mkdir, rmdir, link, symlink, mknod, a rename, an open with
 *     O_CREAT the log does not hold, an unlink of a file without records --
 *     counts in the directory's slot, core/dirs.h), and
 *   - nothing else changed it: the directory's change time is what the
 *     last real sync and the logged changes since left. That is the guard
 *     against a process tdax does not see (not under tdax, not attached
 *     yet, syscall(2)); it holds only where a change after a look at the
 *     change time gets a later one (Linux 6.13+ fine-grained timestamps on
 *     ext4, XFS, btrfs, tmpfs): elsewhere every directory sync is real.
 * Ordering: a directory sync sets the device's watch (core/dirs.h:
 * watch_left, a budget of TDAX_DIRSYNC_WATCH changes) before it looks at
 * anything, and a change looks at the watch only after it is done; so a
 * change that did not count was done before that sync began, or the watch
 * had lapsed, which makes the next directory sync real -- and every
 * directory's, through their slots' counts. A lapse is what keeps a
 * workload that changes names far more often than it syncs a directory
 * (SQLite's rollback journal with synchronous=OFF after a run with syncs)
 * from paying two statx per change for good.
 */
#define _GNU_SOURCE
#include "core/sys.h"
#include "preload/dirsync.h"
#include "core/dirs.h"
#include "core/util.h"
#include "preload/state.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>

#define DIR_MASK TDAX_DIRSYNC_MASK

static uint64_t ctime_of(const struct statx *stx)
{
	return (uint64_t)stx->stx_ctime.tv_sec * 1000000000u + stx->stx_ctime.tv_nsec;
}

/* The directory dirfd/path is in, as a path relative to dirfd. */
static const char *parent(const char *path, char *buf, size_t n)
{
	size_t len = strnlen(path, n);
	if (len == n || len == 0)
		return NULL;
	memcpy(buf, path, len + 1);
	while (len > 1 && buf[len - 1] == '/')
		buf[--len] = '\0';
	char *slash = strrchr(buf, '/');
	if (!slash)
		return ".";
	while (slash > buf && slash[-1] == '/')
		slash--;
	if (slash == buf)
		return "/";
	*slash = '\0';
	return buf;
}

/* The directory dirfd/path is in: its identity and change time. */
static bool look_at(int dirfd, const char *path, struct tdax_dir_look *l)
{
	char buf[PATH_MAX];
	const char *dir = parent(path, buf, sizeof(buf));
	struct statx stx;
	l->valid = dir && tdax_sys_statx(dirfd, dir, 0, DIR_MASK, &stx) == 0 && S_ISDIR(stx.stx_mode);
	if (l->valid) {
		l->dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
		l->ino = stx.stx_ino;
		l->ctime = ctime_of(&stx);
	}
	return l->valid;
}

static bool watched(void)
{
	return tdax_on() && atomic_load(&tdax_dirs(tdax_rt.dev)->watch_left) > 0;
}

/* After a change: is it one the watch still counts? It takes one from the
 * budget; none left, it goes uncounted (the next directory sync is real). */
static bool counted(void)
{
	if (!tdax_on())
		return false;
	_Atomic int32_t *left = &tdax_dirs(tdax_rt.dev)->watch_left;
	return atomic_load(left) > 0 && atomic_fetch_sub(left, 1) > 0;
}

void tdax_dirsync_look(int dirfd, const char *path, struct tdax_dir_look *l)
{
	l->valid = false;
	if (watched())
		look_at(dirfd, path, l);
}

/* The change after look l; *now is the directory after it. True if it
 * counted as one the log does not hold. */
static bool change(int dirfd, const char *path, const struct tdax_dir_look *l, bool logged,
		   struct tdax_dir_look *now)
{
	if (!counted() || !look_at(dirfd, path, now))
		return false;
	bool same = l && l->valid && l->dev == now->dev && l->ino == now->ino;
	struct tdax_dir_slot *s = tdax_dir_slot(tdax_rt.dev, now->dev, now->ino);
	if (same && now->ctime == l->ctime)
		return false; /* nothing changed (the call failed, or found the file there) */
	if (same && logged) {
		/* Held by the log: the guard moves on, if nothing else
		 * changed the directory since the look. */
		uint64_t was = l->ctime;
		if (atomic_load(&s->dev) == now->dev && atomic_load(&s->ino) == now->ino)
			atomic_compare_exchange_strong(&s->ctime_ns, &was, now->ctime);
		return false;
	}
	atomic_fetch_add(&s->unlogged, 1);
	return true;
}

void tdax_dirsync_changed(int dirfd, const char *path, const struct tdax_dir_look *l, bool logged)
{
	int err = errno;
	struct tdax_dir_look now;
	change(dirfd, path, l, logged, &now);
	errno = err;
}

/* This thread's last creation of a file whose record was to come later
 * (tdax_dirsync_made): the file, its directory, the directory's change
 * time before and after it. fino 0: none; it is written last (a signal
 * handler's open on the same thread may come in between: what it leaves
 * torn fails the looks of tdax_dirsync_made_logged). */
static __thread struct {
	uint64_t fdev, fino;
	uint64_t dev, ino, before, after;
} made TDAX_TLS;

void tdax_dirsync_made(int dirfd, const char *path, const struct tdax_dir_look *l, uint64_t fdev,
		       uint64_t fino)
{
	int err = errno;
	struct tdax_dir_look now;
	made.fino = 0;
	if (change(dirfd, path, l, false, &now) && l->valid && l->dev == now.dev && l->ino == now.ino) {
		made.fdev = fdev;
		made.dev = now.dev;
		made.ino = now.ino;
		made.before = l->ctime;
		made.after = now.ctime;
		atomic_signal_fence(memory_order_release);
		made.fino = fino;
	}
	errno = err;
}

/*
 * Its creation counted as a change the log does not hold (the slot's
 * `unlogged`, 1 if it is the only one) and left the guard's change time
 * where it was (`before`). If both are still so, and the directory's
 * change time is still the one the creation left (`after`: nothing changed
 * it since), the creation alone stood between the directory and an
 * answer from the log: the guard moves on as if it had been logged at
 * once. Anything else -- another change, a real sync of the directory
 * meanwhile -- and the directory's next sync stays real.
 */
void tdax_dirsync_made_logged(uint64_t fdev, uint64_t fino, const char *file_path)
{
	if (!made.fino || made.fino != fino || made.fdev != fdev)
		return;
	atomic_signal_fence(memory_order_acquire);
	int err = errno;
	struct tdax_dir_look now;
	if (look_at(AT_FDCWD, file_path, &now) && now.dev == made.dev && now.ino == made.ino &&
	    now.ctime == made.after) {
		struct tdax_dir_slot *s = tdax_dir_slot(tdax_rt.dev, now.dev, now.ino);
		uint64_t was = made.before;
		uint64_t one = 1;
		if (atomic_load(&s->dev) == now.dev && atomic_load(&s->ino) == now.ino &&
		    atomic_compare_exchange_strong(&s->ctime_ns, &was, made.after))
			atomic_compare_exchange_strong(&s->unlogged, &one, 0);
	}
	made.fino = 0;
	errno = err;
}

/* Do this kernel and the file system of directory fd give a change after
 * a look at the change time a later one (multigrain timestamps)? */
static bool fine_times(int fd)
{
	static int kernel = -1; /* 1: 6.13 or later */
	if (kernel < 0) {
		struct utsname u;
		int major = 0, minor = 0;
		kernel = uname(&u) == 0 && sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
			 (major > 6 || (major == 6 && minor >= 13));
	}
	struct statfs sf;
	if (!kernel || fstatfs(fd, &sf) != 0)
		return false;
	switch ((unsigned long)sf.f_type) {
	case EXT4_SUPER_MAGIC: case XFS_SUPER_MAGIC: case BTRFS_SUPER_MAGIC: case TMPFS_MAGIC:
		return true;
	}
	return false;
}

/* May slot s answer a sync of directory (dev, ino), whose change time is
 * ctime now? */
static bool covered(const struct tdax_dir_slot *s, uint64_t dev, uint64_t ino, uint64_t ctime)
{
	uint32_t seq = atomic_load(&s->seq);
	bool yes = !(seq & 1) && atomic_load(&s->fine) && atomic_load(&s->dev) == dev &&
		   atomic_load(&s->ino) == ino && atomic_load(&s->unlogged) == 0 &&
		   atomic_load(&s->ctime_ns) == ctime;
	return yes && atomic_load(&s->seq) == seq;
}

static int real_sync(int fd, bool datasync)
{
	return datasync ? TDAX_REAL(fdatasync)(fd) : TDAX_REAL(fsync)(fd);
}

int tdax_dirsync_sync(int fd, bool datasync, const struct statx *looked)
{
	struct statx stx = *looked;
	struct tdax_device *dev = tdax_rt.dev;
	struct tdax_dirs *d = tdax_dirs(dev);
	uint64_t ddev = makedev(stx.stx_dev_major, stx.stx_dev_minor), ino = stx.stx_ino;
	struct tdax_dir_slot *s = tdax_dir_slot(dev, ddev, ino);
	/* The watch first: the changes from now on are looked at. If it had
	 * lapsed, changes went uncounted in every directory: no slot may
	 * answer until a real sync of its directory sets it again. */
	bool lapsed = atomic_exchange(&d->watch_left, TDAX_DIRSYNC_WATCH) <= 0;
	if (lapsed)
		for (int i = 0; i < TDAX_DIR_SLOTS; i++)
			atomic_fetch_add(&d->slot[i].unlogged, 1);
	if (!lapsed && covered(s, ddev, ino, ctime_of(&stx))) {
		/* Every record was persisted when written. What the answer may
		 * have promised, recovery needs to know (dirs.h, light_seq). */
		uint64_t seq = atomic_load(dev->seq), cur = atomic_load(&d->light_seq);
		while (cur < seq && !atomic_compare_exchange_weak(&d->light_seq, &cur, seq))
			;
		tdax_dev_persist(dev, (const void *)&d->light_seq, sizeof(d->light_seq));
		if (!atomic_load(&tdax_rt.lost)) { /* the region went away meanwhile (watch.h) */
			tdax_count(TDAX_ST_LIGHT_DIR_SYNCS, 1);
			return 0;
		}
	}
	/* Real: what this sync will cover -- the change time, the count (the
	 * watch, which every change looks at after it is done, is set). */
	if (tdax_statx_fd(fd, DIR_MASK, &stx) != 0)
		return real_sync(fd, datasync);
	uint64_t c0 = ctime_of(&stx), u0 = atomic_load(&s->unlogged);
	int rc = real_sync(fd, datasync);
	if (rc != 0)
		return rc;
	int err = errno;
	uint32_t seq = atomic_load(&s->seq);
	if (!(seq & 1) && atomic_compare_exchange_strong(&s->seq, &seq, seq + 1)) {
		atomic_store(&s->dev, ddev);
		atomic_store(&s->ino, ino);
		atomic_store(&s->fine, fine_times(fd));
		atomic_store(&s->ctime_ns, c0);
		atomic_compare_exchange_strong(&s->unlogged, &u0, 0);
		atomic_store(&s->seq, seq + 2);
	}
	errno = err;
	return 0;
}
