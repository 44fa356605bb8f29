/*
 * ranges -- the table of tracked file ranges in the device: one entry per
 * (file, range number) that has seen a write, holding the policy's
 * counters and state (track.h), shared by every process. Open addressing
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
#include "policy/track.h"

struct tdax_range {
	_Atomic uint64_t key;  /* (file index + 1) << 32 | range number; 0 = free */
	_Atomic uint32_t fgen; /* generation of the file entry it belongs to */
	_Atomic uint32_t job_pid; /* pidlock of the process running its job; 0: none */
	struct tdax_range_track t;
};
_Static_assert(sizeof(struct tdax_range) <= TDAX_RANGE_ENTRY_SIZE, "range entry size");

static inline struct tdax_range *tdax_range_at(const struct tdax_device *dev, uint32_t i)
{
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

/* The entry of range rno of (file, fgen), created if create; NULL if the
 * table is full (or it does not exist and !create). */
struct tdax_range *tdax_ranges_get(struct tdax_device *dev, uint32_t file, uint32_t fgen,
				   uint32_t rno, bool create);

#endif
