/*
 * select -- which files bypass mode promotes: the Transparent DAX Mappings
 * paper's profiling-guided selection (§4.3, with §4.4's separate append
 * bandwidth), as pure code: no I/O, time is passed in, so the runtime
 * (preload/bypass.c) and the simulator (bench/tdaxsim) run the same
 * decisions.
 *
 * Profiling. Per file, over a sliding window (struct tdax_window, the
 * policy's own: an increment is forgotten between (1 - 1/B) and 1 window
 * after it was made): bytes read, bytes written in place, bytes appended,
 * the writes themselves and the syncs. O(1) time and space per call.
 * Bytes are counted in units of 64 (a window bucket holds 2^32 of them).
 *
 * Selection. A file is a candidate if it synced in the window (tdax
 * promotes a file at a sync, and a file that never syncs gains nothing
 * durable from device memory) and its bandwidth -- read + write + append,
 * the paper's prediction of its next window -- is at least the floor.
 * Candidates are ranked by bandwidth and taken greedily, largest first,
 * while their footprints fit the capacity (a file that does not fit is
 * skipped, a smaller one after it may fit). A file's footprint is what it
 * would hold in the device's block cache (preload/cache.h): the blocks its
 * writes in place keep for as long as they live before the write-back
 * takes them (hold_ns), and the blocks its appends need before the cache
 * writes them into the file to make room -- the paper's §4.4 append
 * reservation, a short time of the append bandwidth (append_hold_ns): an
 * appended block is not written again. Reads take no block (the cache
 * allocates at writes). Hysteresis: a promoted file ranks with its bandwidth
 * raised by keep_pct, and stays a candidate down to half the floor, so two
 * files of about the same bandwidth do not take turns.
 *
 * When to select again: the paper's "only upon significant bandwidth
 * changes" -- tdax_select_due compares the total bandwidth of the
 * candidates with the one of the last selection -- and when the promoted
 * files overfill the capacity by more than keep_pct (tdax_select_over).
 */
#ifndef TDAX_SELECT_H
#define TDAX_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ranges.h"

#define TDAX_PROFILE_UNIT_SHIFT 6 /* bytes are counted in units of 64 */

struct tdax_profile {
	struct tdax_window rd, wr, ap; /* units read, written in place, appended */
	struct tdax_window ops;        /* writes and appends */
	struct tdax_window sy;         /* syncs */
};

void tdax_profile_read(struct tdax_profile *p, uint64_t window_ns, uint64_t now, uint64_t bytes);
void tdax_profile_write(struct tdax_profile *p, uint64_t window_ns, uint64_t now, uint64_t bytes,
			bool append);
/* n writes of bytes in all at once (a writer that adds its counts later). */
void tdax_profile_writes(struct tdax_profile *p, uint64_t window_ns, uint64_t now, uint64_t bytes,
			 bool append, uint32_t n);
void tdax_profile_sync(struct tdax_profile *p, uint64_t window_ns, uint64_t now);
/* n syncs at once (a writer that adds its counts later). */
void tdax_profile_syncs(struct tdax_profile *p, uint64_t window_ns, uint64_t now, uint32_t n);

/* A profile over its window at now: bytes per second, writes per second,
 * and the syncs in the window (a count: a window may be longer than a
 * second). */
struct tdax_rates {
	uint64_t read, write, append, ops, syncs;
};
void tdax_profile_rates(const struct tdax_profile *p, uint64_t window_ns, uint64_t now,
			struct tdax_rates *r);

/* The selection's inputs besides the files. */
struct tdax_select_params {
	uint64_t capacity; /* device bytes bypass mode may hold */
	uint64_t floor;    /* bytes per second below which a file is no candidate */
	uint64_t hold_ns;  /* how long a written block lives before the write-back takes it */
	uint64_t append_hold_ns; /* how long an appended one does: the append reservation */
	uint32_t keep_pct; /* a promoted file's bonus in the ranking */
};

#define TDAX_SELECT_KEEP_PCT 25
/* The runtime's append reservation: the appends of this long. The block
 * cache's pool is refilled at every write-back pass (10 ms by default);
 * ten of them leave a writer room to spare. */
#define TDAX_SELECT_APPEND_HOLD_NS (100 * 1000000ull)

/* One file of a selection: its rates and whether it is promoted now (in);
 * its place in the ranking (0: no candidate), its footprint and whether it
 * is selected (out). */
struct tdax_candidate {
	struct tdax_rates rates;
	uint64_t score, footprint;
	bool promoted;
	bool selected;
};

/* The bandwidth a selection ranks a file by: read + write + append. */
uint64_t tdax_select_bandwidth(const struct tdax_rates *r);

/* The total bandwidth of the candidates among c[0..n) (what
 * tdax_select_due compares; tdax_select returns it too). */
uint64_t tdax_select_total(const struct tdax_candidate *c, size_t n, const struct tdax_select_params *p);

/*
 * Select among c[0..n): sets each one's score, footprint and selected.
 * Returns tdax_select_total. order: n indices of scratch space (the
 * ranking), no allocation here.
 */
uint64_t tdax_select(struct tdax_candidate *c, uint32_t *order, size_t n,
		     const struct tdax_select_params *p);

/* Do the promoted files among c[0..n) need more than the capacity now,
 * by more than keep_pct of it? (A selection is then due, whatever the
 * bandwidth did. The margin is the hysteresis: a file taken when it fit
 * is not dropped as soon as its footprint grows past the room, and taken
 * again when it shrinks.) */
bool tdax_select_over(const struct tdax_candidate *c, size_t n, const struct tdax_select_params *p);

/* Is a new selection due? The candidates' total bandwidth moved by more
 * than a quarter since the last one (last: its total). */
bool tdax_select_due(uint64_t last, uint64_t now_total);

#endif
