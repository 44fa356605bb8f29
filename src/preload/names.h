/*
 * names -- renames, unlinks and truncates by name of registered files. Before a name goes or
 * is replaced, the file behind it is checkpointed (no record may be
 * replayed onto whatever takes the name later); after a rename, the file
 * table records where each registered file went, so that recovery finds
 * it; a file that lives on under a name tdax does not know goes to the
 * kernel for good.
 */
#ifndef TDAX_NAMES_H
#define TDAX_NAMES_H

#include <sys/types.h>

/* renameat2(olddir, oldpath, newdir, newpath, flags) (flags 0: renameat),
 * with what it does to registered files; returns what the call returns. */
int tdax_names_rename(int olddir, const char *oldpath, int newdir, const char *newpath,
		      unsigned flags);

/* unlinkat(dirfd, path, flags) of a non-directory, likewise. */
int tdax_names_unlink(int dirfd, const char *path, int flags);

/* truncate(path, len): the file behind path is checkpointed first (no
 * record may be replayed over the result); its next sync is real. */
int tdax_names_truncate(const char *path, off_t len);

#endif
