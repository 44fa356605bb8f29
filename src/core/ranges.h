/*
 * ranges -- the table of tracked file ranges in the device: one entry per
 * (file, range number) that has seen a write, holding the policy's
 * counters and state (struct tdax_range_track, decided on by
 * policy/track.h), shared by every process. Open addressing
 * with lock-free insertion; entries of files whose table entry was reused
 * start over.
 */
#ifndef TDAX_RANGES_H
#define TDAX_RANGES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/device.h"
#include "core/layout.h"

#define TDAX_WIN_BUCKETS 8

/* A sliding-window count: bucket = (bucket number << 32) | count. */
struct tdax_window {
	_Atomic uint64_t b[TDAX_WIN_BUCKETS];
};

/* The range states (the thesis' marks). */
enum tdax_range_state {
	TDAX_R_NONE = 0,
	TDAX_R_TO_UPGRADE,
	TDAX_R_UPGRADING,
	TDAX_R_UPGRADED,
	TDAX_R_TO_DOWNGRADE,
	TDAX_R_DOWNGRADING,
};

/* The policy's counters and state of one range (policy/track.h decides on
 * them); lives in the range entry. */
struct tdax_range_track {
	_Atomic uint32_t state;       /* enum tdax_range_state */
	_Atomic uint32_t dirty;       /* pages written since the file's last sync */
	_Atomic uint32_t last_page;   /* last page written (repeat writes to it are one dirty page) */
	_Atomic uint32_t transitions; /* upgrade and downgrade decisions taken */
	struct tdax_window wr;        /* write_count */
	struct tdax_window wb;        /* writeback_count */
	struct tdax_window sy;        /* stream syncs that found the range dirty (sync_count) */
	_Atomic uint64_t stream_ns;   /* first sync of its stream while not logged; 0: none */
	_Atomic uint64_t synced_ns;   /* its last stream sync */
};

struct tdax_range {
	_Atomic uint64_t key;  /* (file index + 1) << 32 | range number; 0 = free */
	_Atomic uint32_t fgen; /* generation of the file entry it belongs to */
	_Atomic uint32_t job_pid; /* pidlock of the process running its job; 0: none */
	struct tdax_range_track t;
	/* pidlock of a process with an explicit mapping of the range
	 * (preload/explicit.h): while it lives the range stays logged. 0: none
	 * (a device made before explicit mappings has 0 here). */
	_Atomic uint32_t pin_pid;
};
_Static_assert(sizeof(struct tdax_range) <= TDAX_RANGE_ENTRY_SIZE, "range entry size");

/* i < max_ranges: a slot read from the region is checked before. */
static inline struct tdax_range *tdax_range_at(const struct tdax_device *dev, uint32_t i)
{
	TDAX_ASSERT(i < dev->sb->max_ranges);
	return (struct tdax_range *)(dev->base + dev->sb->ranges_off +
				     (uint64_t)i * TDAX_RANGE_ENTRY_SIZE);
}

static inline uint32_t tdax_range_file(const struct tdax_range *r)
{
	return (uint32_t)(atomic_load(&r->key) >> 32) - 1;
}

static inline uint32_t tdax_range_number(const struct tdax_range *r)
{
	return (uint32_t)atomic_load(&r->key);
}

/* Format the range table of a new region (core/format.c): every entry
 * free. Persistent on return. */
void tdax_ranges_format(struct tdax_device *dev);

/* The entry of range rno of (file, fgen), created if create; NULL if the
 * table is full (or it does not exist and !create). */
struct tdax_range *tdax_ranges_get(struct tdax_device *dev, uint32_t file, uint32_t fgen,
				   uint32_t rno, bool create);

/* This process's pin of r (preload/explicit.c's mappings, tdax pin): taken
 * unless a live process holds one (whose pin then keeps the range), and
 * let go if it is this process's. */
void tdax_ranges_pin(struct tdax_range *r);
void tdax_ranges_unpin(struct tdax_range *r);

/* The file's granularity order G (its ranges are 2^G pages): fixed when
 * it is first tracked, from the tunables' at that time. */
struct tdax_file_rt;
struct tdax_tunables;
uint32_t tdax_ranges_gran(struct tdax_file_rt *rt, const struct tdax_tunables *t);

#endif
