/*
 * tracking -- the runtime side of the policy: feeds writes and syncs of managed
 * files to the policy (policy/track.h) through the device's range table, tells the
 * write path whether a write is to be logged, and runs the upgrade and
 * downgrade jobs, re-evaluation and pressure downgrades from the
 * write-back thread.
 */
#ifndef TDAX_TRACKING_H
#define TDAX_TRACKING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A write of len bytes at off reached the file: track it. True if every
 * range it touched is logged (the policy says: copy it into the device). */
bool tdax_tracking_write(uint32_t idx, uint32_t gen, uint64_t off, size_t len);

/* The hooks' cold write (coherent_ops.c): if a write of len bytes at off
 * goes to a range that is not logged, track it (as tdax_tracking_write)
 * and say so; else (or if the cheap way cannot tell) track nothing and
 * say no. */
bool tdax_tracking_cold(uint32_t idx, uint32_t gen, uint64_t off, size_t len);

/*
 * Heirs (policy/track.h): removed reports that the registered file (idx,
 * gen) is about to lose its name `name` (as the application gave it) to an
 * unlink; closed reports the process's last close of (idx, gen), whose
 * entry may be let go (a file synced once), closed_unregistered the close
 * of a descriptor with no entry (a file synced once is not registered:
 * synced_ns is its sync's, or 0), and unlinked an unlink of a name no
 * registered file has: if it is a file closed so within the window, its
 * name gets its heir all the same;
 * heir says whether a file about to be made at `name` takes up a removed
 * file's stream (register it at once), and whether that stream was
 * upgraded (its creation is then a record: its first sync is light);
 * inherit gives the new file's entry that stream's counts and upgrade.
 */
enum tdax_heir { TDAX_HEIR_NONE = 0, TDAX_HEIR_COLD, TDAX_HEIR_UPGRADED };
void tdax_tracking_removed(uint32_t idx, uint32_t gen, const char *name);
void tdax_tracking_closed(uint32_t idx, uint32_t gen);
void tdax_tracking_closed_unregistered(uint64_t ino, uint64_t synced_ns);
void tdax_tracking_unlinked(int dirfd, const char *path);
enum tdax_heir tdax_tracking_heir(const char *name);
void tdax_tracking_inherit(uint32_t idx, uint32_t gen, const char *name);

/* The policy's counts of this thread's last writes and held syncs are
 * added to their ranges in batches (tracking.c): flush adds them now (at
 * exit), and a child of fork forgets its parent's. */
void tdax_tracking_flush(void);
void tdax_tracking_after_fork(void);

/* Would a write of len bytes at off be logged now? Looks, tracks nothing:
 * a range the table does not have yet is not logged. */
bool tdax_tracking_logged(uint32_t idx, uint32_t gen, uint64_t off, size_t len);

/* Is a sync at now, after one at prev (0: none), part of a sync stream
 * (within the writeback window)? Only a stream can upgrade a range. */
bool tdax_tracking_stream(uint64_t prev, uint64_t now);

/* A sync of the file: count its writebacks and decide; a range marked for
 * a job wakes the write-back thread (wake.h). A sync of a file whose
 * written ranges are all upgraded is counted later, with this thread's
 * next ones (tracking.c, "held"). */
void tdax_tracking_sync(uint32_t idx, uint32_t gen);

/*
 * A lightweight sync the policy hears of later (bypass mode's: a promoted
 * file's syncs are a fence, and the policy's work per sync cost it more
 * than the fence). sync_later does the one thing that cannot wait -- each
 * dirty range's last page moves back, so that the next write's page counts
 * as a writeback again, as after a sync -- and says whether the sync may
 * be counted later (false: the file has too many dirty ranges to look at
 * cheaply; count it now, tdax_tracking_sync). synced then counts n such
 * syncs of (idx, gen), the first at first, the last at last, at once: the
 * writebacks their ranges hold, the syncs, one decision per range.
 */
bool tdax_tracking_sync_later(uint32_t idx);
void tdax_tracking_synced(uint32_t idx, uint32_t gen, uint32_t n, uint64_t first, uint64_t last);

/*
 * Explicit mappings (explicit.h): pin makes the ranges under [off, off+len)
 * of the file logged now and keeps them so -- out of re-evaluation and
 * pressure -- while this process lives or until unpinned. True if every
 * one is logged (under policy `always` every write is; under `never`, none
 * is, and nothing is pinned). unpin lets this process's pins go.
 */
bool tdax_tracking_pin(uint32_t idx, uint32_t gen, uint64_t off, size_t len);
void tdax_tracking_unpin(uint32_t idx, uint32_t gen, uint64_t off, size_t len);

/* One pass of the worker: jobs, re-evaluation; under pressure (log fuller
 * than the high watermark) downgrade the ranges with the lowest M first.
 * A downgrade job checkpoints the file with checkpoint(file index), which
 * returns 0 on success (the write-back thread passes coherent mode's). */
void tdax_tracking_work(bool pressure, int (*checkpoint)(uint32_t idx));

/* The share of the device's log in use now, in % (the write-back pass):
 * the adaptive policy's thresholds rise with it. */
void tdax_tracking_fill(uint32_t pct);

#endif
