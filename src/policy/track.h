/*
 * track -- the tracking and upgrade policy of the thesis (chapters 4-5,
 * SPEC §2), as pure code: no I/O, time is passed in, so the runtime and a
 * simulator run exactly the same decisions.
 *
 * A file is divided into ranges of 2^G pages. Per range:
 *   write_count     +1 for every page a write touches; each increment is
 *                   forgotten after the write window;
 *   writeback_count +1 for every page of the range dirty when a sync writes
 *                   it back; forgotten after the writeback window.
 * M = 100 * writeback_count / write_count, once write_count >= F.
 * M > U and not upgraded: upgrade; M < D and upgraded: downgrade.
 *
 * One refinement, argued in docs/policy.md: a sync counts its writebacks,
 * and may decide an upgrade, only if it comes within the writeback window
 * of the file's previous sync (it is part of a sync *stream*). Without it,
 * one sync of many pages written seconds earlier looks like a stream of
 * synced writes, and a rare burst of syncs amid steady writes would be
 * upgraded.
 *
 * Policy "adaptive" (beyond the thesis, its section 7.1) decides on the
 * same counts with thresholds of its own per range (tdax_track_adapt),
 * carries an append stream's upgrade into the next range
 * (tdax_track_carry) and lets a file made anew at a removed one's name
 * take up its stream (heirs, shared with "thesis").
 *
 * The counts are sliding windows of TDAX_WIN_BUCKETS buckets (an increment
 * is forgotten between (1 - 1/B) and 1 window after it was made), updated
 * with atomics only, so any number of threads and processes can share one
 * range in the device.
 *
 * What the device stores -- the tunables (core/tunables.h) and the
 * per-range counters and state (struct tdax_range_track, core/ranges.h) --
 * is core's; this is the code that decides on it.
 */
#ifndef TDAX_TRACK_H
#define TDAX_TRACK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/ranges.h"
#include "core/tunables.h"

#define TDAX_PAGE_SHIFT 12

void tdax_window_add(struct tdax_window *w, uint64_t window_ns, uint64_t now, uint32_t n);
uint64_t tdax_window_sum(const struct tdax_window *w, uint64_t window_ns, uint64_t now);

const char *tdax_range_state_name(uint32_t s);

/* Are writes to a range in this state copied into the device? From the end
 * of its upgrade until its downgrade has checkpointed its records. */
static inline bool tdax_range_logged(uint32_t s)
{
	return s == TDAX_R_UPGRADED || s == TDAX_R_TO_DOWNGRADE || s == TDAX_R_DOWNGRADING;
}

enum tdax_decision { TDAX_KEEP = 0, TDAX_UPGRADE, TDAX_DOWNGRADE };

/* A write touched pages [first, first + n) of this range at now. */
void tdax_track_write(struct tdax_range_track *r, const struct tdax_tunables *t, uint64_t now,
		      uint64_t first_page, uint64_t npages);

/*
 * tdax_track_write in two steps, for a writer that adds its counts later
 * (the runtime's batches, preload/tracking.c): fresh tells how many pages
 * of a write are newly dirty since the range's last sync (and moves the
 * range's last page on); count adds npages written at now, fresh of them
 * newly dirty.
 */
uint32_t tdax_track_fresh(struct tdax_range_track *r, uint64_t first_page, uint64_t npages);
void tdax_track_count(struct tdax_range_track *r, const struct tdax_tunables *t, uint64_t now,
		      uint32_t npages, uint32_t fresh);

/*
 * Adaptive thresholds (policy "adaptive"; thesis section 7.1: "if a stream
 * of writes is detected ... thresholds could be lowered", "if the hybrid
 * SSD's DRAM is nearly full, it may make sense to raise thresholds").
 * out = the tunables range r is decided on at now:
 *  - a steady synced stream -- more than TDAX_TRACK_STEADY stream syncs
 *    that found the range dirty within the writeback window -- has U and D
 *    scaled by STEADY / syncs: at a PostgreSQL WAL's ~2,900 syncs a second
 *    M = 9 upgrades, where the thesis waited for M = 60 until a bulk write
 *    that began the segment had decayed (290 syncs). Both scale alike, so
 *    the gap between upgrade and downgrade keeps its proportion; when the
 *    stream slows, they come back, and the range is downgraded on its M;
 *  - past TDAX_TRACK_FILL_FROM % of the log in use, U rises toward 100,
 *    reached at TDAX_TRACK_FILL_FULL % (the write-back's high watermark):
 *    fewer upgrades as the device fills; D stays (pressure downgrades).
 * F and the windows stay: a steady stream has more than F writes anyway.
 */
#define TDAX_TRACK_STEADY 8
#define TDAX_TRACK_FILL_FROM 50
#define TDAX_TRACK_FILL_FULL 90
void tdax_track_adapt(const struct tdax_range_track *r, const struct tdax_tunables *t, uint64_t now,
		      uint32_t fill_pct, struct tdax_tunables *out);

/*
 * Reactivity (thesis section 7.3), of a job just done on r at now: for an
 * upgrade, the time since the first sync of the stream that earned it (0
 * if none was seen: a carried or inherited upgrade); for a downgrade, the
 * time since the range's last stream sync.
 */
uint64_t tdax_track_reaction(struct tdax_range_track *r, enum tdax_decision job, uint64_t now);

