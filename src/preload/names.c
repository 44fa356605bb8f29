/*
 * names -- what renames and unlinks do to registered files (names.h).
 */
#define _GNU_SOURCE
#include "core/sys.h"
#include "preload/names.h"
#include "core/shadow.h"
#include "core/testaid.h"
#include "preload/checkpoint.h"
#include "preload/coherent.h"
#include "preload/dirsync.h"
#include "preload/state.h"
#include "preload/tracking.h"
#include "preload/writeback.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The absolute path dirfd/path names now, and whether it is a directory. */
static bool abs_path(int dirfd, const char *path, char out[TDAX_FILE_PATH_MAX + 1], bool *is_dir)
{
	int fd = TDAX_REAL(openat)(dirfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	bool ok = tdax_fd_path(fd, out, TDAX_FILE_PATH_MAX + 1) > 0 && tdax_sys_fstat(fd, &st) == 0;
	if (ok)
		*is_dir = S_ISDIR(st.st_mode);
	TDAX_REAL(close)(fd);
	return ok;
}

/* The absolute path dirfd/path will name, before a rename makes it: its
 * directory's path and its last component (none of ".", ".." or empty). */
static bool abs_target(int dirfd, const char *path, char out[TDAX_FILE_PATH_MAX + 1])
{
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	char dir[TDAX_FILE_PATH_MAX + 1];
	bool is_dir;
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..") ||
	    (slash && (size_t)(slash - path) >= sizeof(dir)))
		return false;
	snprintf(dir, sizeof(dir), "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1,
		 slash ? path : ".");
	if (!abs_path(dirfd, dir, out, &is_dir) || !is_dir)
		return false;
	size_t n = strlen(out);
	return snprintf(out + n, TDAX_FILE_PATH_MAX + 1 - n, "%s%s", n > 1 ? "/" : "", base) <
	       (int)(TDAX_FILE_PATH_MAX + 1 - n);
}

/* Before the rename of registered file (idx, gen) to dirfd/path: the
 * rename is a record first (both names: tdax_coherent_renamed), so that a
 * process killed between the kernel's rename and its entry's new name
 * leaves recovery the name to look under (it checks the file found there,
 * so a rename that then fails misleads nobody). False if it is not. */
static bool intends_move(uint32_t idx, uint32_t gen, int dirfd, const char *path)
{
	char to[TDAX_FILE_PATH_MAX + 1], from[TDAX_FILE_PATH_MAX];
	const struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	if (f->gen != gen || !abs_target(dirfd, path, to) || strlen(to) >= TDAX_FILE_PATH_MAX)
		return false;
	snprintf(from, sizeof(from), "%s", f->path);
	return tdax_coherent_renamed(idx, gen, from, to);
}

/*
 * The registered file (idx, gen), open as fd, now lives at dirfd/path:
 * its entry takes the new name, so that recovery finds it. The rename is
 * a record (logged: already, intends_move), and nothing is synced. If the
 * log is full, its records (if any) are checkpointed first and its next
 * sync is real. A name tdax cannot record (too long) leaves it to the
 * kernel.
 */
static void moved_to(int fd, uint32_t idx, uint32_t gen, int dirfd, const char *path, bool logged)
{
	char to[TDAX_FILE_PATH_MAX + 1], from[TDAX_FILE_PATH_MAX];
	bool is_dir;
	const struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	if (f->gen != gen)
		return;
	if (!abs_path(dirfd, path, to, &is_dir) || strlen(to) >= TDAX_FILE_PATH_MAX) {
		tdax_checkpoint_if_records(fd, idx, gen);
		tdax_coherent_kernel_only(idx, TDAX_FB_UNREGISTERED);
		return;
	}
	snprintf(from, sizeof(from), "%s", f->path);
	if (logged || tdax_coherent_renamed(idx, gen, from, to)) {
		tdax_files_rename(tdax_rt.dev, idx, gen, to);
		return;
	}
	tdax_checkpoint_if_records(fd, idx, gen);
	tdax_files_rename(tdax_rt.dev, idx, gen, to);
	tdax_coherent_uncover(idx, TDAX_FB_METADATA);
}

static int real_rename(int olddir, const char *oldpath, int newdir, const char *newpath, unsigned flags)
{
	return flags ? TDAX_REAL(renameat2)(olddir, oldpath, newdir, newpath, flags)
		     : TDAX_REAL(renameat)(olddir, oldpath, newdir, newpath);
}

static void close_both(int a, int b)
{
	if (a >= 0)
		TDAX_REAL(close)(a);
	if (b >= 0)
		TDAX_REAL(close)(b);
}

/*
 * A rename moves oldpath's file (with RENAME_EXCHANGE, newpath's too): each
 * registered one takes its new name, logged (moved_to). The file it
 * replaces keeps its records until its removal is durable
 * (tdax_checkpoint_unnamed). A directory takes every registered file below
 * it along; those are checkpointed first, and the rename fails with the
 * checkpoint's error if one fails (records that cannot be written back
 * would be looked for under the old name).
 */
