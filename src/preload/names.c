/*
 * names -- what renames and unlinks do to registered files (names.h).
 */
#define _GNU_SOURCE
#include "preload/names.h"
#include "core/shadow.h"
#include "preload/checkpoint.h"
#include "preload/coherent.h"
#include "preload/state.h"
#include "preload/writeback.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* The absolute path dirfd/path names now, and whether it is a directory. */
static bool abs_path(int dirfd, const char *path, char out[TDAX_FILE_PATH_MAX + 1], bool *is_dir)
{
	int fd = TDAX_REAL(openat)(dirfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	bool ok = tdax_fd_path(fd, out, TDAX_FILE_PATH_MAX + 1) > 0 && fstat(fd, &st) == 0;
	if (ok)
		*is_dir = S_ISDIR(st.st_mode);
	TDAX_REAL(close)(fd);
	return ok;
}

/* A registered file now lives at dirfd/path: record it for recovery. */
static void moved_to(uint32_t plus1, uint32_t gen, int dirfd, const char *path)
{
	char abs[TDAX_FILE_PATH_MAX + 1];
	bool is_dir;
	if (abs_path(dirfd, path, abs, &is_dir))
		tdax_files_rename(tdax_rt.dev, plus1 - 1, gen, abs);
	tdax_coherent_uncover(plus1 - 1, TDAX_FB_METADATA);
}

static int real_rename(int olddir, const char *oldpath, int newdir, const char *newpath, unsigned flags)
{
	return flags ? TDAX_REAL(renameat2)(olddir, oldpath, newdir, newpath, flags)
		     : TDAX_REAL(renameat)(olddir, oldpath, newdir, newpath);
}

/*
 * Before a rename replaces newpath and moves oldpath: checkpoint both (and
 * with RENAME_EXCHANGE, both move). After it, record where each registered
 * file went, so that recovery finds it; a directory takes every registered
 * file below it along, and those are checkpointed first too.
 */
int tdax_names_rename(int olddir, const char *oldpath, int newdir, const char *newpath,
		     unsigned flags)
{
	bool exchange = flags & RENAME_EXCHANGE;
	uint32_t new_plus1, new_gen, old_plus1, old_gen;
	/* The file it replaces keeps its records (tdax_checkpoint_unnamed);
	 * one that moves is checkpointed (its entry's path changes). */
	int new_fd = tdax_checkpoint_open(newdir, newpath, false, &new_plus1, &new_gen);
	if ((exchange && new_fd >= 0 && tdax_checkpoint_if_records(new_fd, new_plus1 - 1, new_gen) != 0) ||
	    tdax_checkpoint_path(olddir, oldpath, false, &old_plus1, &old_gen) != 0) {
		/* Records that cannot be written back cannot follow the file
		 * to its new name: the checkpoint's error, nothing renamed. */
		int e = errno;
		if (new_fd >= 0)
			TDAX_REAL(close)(new_fd);
		errno = e;
		return -1;
	}
	char old_abs[TDAX_FILE_PATH_MAX + 1], new_abs[TDAX_FILE_PATH_MAX + 1];
	bool old_dir = false, new_dir = false;
	/* The paths matter only for a directory (registered files below it
	 * move along), an exchange, or the test build's durable views: a
	 * plain file's rename costs one stat() more than the kernel's. */
	struct stat st;
	bool paths = exchange || tdax_shadow_on() || fstatat(olddir, oldpath, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		     S_ISDIR(st.st_mode);
	if (paths && !abs_path(olddir, oldpath, old_abs, &old_dir)) {
		if (new_fd >= 0)
			TDAX_REAL(close)(new_fd);
		return real_rename(olddir, oldpath, newdir, newpath, flags); /* its error */
	}
	if (!exchange || !abs_path(newdir, newpath, new_abs, &new_dir))
		new_dir = false;
	if (old_dir)
		tdax_checkpoint_below(old_abs);
	if (new_dir)
		tdax_checkpoint_below(new_abs);
	int r = real_rename(olddir, oldpath, newdir, newpath, flags);
	int err = errno;
	if (r == 0) {
		if (new_plus1 && !exchange && new_plus1 != old_plus1 &&
		    tdax_checkpoint_unnamed(new_fd, new_plus1 - 1, new_gen))
			tdax_writeback_ensure();
		if (old_plus1)
			moved_to(old_plus1, old_gen, newdir, newpath);
		if (exchange && new_plus1)
			moved_to(new_plus1, new_gen, olddir, oldpath);
		char now[TDAX_FILE_PATH_MAX + 1];
		bool dir;
		if (paths && (old_dir || new_dir || tdax_shadow_on()) && abs_path(newdir, newpath, now, &dir)) {
			if (old_dir || new_dir)
				tdax_files_move_below(tdax_rt.dev, old_abs, now, new_dir);
			tdax_shadow_renamed(old_abs, now, exchange);
		}
	}
	if (new_fd >= 0)
		TDAX_REAL(close)(new_fd);
	errno = err;
	return r;
}

int tdax_names_unlink(int dirfd, const char *path, int flags)
{
	uint32_t gen, plus1;
	int fd = tdax_checkpoint_open(dirfd, path, false, &plus1, &gen);
	char name[TDAX_FILE_PATH_MAX + 1];
	bool is_dir, named = tdax_shadow_on() && abs_path(dirfd, path, name, &is_dir);
	int r = TDAX_REAL(unlinkat)(dirfd, path, flags);
	int err = errno;
	if (r == 0 && named)
		tdax_shadow_unlinked(name);
	if (r == 0 && fd >= 0 && tdax_checkpoint_unnamed(fd, plus1 - 1, gen))
		tdax_writeback_ensure();
	if (fd >= 0)
		TDAX_REAL(close)(fd);
	errno = err;
	return r;
}

void tdax_names_attrs_changed(int dirfd, const char *path, bool follow)
{
	uint32_t plus1, gen;
	int fd = tdax_checkpoint_open(dirfd, path, follow, &plus1, &gen);
	if (fd < 0)
		return;
	tdax_coherent_attrs_changed(plus1 - 1);
	TDAX_REAL(close)(fd);
}

void tdax_names_truncate_look(int dirfd, const char *path, bool follow, struct tdax_names_trunc *t)
{
	t->fd = tdax_checkpoint_open(dirfd, path, follow, &t->plus1, &t->gen);
	if (t->fd >= 0)
		t->mark = tdax_coherent_truncate_look(t->plus1 - 1);
}

void tdax_names_truncated(struct tdax_names_trunc *t, bool done, uint64_t size)
{
	if (t->fd < 0)
		return;
	/* The name may have been given to another file between the look and
	 * the truncate: a record says the file was truncated only if its size
	 * says so too. */
	uint64_t now;
	if (done && tdax_file_size(t->fd, &now) == 0 && now == size)
		tdax_coherent_truncated(t->plus1 - 1, t->gen, size, t->mark);
	else
		tdax_coherent_uncover(t->plus1 - 1, TDAX_FB_METADATA);
	TDAX_REAL(close)(t->fd);
	t->fd = -1;
}

int tdax_names_truncate(const char *path, off_t len)
{
	struct tdax_names_trunc t;
	tdax_names_truncate_look(AT_FDCWD, path, true, &t);
	int r = TDAX_REAL(truncate)(path, len);
	int err = errno;
	tdax_names_truncated(&t, r == 0, (uint64_t)len);
	errno = err;
	return r;
}