/*
 * Upgrade-ahead (policy "adaptive", beyond the thesis). Under the thesis
 * policy an append stream starts every new range on the kernel path: F
 * writes and a few real syncs before the range is upgraded (a log's tail
 * pays it every 2^G pages; thesis section 6.3 on small ranges). So an
 * append (a write at the file's end) that reaches the carry page of an
 * upgraded range (tdax_track_carry_page: the start of its last quarter)
 * carries the range's state into the next one, `next`: its counts (its metric is the
 * stream's, and it is not idle until they decay without writes) and an
 * upgrade, marked for a job. True if `next` was marked.
 */
bool tdax_track_carry(const struct tdax_range_track *from, struct tdax_range_track *next,
		      const struct tdax_tunables *t, uint64_t now);

/*
 * Heirs (beyond the thesis). A file made anew at the name of one just
 * removed -- SQLite's rollback journal, SQLite's default, is created,
 * written, synced twice and unlinked in every transaction -- starts on the
 * kernel path with empty counts every time: it never reaches F writes and
 * its syncs stay real. So the removed file's first range leaves what the
 * policy knew of it (bequeath: its counts at now and whether it was
 * logged or marked to be), and the new file's first range takes it up
 * (inherit, into a range nothing has touched): the counts, and the
 * upgrade -- at once, since a new empty file has nothing a job would move.
 * True if `r` was upgraded.
 */
struct tdax_track_legacy {
	uint32_t writes, writebacks, syncs;
	bool upgraded;
};
void tdax_track_bequeath(const struct tdax_range_track *r, const struct tdax_tunables *t, uint64_t now,
			 struct tdax_track_legacy *out);
bool tdax_track_inherit(struct tdax_range_track *r, const struct tdax_track_legacy *l,
			const struct tdax_tunables *t, uint64_t now);

static inline uint64_t tdax_track_carry_page(uint32_t gran_order)
{
	uint64_t pages = (uint64_t)1 << gran_order;
	return pages - (pages / 4 ? pages / 4 : 1);
}

/*
 * A sync wrote the range's dirty pages back at now; stream: the file's
 * previous sync was within the writeback window. Counts the writebacks and
 * the sync (if stream and the range was dirty), then decides; an upgrade or downgrade decision marks the range
 * (to be carried out by a job) and is returned.
 */
enum tdax_decision tdax_track_sync(struct tdax_range_track *r, const struct tdax_tunables *t,
				   uint64_t now, bool stream);
/* n syncs of the file, the last at now, counted at once (a writer whose
 * syncs the policy hears of later: bypass mode's lightweight ones): the
 * writebacks the range holds (each sync moved its last page back, so
 * tdax_track_fresh counted what each would have written back) and n
 * syncs, then one decision. tdax_track_sync is n = 1. */
enum tdax_decision tdax_track_syncs(struct tdax_range_track *r, const struct tdax_tunables *t,
				    uint64_t now, bool stream, uint32_t n);

/* Re-evaluate without a new event (counts decayed): downgrades only. A
 * logged range whose writes have decayed below F is idle: M counts as 0. */
enum tdax_decision tdax_track_reevaluate(struct tdax_range_track *r, const struct tdax_tunables *t,
					 uint64_t now);

/* M at now, or -1 while write_count < F. */
int tdax_track_metric(const struct tdax_range_track *r, const struct tdax_tunables *t, uint64_t now);

/*
 * An explicit mapping (SPEC "Explicit DAX", thesis section 7.2) needs the
 * range logged now, whatever its metric: a range not logged, or marked for
 * an upgrade or a downgrade, is upgraded at once (an upgrade moves nothing:
 * the page cache holds the file). True if the range is logged; false while
 * a job runs (a downgrade checkpointing it, an upgrade about to end): ask
 * again. The runtime keeps a pinned range out of re-evaluation and
 * pressure (preload/tracking.c).
 */
bool tdax_track_pin(struct tdax_range_track *r);

/* Take back an upgrade decided but not begun (TO_UPGRADE -> NONE): the
 * device has no room for it (the runtime's reserve for explicit mappings).
 * True if it was taken back. */
bool tdax_track_unmark(struct tdax_range_track *r);

/* Mark an upgraded range for downgrade (device pressure). */
bool tdax_track_force_downgrade(struct tdax_range_track *r);

/*
 * Jobs. job_begin claims a marked range (TO_UPGRADE -> UPGRADING or
 * TO_DOWNGRADE -> DOWNGRADING) and returns which job to run, or KEEP if
 * there is none or another worker took it; job_end completes it, or on
 * failure rolls the state back so that the job is retried.
 */
enum tdax_decision tdax_track_job_begin(struct tdax_range_track *r);
void tdax_track_job_end(struct tdax_range_track *r, enum tdax_decision job, bool ok);

/* Is a job marked or running? (Cheap: read before taking a job's lock.) */
bool tdax_track_job_pending(const struct tdax_range_track *r);

/*
 * A job left running by a worker that died (SIGKILL, or an exit while its
 * write-back thread was in the job) goes back to be run again: UPGRADING ->
 * TO_UPGRADE, DOWNGRADING -> TO_DOWNGRADE. Only for the holder of the
 * range's job lock, which a live worker keeps for the whole job.
 */
void tdax_track_job_reclaim(struct tdax_range_track *r);

#endif
