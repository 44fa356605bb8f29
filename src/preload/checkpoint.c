/*
 * checkpoint -- checkpoints of files tdax has to open itself (checkpoint.h):
 * by file index (write-back, downgrades), every registered file below a
 * directory (before the directory is renamed); the registered file a path
 * names (for the truncate, unlink, rename and attribute hooks); and what a
 * removed file's records wait for (its directory's sync). The checkpoint
 * itself -- the real sync, then the release of the records -- is coherent
 * mode's (tdax_coherent_checkpoint_fd).
 */
#define _GNU_SOURCE
#include "preload/checkpoint.h"
#include "core/log.h"
#include "preload/promoted.h"
#include "core/sys.h"
#include "preload/coherent.h"
#include "preload/lease.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Open a file for a checkpoint. Read-only: a sync needs no more, and a
 * descriptor open for writing makes an execve() of the file fail with
 * ETXTBSY (build systems write scripts and run them). Writable only when
 * a failed sync left records to write to the file again (rt->rewrite; rt
 * NULL: not known yet). Never waiting on a FIFO (tdax_sys_open_nowait).
 */
static int open_for_checkpoint(int dirfd, const char *path, bool follow, const struct tdax_file_rt *rt)
{
	int fl = O_CLOEXEC | (follow ? 0 : O_NOFOLLOW);
	int fd = rt && atomic_load(&rt->rewrite) ? tdax_sys_open_nowait(dirfd, path, O_RDWR | fl) : -1;
	return fd >= 0 ? fd : tdax_sys_open_nowait(dirfd, path, O_RDONLY | fl);
}

/* The file fd holds (a path descriptor, say) opened again through /proc,
 * as open_for_checkpoint opens it. */
static int reopen_for_checkpoint(int fd, const struct tdax_file_rt *rt)
{
	char self[TDAX_PROC_FD_NAME];
	tdax_proc_fd_name(fd, self);
	return open_for_checkpoint(AT_FDCWD, self, true, rt);
}

/* fd, if it is registered file f's; else -1 (closed). */
static int if_same(int fd, const struct tdax_file *f)
{
	struct tdax_ident now, was = tdax_file_ident(f);
	if (tdax_ident_of_fd(fd, &now) != 0 || !tdax_ident_same(&now, &was)) {
		TDAX_REAL(close)(fd);
		return -1;
	}
	return fd;
}

/*
 * Open a registered file by its path for a checkpoint; -1 if it cannot be
 * had, with *gone set if the path leads to no file or to another one. A
 * path descriptor first: it tells the identity (all of it but the inode
 * generation) without opening the file, so another file at the path now is
 * left alone -- an open would break its lease (lease.h).
 */
