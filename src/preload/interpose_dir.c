/*
 * interpose_dir -- hooks of the calls that change names in a directory
 * and that the log never holds (mkdir, rmdir, link, symlink, mknod,
 * mkfifo): the directory's next sync is real (dirsync.h). Each hook makes
 * the real call; errno and result are the real call's. Nothing while the
 * process has not attached (its changes are then a process tdax does not
 * see: the directory's change time tells).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload/dirsync.h"
#include "preload/interpose.h"
#include "preload/start.h"

/* The change at dirfd/path, looked at before (l) and done (r). */
static int changed(int dirfd, const char *path, const struct tdax_dir_look *l, int r)
{
	tdax_dirsync_changed(dirfd, path, l, false);
	return r;
}

#define AROUND(dirfd, path, call)                                              \
	do {                                                                   \
		struct tdax_dir_look l;                                        \
		tdax_dirsync_look(dirfd, path, &l);                            \
		return changed(dirfd, path, &l, call);                         \
	} while (0)

EXPORT int mkdir(const char *path, mode_t mode)
{
	AROUND(AT_FDCWD, path, TDAX_REAL(mkdir)(path, mode));
}

EXPORT int mkdirat(int dirfd, const char *path, mode_t mode)
{
	AROUND(dirfd, path, TDAX_REAL(mkdirat)(dirfd, path, mode));
}

EXPORT int rmdir(const char *path)
{
	AROUND(AT_FDCWD, path, TDAX_REAL(rmdir)(path));
}

EXPORT int link(const char *from, const char *to)
{
	AROUND(AT_FDCWD, to, TDAX_REAL(link)(from, to));
}

EXPORT int linkat(int fromdir, const char *from, int todir, const char *to, int flags)
{
	AROUND(todir, to, TDAX_REAL(linkat)(fromdir, from, todir, to, flags));
}

EXPORT int symlink(const char *target, const char *path)
{
	AROUND(AT_FDCWD, path, TDAX_REAL(symlink)(target, path));
}

EXPORT int symlinkat(const char *target, int dirfd, const char *path)
{
	AROUND(dirfd, path, TDAX_REAL(symlinkat)(target, dirfd, path));
}

EXPORT int mknod(const char *path, mode_t mode, dev_t dev)
{
	AROUND(AT_FDCWD, path, TDAX_REAL(mknod)(path, mode, dev));
}

EXPORT int mknodat(int dirfd, const char *path, mode_t mode, dev_t dev)
{
	AROUND(dirfd, path, TDAX_REAL(mknodat)(dirfd, path, mode, dev));
}

EXPORT int mkfifo(const char *path, mode_t mode)
{
	AROUND(AT_FDCWD, path, TDAX_REAL(mkfifo)(path, mode));
}

EXPORT int mkfifoat(int dirfd, const char *path, mode_t mode)
{
	AROUND(dirfd, path, TDAX_REAL(mkfifoat)(dirfd, path, mode));
}
