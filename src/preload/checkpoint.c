/*
 * checkpoint -- checkpoints of files tdax has to open itself (checkpoint.h):
 * by file index (write-back, downgrades), by path (before a truncate,
 * unlink or rename), every registered file below a directory (before the
 * directory is renamed). The checkpoint itself -- the real sync, then the
 * release of the records -- is coherent mode's (tdax_coherent_checkpoint_fd).
 */
#define _GNU_SOURCE
#include "preload/checkpoint.h"
#include "core/log.h"
#include "preload/coherent.h"

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
 * NULL: not known yet). O_NONBLOCK: a FIFO's open must not wait.
 */
static int open_for_checkpoint(int dirfd, const char *path, bool follow, const struct tdax_file_rt *rt)
{
	int fl = O_CLOEXEC | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW);
	int fd = rt && atomic_load(&rt->rewrite) ? TDAX_REAL(openat)(dirfd, path, O_RDWR | fl) : -1;
	return fd >= 0 ? fd : TDAX_REAL(openat)(dirfd, path, O_RDONLY | fl);
}

/* Open a registered file by its path for a checkpoint; -1 if it cannot be
 * had, with *gone set if the path leads to no file or to another one. */
static int open_registered(uint32_t idx, bool *gone)
{
	const struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	int fd = open_for_checkpoint(AT_FDCWD, f->path, false, &f->rt);
	if (fd < 0) {
		*gone = errno == ENOENT || errno == ENOTDIR || errno == ELOOP;
		return -1;
	}
	struct tdax_ident now, was = { f->dev, f->ino, f->igen, f->flags };
	if (tdax_ident_of_fd(fd, &now) != 0 || !tdax_ident_same(&now, &was)) {
		*gone = true;
		TDAX_REAL(close)(fd);
		return -1;
	}
	return fd;
}

/* Renamed or removed behind tdax's back: a descriptor of this process on
 * the file, opened again through /proc/self (the application's table:
 * the write-back thread has a table of its own), or -1. */
static int open_through_ours(uint32_t idx, uint32_t gen)
{
	const struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	struct tdax_ident now, was = { f->dev, f->ino, f->igen, f->flags };
	for (int i = 0; i < TDAX_MAX_FDS; i++) {
		if (tdax_fds[i].file_plus1 != idx + 1 || tdax_fds[i].gen != gen)
			continue;
		char self[64];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", i);
		int fd = TDAX_REAL(openat)(AT_FDCWD, self, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			continue;
		if (tdax_ident_of_fd(fd, &now) == 0 && tdax_ident_same(&now, &was))
			return fd;
		TDAX_REAL(close)(fd);
	}
	return -1;
}

/*
 * The file was removed or replaced by a program without tdax, and no
 * descriptor of this process leads to it. Recovery finds files by their
 * path, so it could never apply these records: they protect nothing, and
 * kept they would fail every checkpoint and downgrade of the file for good
 * and hold their log space. Every process that still has the file open
 * syncs it through the kernel from now on; the records are released.
 */
static int let_go(uint32_t idx, uint32_t gen)
{
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	tdax_coherent_kernel_only(idx, TDAX_FB_METADATA);
	uint64_t upto = atomic_load(tdax_rt.dev->seq);
	atomic_store(&rt->first_log_ns, 0);
	atomic_store(&rt->logged_bytes, 0);
	atomic_store(&rt->rewrite, 0);
	tdax_log_release(tdax_rt.dev, idx, gen, upto);
	return 0;
}

int tdax_checkpoint_file(uint32_t idx)
{
	const struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	uint32_t gen = f->gen;
	bool gone = false;
	int fd = open_registered(idx, &gone);
	if (fd < 0)
		fd = open_through_ours(idx, gen);
	if (fd < 0) {
		/* Without records there is nothing to write back: done (a
		 * downgrade of a removed file's range must not fail, or every
		 * pass would try it again). */
		if (!atomic_load(&f->rt.first_log_ns) && !atomic_load(&f->rt.rewrite))
			return 0;
		return gone ? let_go(idx, gen) : -1;
	}
	int rc = tdax_coherent_checkpoint_fd(fd, idx, gen, true);
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

int tdax_checkpoint_path(int dirfd, const char *path, bool follow, uint32_t *plus1, uint32_t *gen)
{
	*plus1 = 0;
	/* Most paths name no registered file, and one stat() says so: the
	 * index knows every inode number the table has (files.h). */
	struct stat st;
	if (fstatat(dirfd, path, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
	    !tdax_files_may_have(tdax_rt.dev, st.st_ino))
		return 0;
	/* A regular file only (opening anything else can have side effects),
	 * and its whole identity: an O_PATH descriptor has no inode generation,
	 * and without it a new file on a reused inode number passes for the
	 * removed one. So: O_PATH to look, then the same inode opened again. */
	int p = TDAX_REAL(openat)(dirfd, path, O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
	if (p < 0)
		return 0;
	char self[TDAX_PROC_FD_NAME];
	tdax_proc_fd_name(p, self);
	int fd = fstat(p, &st) == 0 && S_ISREG(st.st_mode) ? open_for_checkpoint(AT_FDCWD, self, true, NULL)
							  : -1;
	struct tdax_ident id;
	uint32_t idx = 0;
	bool found = fd >= 0 && tdax_ident_of_fd(fd, &id) == 0 &&
		     tdax_files_find(tdax_rt.dev, &id, &idx, gen) == 0;
	int rc = 0;
	if (found) {
		*plus1 = idx + 1;
		const struct tdax_file_rt *rt = tdax_rt_of(idx);
		if (atomic_load(&rt->rewrite)) { /* the records go to the file again */
			TDAX_REAL(close)(fd);
			fd = open_for_checkpoint(AT_FDCWD, self, true, rt);
		}
		if (fd >= 0 && (atomic_load(&rt->first_log_ns) || atomic_load(&rt->rewrite))) {
			rc = tdax_coherent_checkpoint_fd(fd, idx, *gen, true);
			tdax_count(TDAX_ST_CHECKPOINTS, 1);
		}
	}
	int e = errno;
	if (fd >= 0)
		TDAX_REAL(close)(fd);
	TDAX_REAL(close)(p);
	errno = e;
	return rc;
}

void tdax_checkpoint_below(const char *dir)
{
	struct tdax_device *dev = tdax_rt.dev;
	size_t n = strlen(dir);
	for (uint32_t i = 0; i < dev->sb->max_files; i++) {
		const struct tdax_file *f = tdax_file_at(dev, i);
		if (atomic_load(&f->state) == TDAX_FILE_ACTIVE && strncmp(f->path, dir, n) == 0 &&
		    f->path[n] == '/' && (atomic_load(&f->rt.first_log_ns) || atomic_load(&f->rt.rewrite)))
			tdax_checkpoint_file(i);
	}
}
