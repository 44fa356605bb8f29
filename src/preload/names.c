/*
 * names -- what renames and unlinks do to registered files (names.h).
 */
#define _GNU_SOURCE
#include "preload/names.h"
#include "core/shadow.h"
#include "preload/checkpoint.h"
#include "preload/coherent.h"
#include "preload/state.h"

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
	tdax_checkpoint_path(newdir, newpath, false, &new_plus1, &new_gen);
	tdax_checkpoint_path(olddir, oldpath, false, &old_plus1, &old_gen);
	char old_abs[TDAX_FILE_PATH_MAX + 1], new_abs[TDAX_FILE_PATH_MAX + 1];
	bool old_dir = false, new_dir = false;
	/* The paths matter only for a directory (registered files below it
	 * move along), an exchange, or the test build's durable views: a
	 * plain file's rename costs one stat() more than the kernel's. */
	struct stat st;
	bool paths = exchange || tdax_shadow_on() || fstatat(olddir, oldpath, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		     S_ISDIR(st.st_mode);
	if (paths && !abs_path(olddir, oldpath, old_abs, &old_dir))
		return real_rename(olddir, oldpath, newdir, newpath, flags); /* its error */
	if (!exchange || !abs_path(newdir, newpath, new_abs, &new_dir))
		new_dir = false;
	if (old_dir)
		tdax_checkpoint_below(old_abs);
	if (new_dir)
		tdax_checkpoint_below(new_abs);
	int r = real_rename(olddir, oldpath, newdir, newpath, flags);
	int err = errno;
	if (r == 0) {
		/* The file rename replaced may live on through a descriptor: it
		 * has no name now, so no checkpoint could find it by path. */
		if (new_plus1 && !exchange && new_plus1 != old_plus1)
			tdax_coherent_kernel_only(new_plus1 - 1, TDAX_FB_METADATA);
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
	errno = err;
	return r;
}

/* Checkpoint before the name goes; free the entry once the file is gone. */
int tdax_names_unlink(int dirfd, const char *path, int flags)
{
	uint32_t gen, plus1;
	tdax_checkpoint_path(dirfd, path, false, &plus1, &gen);
	int fd = plus1 ? TDAX_REAL(openat)(dirfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
	char name[TDAX_FILE_PATH_MAX + 1];
	bool is_dir, named = tdax_shadow_on() && abs_path(dirfd, path, name, &is_dir);
	int r = TDAX_REAL(unlinkat)(dirfd, path, flags);
	int err = errno;
	if (r == 0 && named)
		tdax_shadow_unlinked(name);
	struct stat st;
	if (r == 0 && fd >= 0 && fstat(fd, &st) == 0) {
		if (st.st_nlink == 0)
			tdax_files_forget(tdax_rt.dev, plus1 - 1, gen);
		else /* it lives on under a name tdax does not know: recovery could not find it */
			tdax_coherent_kernel_only(plus1 - 1, TDAX_FB_METADATA);
	}
	if (fd >= 0)
		TDAX_REAL(close)(fd);
	errno = err;
	return r;
}

int tdax_names_truncate(const char *path, off_t len)
{
	uint32_t gen, plus1;
	if (tdax_checkpoint_path(AT_FDCWD, path, true, &plus1, &gen) != 0)
		return -1;
	int r = TDAX_REAL(truncate)(path, len);
	int err = errno;
	if (plus1 && r == 0) {
		atomic_store(&tdax_rt_of(plus1 - 1)->size_seen, (uint64_t)len);
		tdax_coherent_uncover(plus1 - 1, TDAX_FB_METADATA);
	}
	errno = err;
	return r;
}
