/*
 * selection -- which of this process's files bypass mode may promote: the
 * profiles bypass.c feeds (every write, sync and served read of a file in
 * bypass mode), the selection of policy/select.h over them, and the
 * demotion of promoted files it drops.
 *
 * The capacity is a share of the device's log (bypass_share_pct, default
 * 50 %; the rest is coherent mode's), the block cache's (cache.h), the
 * floor bypass_floor bytes a second (default 0: every file that synced in
 * the window is a candidate, the capacity decides), the profiles' window
 * bypass_window_ms (default 1000): tunables (state.h's
 * tdax_bypass_tunables), read again at each selection; a file's
 * footprint is the blocks its writes in place keep for one window, or for
 * TDAX_WB_AGE_MS if the write-back takes them sooner, and its appends' of
 * a tenth of a second (the append reservation, policy/select.h).
 *
 * One selection over the device: the files other processes hold promoted
 * (their rates, published every TDAX_CACHESTAT_EVERY_NS in the device's
 * table, core/cachestat.h) are candidates of every process's selection
 * too, promoted ones, so all rank the same files and each applies its own
 * part; a file of this process that ranks below another's that takes the
 * room is dropped by its own process. The share is split among the
 * processes' caches by the footprints of their selected files: this
 * process's cache gets the part of its own (tdax_cache_set_share). The
 * table has TDAX_CACHESTAT_SLOTS slots: promoted files beyond them are
 * not seen by the other processes.
 *
 * When: a file not taken asks again at a sync once its bandwidth has
 * doubled since it was refused, or TDAX_SELECTION_RETRY_NS after the last
 * selection (a new stream is promoted at its first syncs);
 * otherwise the write-back thread selects every TDAX_SELECTION_EVERY_NS
 * when the candidates' bandwidth moved by a quarter, they changed or the
 * promoted ones overfill the share by more than a quarter
 * (policy/select.h), and demotes what was dropped.
 */
#ifndef TDAX_SELECTION_H
#define TDAX_SELECTION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/device.h"
#include "preload/promoted.h"

#define TDAX_SELECTION_EVERY_NS (100 * 1000000ull)
#define TDAX_SELECTION_RETRY_NS (10 * 1000000ull)

/* Set up at attach to dev (bypass mode, after tdax_promoted_init). */
bool tdax_selection_init(const struct tdax_device *dev);

/* What a file of this process did: a write of len bytes (append: at its
 * end), a sync at now (coarse clock; b locked, both); a read of len bytes
 * tdax served through fd (promoted.h). */
void tdax_selection_wrote(struct tdax_promoted *b, uint64_t len, bool append);
void tdax_selection_synced(struct tdax_promoted *b, uint64_t now);
void tdax_selection_served_read(int fd, uint64_t len);

/* May b (locked) be promoted? Selects again first if b was not taken and
 * asks again (above). */
bool tdax_selection_takes(struct tdax_promoted *b);

/* The write-back thread's pass: select again if due; demote the promoted
 * files the selection dropped; every TDAX_CACHESTAT_EVERY_NS, this
 * process's promoted files' bandwidth and cache figures into the device's
 * table (core/cachestat.h), for tdax status. */
void tdax_selection_serve(void);

/* In the child of a fork: a selection the parent was making is not. */
void tdax_selection_after_fork_child(void);

#endif