int tdax_names_rename(int olddir, const char *oldpath, int newdir, const char *newpath,
		     unsigned flags)
{
	bool exchange = flags & RENAME_EXCHANGE;
	uint32_t new_plus1, new_gen, old_plus1, old_gen;
	mode_t old_mode;
	int new_fd = tdax_checkpoint_open(newdir, newpath, false, &new_plus1, &new_gen, NULL);
	int old_fd = tdax_checkpoint_open(olddir, oldpath, false, &old_plus1, &old_gen, &old_mode);
	char old_abs[TDAX_FILE_PATH_MAX + 1], new_abs[TDAX_FILE_PATH_MAX + 1];
	bool old_dir = false, new_dir = false;
	/* The paths matter only for a directory (registered files below it
	 * move along), an exchange, or the test build's durable views: a
	 * plain file's rename costs two stat()s more than the kernel's (the
	 * looks of tdax_checkpoint_open), and none while no file is
	 * registered. (No mode: nothing at oldpath, or no file registered
	 * when it looked -- one may be now.) */
	bool paths = exchange || tdax_shadow_on() ||
		     (!tdax_files_none(tdax_rt.dev) && (old_mode == 0 || S_ISDIR(old_mode)));
	if (paths && !abs_path(olddir, oldpath, old_abs, &old_dir)) {
		close_both(new_fd, old_fd);
		return real_rename(olddir, oldpath, newdir, newpath, flags); /* its error */
	}
	if (!exchange || !abs_path(newdir, newpath, new_abs, &new_dir))
		new_dir = false;
	if ((old_dir && tdax_checkpoint_below(old_abs) != 0) || (new_dir && tdax_checkpoint_below(new_abs) != 0)) {
		int e = errno;
		close_both(new_fd, old_fd);
		errno = e;
		return -1;
	}
	bool replaces = new_plus1 && !exchange && new_plus1 != old_plus1;
	if (replaces)
		tdax_checkpoint_unnaming(new_plus1 - 1, new_gen);
	struct tdax_dir_look from_dir, to_dir;
	tdax_dirsync_look(olddir, oldpath, &from_dir);
	tdax_dirsync_look(newdir, newpath, &to_dir);
	bool old_logged = old_plus1 && intends_move(old_plus1 - 1, old_gen, newdir, newpath);
	bool new_logged = exchange && new_plus1 && intends_move(new_plus1 - 1, new_gen, olddir, oldpath);
	int r = real_rename(olddir, oldpath, newdir, newpath, flags);
	int err = errno;
	if (TDAX_TEST_ENV("KILL_AFTER_RENAME")) /* a kill between the kernel's rename and the entry's */
		raise(SIGKILL);
	/* Not in the log as a change of names: the directories' next syncs
	 * are real (a rename record only tells recovery where to look). */
	tdax_dirsync_changed(olddir, oldpath, &from_dir, false);
	tdax_dirsync_changed(newdir, newpath, &to_dir, false);
	if (replaces && tdax_checkpoint_unnamed(new_fd, new_plus1 - 1, new_gen, r == 0, true))
		tdax_writeback_ensure();
	if (r == 0) {
		if (old_plus1)
			moved_to(old_fd, old_plus1 - 1, old_gen, newdir, newpath, old_logged);
		if (exchange && new_plus1)
			moved_to(new_fd, new_plus1 - 1, new_gen, olddir, oldpath, new_logged);
		char now[TDAX_FILE_PATH_MAX + 1];
		bool dir;
		if (paths && (old_dir || new_dir || tdax_shadow_on()) && abs_path(newdir, newpath, now, &dir)) {
			if (old_dir || new_dir)
				tdax_files_move_below(tdax_rt.dev, old_abs, now, new_dir);
			tdax_shadow_renamed(old_abs, now, exchange);
		}
	}
	close_both(new_fd, old_fd);
	errno = err;
	return r;
}

int tdax_names_unlink(int dirfd, const char *path, int flags)
{
	uint32_t gen, plus1;
	int fd = tdax_checkpoint_open(dirfd, path, false, &plus1, &gen, NULL);
	char name[TDAX_FILE_PATH_MAX + 1];
	bool is_dir, named = tdax_shadow_on() && abs_path(dirfd, path, name, &is_dir);
	if (fd >= 0) {
		tdax_checkpoint_unnaming(plus1 - 1, gen);
		tdax_tracking_removed(plus1 - 1, gen, path); /* a new file here may take up its stream */
	} else {
		tdax_tracking_unlinked(dirfd, path); /* or one let go at its close */
	}
	/* Only an unlink of a registered file may be held by the log: the
	 * directory is looked at before for no other (dirsync.h). */
	struct tdax_dir_look dir = { .valid = false };
	if (fd >= 0)
		tdax_dirsync_look(dirfd, path, &dir);
	int r = TDAX_REAL(unlinkat)(dirfd, path, flags);
	int err = errno;
	if (r == 0 && named)
		tdax_shadow_unlinked(name);
	/* An unlink of a file with records is held by the log (recovery
	 * unlinks it again); of any other, it is not. */
	bool logged = fd >= 0 && tdax_checkpoint_unnamed(fd, plus1 - 1, gen, r == 0, false);
	if (logged)
		tdax_writeback_ensure();
	if (r == 0 || dir.valid)
		tdax_dirsync_changed(dirfd, path, &dir, logged);
	if (fd >= 0)
		TDAX_REAL(close)(fd);
	errno = err;
	return r;
}

void tdax_names_attrs_changed(int dirfd, const char *path, bool follow)
{
	uint32_t plus1, gen;
	int fd = tdax_checkpoint_open(dirfd, path, follow, &plus1, &gen, NULL);
	if (fd < 0)
		return;
	tdax_coherent_attrs_changed(plus1 - 1);
	TDAX_REAL(close)(fd);
}

void tdax_names_truncate_look(int dirfd, const char *path, bool follow, struct tdax_names_trunc *t)
{
	t->fd = tdax_checkpoint_open(dirfd, path, follow, &t->plus1, &t->gen, NULL);
	if (t->fd >= 0)
		t->mark = tdax_coherent_meta_look(t->plus1 - 1);
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
