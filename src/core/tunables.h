/*
 * tunables -- the policy's tunables as the device stores them: the set,
 * its defaults and bounds, and its validation. Core owns them (control.c
 * keeps them in the region and defines tdax_tunables_check); the policy
 * (policy/track.h) reads them.
 */
#ifndef TDAX_TUNABLES_H
#define TDAX_TUNABLES_H

#include <stdint.h>

#define TDAX_MAX_GRAN_ORDER 20               /* ranges of at most 2^20 pages */
#define TDAX_MAX_WINDOW_NS 86400000000000ull /* windows of at most a day */

#define TDAX_MAX_BYPASS_BLOCK 65536u

/* The tunables (shared by all processes through the device). */
struct tdax_tunables {
	uint32_t upgrade_pct;     /* U, 0..100 */
	uint32_t downgrade_pct;   /* D, 0..U */
	uint32_t write_threshold; /* F */
	uint32_t gran_order;      /* G for new files, 0..20 */
	uint64_t wb_window_ns;    /* the writeback decay */
	uint64_t wr_window_ns;    /* the write decay */
	/* Bypass mode's (preload/selection.h, preload/cache.h): the share of
	 * the log given to it, 1..100; its blocks' size, a power of two of
	 * 512..64 KiB; the bandwidth floor, bytes a second; the profiles'
	 * window. */
	uint32_t bypass_share_pct;
	uint32_t bypass_block;
	uint64_t bypass_floor;
	uint64_t bypass_window_ns;
};

/* Defaults: thesis U/D/F/G, windows chosen in docs/policy.md; bypass mode's
 * share, block and window of docs/durability.md. */
#define TDAX_DEFAULT_TUNABLES \
	{ 60, 30, 5, 9, 1000000000ull, 1500000000ull, 50, 4096, 0, 1000000000ull }
#define TDAX_TUNABLES_N 10

/* Validate tunables: NULL if fine, else what is wrong. Tunables read from
 * the device go through it too (control.h): the region is not trusted. */
const char *tdax_tunables_check(const struct tdax_tunables *t);

#endif
