/*
 * names -- renames, unlinks and truncates by name of registered files.
 * Records of a file whose last name goes (unlink, a rename over it) stay
 * until the write-back thread has made the removal durable; recovery
 * applies them only to the very file that wrote them (device, inode and
 * its generation or birth time), so a later file on the name or the inode
 * never takes them. A truncate by name is a record, as ftruncate's, and
 * so is a rename of a file with records (both names), after which the file
 * table records where it went: recovery finds it under whichever name a
 * crash left. A file that lives on under a name tdax does not know goes to
 * the kernel for good.
 */
#ifndef TDAX_NAMES_H
#define TDAX_NAMES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "preload/coherent.h"

/* renameat2(olddir, oldpath, newdir, newpath, flags) (flags 0: renameat),
 * with what it does to registered files; returns what the call returns. */
int tdax_names_rename(int olddir, const char *oldpath, int newdir, const char *newpath,
		      unsigned flags);

/* unlinkat(dirfd, path, flags) of a non-directory, likewise. */
int tdax_names_unlink(int dirfd, const char *path, int flags);

/* truncate(path, len), likewise. */
int tdax_names_truncate(const char *path, off_t len);

/* The attributes of the file dirfd/path names changed (chmod, chown,
 * utimensat, an extended attribute; follow: through a last symbolic
 * link): if it is a registered file, its next fsync is real. */
void tdax_names_attrs_changed(int dirfd, const char *path, bool follow);

/* A truncate by name the caller makes itself (an open with O_TRUNC):
 * look before it, tell after it whether it was done and to what size. */
struct tdax_names_trunc {
	int fd; /* the registered file path named, or -1 */
	uint32_t plus1, gen;
	struct tdax_meta_mark mark;
};
void tdax_names_truncate_look(int dirfd, const char *path, bool follow, struct tdax_names_trunc *t);
void tdax_names_truncated(struct tdax_names_trunc *t, bool done, uint64_t size);

#endif