static int open_registered(uint32_t idx, bool *gone)
{
	const struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	int p = tdax_sys_openat(AT_FDCWD, f->path, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
	if (p < 0) {
		*gone = errno == ENOENT || errno == ENOTDIR || errno == ELOOP;
		return -1;
	}
	if ((p = if_same(p, f)) < 0) {
		*gone = true;
		return -1;
	}
	int fd = reopen_for_checkpoint(p, &f->rt);
	TDAX_REAL(close)(p);
	if (fd < 0)
		return -1;
	fd = if_same(fd, f);
	*gone = fd < 0;
	return fd;
}

/* Renamed or removed behind tdax's back: a descriptor of this process on
 * the file, opened again through /proc/self (the application's table:
 * the write-back thread has a table of its own), or -1. */
static int open_through_ours(uint32_t idx, uint32_t gen)
{
	const struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	struct tdax_ident now, was = tdax_file_ident(f);
	for (int i = 0; i < TDAX_MAX_FDS; i++) {
		if (tdax_fds[i].file_plus1 != idx + 1 || tdax_fds[i].gen != gen)
			continue;
		char self[64];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", i);
		int fd = tdax_sys_open_nowait(AT_FDCWD, self, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (tdax_ident_of_fd(fd, &now) == 0 && tdax_ident_same(&now, &was))
			return fd;
		TDAX_REAL(close)(fd);
	}
	return -1;
}

/*
 * The file's last name is gone -- removed or replaced, by the application
 * (tdax_checkpoint_unnamed) or by a program without tdax -- and no
 * descriptor of this process leads to it. Recovery finds files by their
 * path, so once the removal is durable these records protect nothing: kept,
 * they would fail every checkpoint and downgrade of the file for good and
 * hold their log space. Until then a power cut can bring the file back, and
 * its acknowledged data only lives in them: so first the directory's sync,
 * then every process that still has the file open syncs it through the
 * kernel, the records are released and, for a removal tdax saw, the entry
 * is freed. -1 if the directory could not be synced (the records stay).
 */
static int let_go(uint32_t idx, uint32_t gen, bool dir_synced)
{
	struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	struct tdax_file_rt *rt = &f->rt;
	if (f->gen != gen)
		return 0; /* let go already */
	if (!dir_synced) {
		if (tdax_sync_parent_dir(f->path) != 0) {
			tdax_fallback(TDAX_FB_WB_ERROR, f->path);
			return -1;
		}
		tdax_count(TDAX_ST_DIR_SYNCS, 1);
	}
	/* Kernel-only from here: a process that still has it open syncs it
	 * through the kernel. A removal tdax saw is the normal course (SQLite
	 * removes a journal every transaction): no fallback counted; a file
	 * gone behind tdax's back is one. */
	bool seen = tdax_file_gone(atomic_load(&rt->removed));
	if (seen)
		tdax_coherent_retire(idx);
	else
		tdax_coherent_kernel_only(idx, TDAX_FB_METADATA);
	uint64_t upto = atomic_load(tdax_rt.dev->seq);
	atomic_store(&rt->first_log_ns, 0);
	atomic_store(&rt->logged_bytes, 0);
	atomic_store(&rt->rewrite, 0);
	tdax_log_release(tdax_rt.dev, idx, gen, upto);
	if (seen)
		tdax_files_forget(tdax_rt.dev, idx, gen);
	return 0;
}

/* Is path's parent one of the n directories in dirs (each "dir/")? */
static bool below_one_of(const char *path, char (*dirs)[TDAX_FILE_PATH_MAX], int n)
{
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) + 1 : 0;
	for (int i = 0; i < n; i++)
		if (strlen(dirs[i]) == len && memcmp(dirs[i], path, len) == 0)
			return true;
	return false;
}

void tdax_checkpoint_removed(const uint32_t *idx, size_t n)
{
	enum { DIRS = 8 };
	char dirs[DIRS][TDAX_FILE_PATH_MAX];
	int ndirs = 0;
	for (size_t i = 0; i < n; i++) {
		const struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx[i]);
		uint32_t gen = f->gen;
		char path[TDAX_FILE_PATH_MAX];
		memcpy(path, f->path, sizeof(path));
		path[sizeof(path) - 1] = '\0';
		if (atomic_load(&f->state) != TDAX_FILE_ACTIVE || !tdax_file_gone(atomic_load(&f->rt.removed)))
			continue;
		bool synced = below_one_of(path, dirs, ndirs);
		if (let_go(idx[i], gen, synced) == 0 && !synced && ndirs < DIRS) {
			char *slash = strrchr(path, '/');
			slash[1] = '\0'; /* absolute: there is one */
			memcpy(dirs[ndirs++], path, sizeof(path));
		}
	}
}

