/*
 * dirsync -- a directory's fsync answered from the log (core/dirs.h), and
 * what forbids it: every change of names in a directory since its last
 * real sync must be one the log holds (a file's creation record, an unlink
 * recovery redoes), and no process tdax does not see may have changed it.
 */
#ifndef TDAX_DIRSYNC_H
#define TDAX_DIRSYNC_H

#include <stdbool.h>
#include <stdint.h>

struct statx; /* <sys/stat.h> with _GNU_SOURCE */

/* The directory a change of names happens in, looked at before it. */
struct tdax_dir_look {
	bool valid;
	uint64_t dev, ino, ctime;
};

/* Before a change of names at dirfd/path that the log may hold (an open
 * with O_CREAT, an unlink): the directory's identity and change time. */
void tdax_dirsync_look(int dirfd, const char *path, struct tdax_dir_look *l);

/* After a change of names at dirfd/path (it succeeded): logged, the log
 * holds it and the directory's guard moves on with it (if nothing else
 * changed the directory since the look, l); otherwise the directory's
 * next sync is real. l may be NULL (nothing looked at: not logged). */
void tdax_dirsync_changed(int dirfd, const char *path, const struct tdax_dir_look *l, bool logged);

/* After an open at dirfd/path that made a file (device, inode fdev, fino)
 * whose creation is not a record yet but may become one at its first sync
 * (manage.c: policy always): a change the log does not hold, as
 * tdax_dirsync_changed counts it, remembered by the thread. */
void tdax_dirsync_made(int dirfd, const char *path, const struct tdax_dir_look *l, uint64_t fdev,
		       uint64_t fino);

/* The creation of file (fdev, fino), now at file_path, is a record now:
 * if it was this thread's last made (tdax_dirsync_made) and nothing else
 * changed its directory since, the directory's next sync may be answered
 * from the log as if it had been logged at once. */
void tdax_dirsync_made_logged(uint64_t fdev, uint64_t fino, const char *file_path);

/* What of a descriptor tdax does not manage its sync needs to know, for a
 * directory: statx() with this mask. */
#define TDAX_DIRSYNC_MASK (STATX_TYPE | STATX_INO | STATX_CTIME)

/* fsync/fdatasync of the directory open as fd (stx: its statx, with
 * TDAX_DIRSYNC_MASK): answered from the log when it may be, else the
 * kernel's. Returns what the call returns. */
int tdax_dirsync_sync(int fd, bool datasync, const struct statx *stx);

#endif
