/*
 * checkpoint -- checkpoints of files tdax has to open itself: by index, by
 * path, below a directory. Each is coherent mode's checkpoint (a real
 * sync, then the release of the file's records) on a descriptor opened
 * read-only (writable only when records must be written again), checked to
 * be the registered file before anything is released.
 */
#ifndef TDAX_CHECKPOINT_H
#define TDAX_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

/* Checkpoint a registered file by index, opening it by its path (or
 * through a descriptor of this process when it was renamed or removed
 * behind tdax's back; the records of a file gone for good are let go). */
int tdax_checkpoint_file(uint32_t idx);

/* Before a truncate, unlink or rename over path: checkpoint it if it is a
 * registered file with records (follow: path's last link is followed, as
 * truncate and O_TRUNC do; unlink and rename act on the link itself).
 * *plus1 is the file's index + 1 (0: not a registered file) and *gen its
 * generation. Returns 0, or -1 with errno if its records could not be
 * written back (they stay live). */
int tdax_checkpoint_path(int dirfd, const char *path, bool follow, uint32_t *plus1, uint32_t *gen);

/* Before the directory dir (absolute) is renamed: checkpoint every
 * registered file below it that has records. */
void tdax_checkpoint_below(const char *dir);

#endif
