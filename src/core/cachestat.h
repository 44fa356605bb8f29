/*
 * cachestat -- the device's table of the files bypass mode holds promoted
 * now, with their block cache's figures (preload/cache.h) and bandwidth:
 * each process's write-back thread publishes its own files there, and
 * clears them when they are demoted; `tdax status` shows them, and every
 * process's selection counts the others' (preload/selection.h: one
 * selection over the device). Runtime state only
 * (nothing of it is read by recovery), and advisory: a slot is written
 * without a lock, a reader may see one half updated; one whose process is
 * gone, or that has not been updated for a while, is nobody's.
 */
#ifndef TDAX_CACHESTAT_H
#define TDAX_CACHESTAT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/device.h"
#include "core/layout.h"

/* What a slot says of one promoted file. */
struct tdax_cachestat {
	uint32_t blocks, block_size; /* its blocks in the cache, their size */
	uint64_t hits, misses;       /* blocks its reads and writes found cached, or not */
	uint64_t read, write, append; /* bytes a second over the selection's window:
				       * read, written in place, appended */
};

struct tdax_cachestat_slot {
	_Atomic uint32_t pid; /* the process that promoted it; 0: free */
	uint32_t file, gen;   /* its entry */
	uint32_t blocks, block_size;
	uint32_t read, write, append; /* units of 64 bytes a second */
	uint64_t hits, misses;
	_Atomic uint64_t updated_ns; /* coarse clock of the last update */
	uint8_t pad[8];       /* (to a cache line) */
};
_Static_assert(sizeof(struct tdax_cachestat_slot) == TDAX_CACHELINE, "a slot is a cache line");

#define TDAX_CACHESTAT_SLOTS ((TDAX_DIRS_OFF - TDAX_CACHESTAT_OFF) / TDAX_CACHELINE)
/* A slot not updated for this long is nobody's (its writer publishes
 * every TDAX_CACHESTAT_EVERY_NS). */
#define TDAX_CACHESTAT_EVERY_NS (100 * 1000000ull)
#define TDAX_CACHESTAT_STALE_NS (2000 * 1000000ull)

/* Process pid's figures of file (entry file, gen), into its slot or a free
 * or stale one; nothing if every slot is another's. */
void tdax_cachestat_put(struct tdax_device *dev, uint32_t pid, uint32_t file, uint32_t gen,
			const struct tdax_cachestat *v);
/* Process pid's slots of the files keep() does not keep are freed. */
void tdax_cachestat_sweep(struct tdax_device *dev, uint32_t pid, bool (*keep)(uint32_t file));
/* The figures of (file, gen), promoted by a live process that updated them
 * lately: true and *v, *pid. */
bool tdax_cachestat_get(const struct tdax_device *dev, uint32_t file, uint32_t gen, struct tdax_cachestat *v,
			uint32_t *pid);
/* The figures of the files live processes other than pid promoted and
 * updated lately, up to max of them into v: how many. */
uint32_t tdax_cachestat_others(const struct tdax_device *dev, uint32_t pid, struct tdax_cachestat *v,
			       uint32_t max);

#endif