int tdax_checkpoint_file(uint32_t idx)
{
	const struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	uint32_t gen = f->gen;
	if (atomic_load(&f->state) != TDAX_FILE_ACTIVE)
		return 0; /* freed (a removed file let go): nothing of it left */
	if (tdax_file_gone(atomic_load(&f->rt.removed)))
		return let_go(idx, gen, false);
	/* The open file this process holds a lease on: another open would
	 * break it (lease.h). */
	int fd = tdax_lease_borrow(idx, gen);
	if (fd >= 0)
		fd = if_same(fd, f);
	bool gone = false;
	if (fd < 0)
		fd = open_registered(idx, &gone);
	if (fd < 0)
		fd = open_through_ours(idx, gen);
	if (fd < 0) {
		/* Without records there is nothing to write back: done (a
		 * downgrade of a removed file's range must not fail, or every
		 * pass would try it again). */
		if (!atomic_load(&f->rt.first_log_ns) && !atomic_load(&f->rt.rewrite))
			return 0;
		return gone ? let_go(idx, gen, false) : -1;
	}
	int rc;
	if (!tdax_promoted_checkpoint(idx, fd, &rc)) {
		tdax_promoted_checkpoint_begin(idx, fd);
		rc = tdax_coherent_checkpoint_fd(fd, idx, gen, true);
		int e = errno;
		tdax_promoted_checkpoint_end(idx);
		errno = e;
	}
	int e = errno;
	TDAX_REAL(close)(fd);
	tdax_count(TDAX_ST_CHECKPOINTS, 1);
	if (rc != 0) {
		/* The first error is the one the next sync reports (as Linux does). */
		int32_t none = 0;
		atomic_compare_exchange_strong(&tdax_rt_of(idx)->wb_error, &none, e);
		tdax_fallback(TDAX_FB_WB_ERROR, f->path);
	}
	return rc;
}

/*
 * A sync() or syncfs() makes every file's bytes durable, the ones tdax did
 * not log too (a write through an O_DIRECT descriptor, a cold write of a
 * range no longer upgraded): a record older than such a write, replayed
 * after a crash, would put back what the write replaced, and the write
 * was acknowledged (test_syncfs.py lost it so before 2026-11-28). So every
 * file with records is checkpointed before the kernel's call (the hooks:
 * tdax_checkpoint_below("")), its records released once its bytes are
 * durable; an fsync through a descriptor tdax does not manage, the same
 * for one file.
 */
int tdax_checkpoint_through(int fd, const struct statx *stx)
{
	struct tdax_device *dev = tdax_rt.dev;
	struct tdax_ident id;
	uint32_t idx, gen;
	if (!tdax_files_may_have(dev, stx->stx_ino) || tdax_ident_of_fd(fd, &id) != 0 ||
	    tdax_files_find(dev, &id, &idx, &gen) != 0)
		return 0; /* (a file tdax keeps nothing of) */
	return tdax_checkpoint_if_records(fd, idx, gen);
}

void tdax_checkpoint_unnaming(uint32_t idx, uint32_t gen)
{
	struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	if (f->gen == gen && (atomic_load(&f->rt.first_log_ns) || atomic_load(&f->rt.rewrite)))
		tdax_file_set_removed(tdax_rt.dev, f, TDAX_REMOVING);
}

bool tdax_checkpoint_unnamed(int fd, uint32_t idx, uint32_t gen, bool done, bool replaced)
{
	struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	struct stat st;
	if (f->gen != gen)
		return false;
	if (!done) {
		if (atomic_load(&f->rt.removed) == TDAX_REMOVING)
			tdax_file_set_removed(tdax_rt.dev, f, 0);
		return false;
	}
	if (tdax_sys_fstat(fd, &st) == 0 && st.st_nlink == 0) {
		if (!atomic_load(&f->rt.first_log_ns) && !atomic_load(&f->rt.rewrite)) {
			tdax_files_forget(tdax_rt.dev, idx, gen); /* nothing a power cut could need */
			return false;
		}
		/* The write-back thread's next pass makes the removal durable
		 * and lets the records go (let_go). */
		tdax_file_set_removed(tdax_rt.dev, f, replaced ? TDAX_REPLACED : TDAX_REMOVED);
		tdax_rt.touched[idx] = 1;
		return true;
	}
	if (atomic_load(&f->rt.removed) == TDAX_REMOVING)
		tdax_file_set_removed(tdax_rt.dev, f, 0);
	/* It lives on under a name tdax does not know (a hard link), where
	 * recovery could not find it: written back now, the kernel's from now on. */
	tdax_checkpoint_if_records(fd, idx, gen);
	tdax_coherent_kernel_only(idx, TDAX_FB_METADATA);
	return false;
}

