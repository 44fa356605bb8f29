/*
 * checkpoint -- checkpoints of files tdax has to open itself: by index,
 * below a directory, through a descriptor of the file a path names; and
 * the release of a removed file's records once its removal is durable.
 * Each checkpoint is coherent mode's (a real sync, then the release of the
 * file's records) on a descriptor opened read-only (writable only when
 * records must be written again), checked to be the registered file before
 * anything is released.
 */
#ifndef TDAX_CHECKPOINT_H
#define TDAX_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct statx; /* <sys/stat.h> with _GNU_SOURCE */

/* Checkpoint a registered file by index, opening it by its path (or
 * through a descriptor of this process when it was renamed or removed
 * behind tdax's back). The records of a file gone for good are let go
 * once its directory is synced (a removal tdax saw: its entry too). */
int tdax_checkpoint_file(uint32_t idx);

/* A sync through a descriptor tdax does not manage (one opened
 * read-only) of a regular file (stx: its statx, type and inode at least):
 * if it is a registered file with records, they are checkpointed first,
 * as before a sync() (checkpoint.c). 0, or -1 with errno. */
int tdax_checkpoint_through(int fd, const struct statx *stx);

/* Let go of the removed files idx[0..n) (tdax_file_gone, each seen so
 * before the call), with one directory sync per directory: a sync that
 * starts after a removal was done makes it durable, whichever file's
 * let-go asked for it (the write-back pass: SQLite's rollback journal is
 * created and removed at every transaction). */
void tdax_checkpoint_removed(const uint32_t *idx, size_t n);

/* The registered file dirfd/path names (follow: its last link is
 * followed, as truncate and O_TRUNC do; unlink and rename act on the link
 * itself): a descriptor that holds the file (a path descriptor where the
 * file system allows, else one open read-only), for the caller to close,
 * with *plus1 the file's index + 1 and *gen its generation; -1 with
 * *plus1 = 0 if path names no registered file. One stat() for a path that
 * does not; *mode (if not NULL) is what it found, 0 when it found nothing
 * or made none (no file registered at all). */
int tdax_checkpoint_open(int dirfd, const char *path, bool follow, uint32_t *plus1, uint32_t *gen, mode_t *mode);

/* Checkpoint the registered file (idx, gen) fd holds (tdax_checkpoint_open) if it has records.
 * Returns 0, or -1 with errno if they could not be written back (they stay
 * live). */
int tdax_checkpoint_if_records(int fd, uint32_t idx, uint32_t gen);

/* A name of the registered file (idx, gen) is about to be removed (unlink,
 * or a rename over it): if it has records, a crash from here on must not
 * leave them for recovery to report as unmatched (the entry says "being
 * removed", persistently). Then tdax_checkpoint_unnamed. */
void tdax_checkpoint_unnaming(uint32_t idx, uint32_t gen);

/* After the removal of a name of the registered file (idx, gen) open as fd
 * (done: the call succeeded; replaced: by a rename over it, not an
 * unlink). If that was its last name, its records stay
 * until the write-back thread has made the removal durable (a directory
 * sync), then go with its entry -- no sync on the caller's path: true, the
 * thread must run; a file with no records loses its entry at once. If it
 * has another name, it is checkpointed and left to the kernel (recovery
 * would not find it there). */
bool tdax_checkpoint_unnamed(int fd, uint32_t idx, uint32_t gen, bool done, bool replaced);

/* Before the directory dir (absolute) is renamed: checkpoint every
 * registered file below it that has records, any process's (those this
 * process cannot open stay as they are). dir "": every file (paths are
 * absolute), before a sync() or syncfs() (checkpoint.c). 0, or -1 with
 * errno if one failed (its records stay). */
int tdax_checkpoint_below(const char *dir);

#endif