int tdax_checkpoint_open(int dirfd, const char *path, bool follow, uint32_t *plus1, uint32_t *gen, mode_t *mode)
{
	*plus1 = 0;
	if (mode)
		*mode = 0;
	/* Most paths name no registered file, and one stat() says so: the
	 * index knows every inode number the table has (files.h); none at
	 * all is a load. */
	struct stat st;
	if (tdax_files_none(tdax_rt.dev) || tdax_sys_fstatat(dirfd, path, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) != 0)
		return -1;
	if (mode)
		*mode = st.st_mode;
	if (!S_ISREG(st.st_mode) || !tdax_files_may_have(tdax_rt.dev, st.st_ino))
		return -1;
	/* A path descriptor, and the whole identity through it: opening the
	 * file itself would break a lease on it, and opening anything but a
	 * regular file can have side effects. Where the file system gives no
	 * inode generation without an open, the same inode is opened again
	 * (through /proc): without the generation a new file on a reused inode
	 * number passes for the removed one. */
	int fd = TDAX_REAL(openat)(dirfd, path, O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
	if (fd < 0)
		return -1;
	struct tdax_ident id;
	uint32_t idx = 0;
	int rc = tdax_ident_of_path_fd(fd, &id);
	if (rc != 0 && errno == EOPNOTSUPP) {
		int p = fd;
		fd = tdax_sys_fstat(p, &st) == 0 && S_ISREG(st.st_mode) ? reopen_for_checkpoint(p, NULL) : -1;
		TDAX_REAL(close)(p);
		rc = fd >= 0 ? tdax_ident_of_fd(fd, &id) : -1;
	}
	if (rc == 0 && tdax_files_find(tdax_rt.dev, &id, &idx, gen) == 0) {
		*plus1 = idx + 1;
		return fd;
	}
	if (fd >= 0)
		TDAX_REAL(close)(fd);
	return -1;
}

int tdax_checkpoint_if_records(int fd, uint32_t idx, uint32_t gen)
{
	const struct tdax_file_rt *rt = tdax_rt_of(idx);
	if (!atomic_load(&rt->first_log_ns) && !atomic_load(&rt->rewrite))
		return 0;
	/* The file itself (fd may be a path descriptor): read-only to sync,
	 * read-write if its records must be written again. */
	int w = reopen_for_checkpoint(fd, rt);
	if (w < 0)
		return -1;
	tdax_count(TDAX_ST_CHECKPOINTS, 1);
	tdax_promoted_checkpoint_begin(idx, w);
	int rc = tdax_coherent_checkpoint_fd(w, idx, gen, true);
	int e = errno;
	tdax_promoted_checkpoint_end(idx);
	TDAX_REAL(close)(w);
	errno = e;
	return rc;
}

int tdax_checkpoint_below(const char *dir)
{
	struct tdax_device *dev = tdax_rt.dev;
	size_t n = strlen(dir);
	int rc = 0, e = 0;
	for (uint32_t i = 0; i < dev->sb->max_files; i++) {
		const struct tdax_file *f = tdax_file_at(dev, i);
		if (atomic_load(&f->state) == TDAX_FILE_ACTIVE && strncmp(f->path, dir, n) == 0 &&
		    f->path[n] == '/' && (atomic_load(&f->rt.first_log_ns) || atomic_load(&f->rt.rewrite)) &&
		    tdax_checkpoint_file(i) != 0) {
			rc = -1;
			e = errno;
		}
	}
	errno = e ? e : errno;
	return rc;
}
