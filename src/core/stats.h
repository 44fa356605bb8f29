/*
 * stats -- the device-wide counters of the runtime: how many syncs were
 * answered in the device and how many went to the kernel, and why. Each
 * process counts privately (no shared cache line on the hot path) and adds
 * its counts into the device's every write-back interval and at exit.
 */
#ifndef TDAX_STATS_H
#define TDAX_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/device.h"
#include "core/layout.h"

/* Why a write was not logged or a sync went to the kernel. */
enum tdax_fallback {
	TDAX_FB_NONE = 0,
	TDAX_FB_LOG_FULL,      /* no room in the log */
	TDAX_FB_NOT_UPGRADED,  /* the policy keeps the range on the kernel path */
	TDAX_FB_METADATA,      /* create, truncate, fallocate or rename needs the kernel */
	TDAX_FB_UNSEEN_WRITE,  /* the file changed size behind tdax (a writer it did not see) */
	TDAX_FB_MMAP,          /* a shared writable mapping of the file */
	TDAX_FB_STDIO,         /* a stdio stream on the file */
	TDAX_FB_COPY,          /* copy_file_range, sendfile, splice, a clone (FICLONE) or an XFS ioctl (fsioctl.h) */
	TDAX_FB_DIRECT,        /* an O_DIRECT writer */
	TDAX_FB_WB_ERROR,      /* a background sync failed: data kept, error reported */
	TDAX_FB_UNREGISTERED,  /* file table full or path too long */
	TDAX_FB_PASSTHROUGH,   /* a write tdax let through unlogged (unknown pwritev2 flag, syscall(2)) */
	TDAX_FB_ASYNC,         /* asynchronous I/O tdax cannot follow (POSIX aio, the kernel's AIO, io_uring) */
	TDAX_FB_BIG_WRITE,     /* a write of TDAX_BIG_WRITE bytes or more: the block path (dual path) */
	TDAX_FB_COUNT
};

enum tdax_stat {
	TDAX_ST_LIGHT_SYNCS = 0, /* syncs answered with a fence */
	TDAX_ST_REAL_SYNCS,      /* syncs of managed files that went to the kernel */
	TDAX_ST_LOGGED_WRITES,
	TDAX_ST_LOGGED_BYTES,
	TDAX_ST_UNLOGGED_WRITES,
	TDAX_ST_CHECKPOINTS,     /* background / exit / metadata checkpoints */
	TDAX_ST_SYNC_ERRORS,     /* real syncs that failed */
	TDAX_ST_UPGRADES,        /* ranges upgraded (jobs done) */
	TDAX_ST_DOWNGRADES,      /* ranges downgraded (jobs done) */
	TDAX_ST_LOGGED_TRUNCATES, /* truncates kept as records (no sync before them) */
	TDAX_ST_LOGGED_RENAMES,  /* renames of files with records kept as records (no sync) */
	TDAX_ST_LOGGED_CREATES,  /* files created (or emptied) at an open, kept as records (no sync) */
	TDAX_ST_LOGGED_FALLOCATES, /* holes punched and ranges zeroed kept as records (no sync) */
	TDAX_ST_DIR_SYNCS,       /* directory syncs that made a removal durable before records went */
	TDAX_ST_LIGHT_DIR_SYNCS, /* directory syncs of the application answered from the log */
	TDAX_ST_LEASES,          /* write leases taken (syncs then need no look at the file) */
	TDAX_ST_LEASE_BREAKS,    /* leases let go because another open of the file came */
	TDAX_ST_UPGRADE_WAIT_NS, /* sum over upgrades: first sync of the stream to the upgrade */
	TDAX_ST_UPGRADES_TIMED,  /* upgrades in that sum (carried and inherited ones have no stream) */
	TDAX_ST_DOWNGRADE_WAIT_NS, /* sum over downgrades: last stream sync to the downgrade */
	TDAX_ST_DOWNGRADES_TIMED,
	TDAX_ST_PROMOTIONS,      /* files promoted (bypass mode: writes to the device alone) */
	TDAX_ST_DEMOTIONS,       /* promoted files written back and made coherent again */
	TDAX_ST_DEFERRED_WRITES, /* writes of promoted files: to the device, not the kernel */
	/* Demotions by why (they sum to TDAX_ST_DEMOTIONS): */
	TDAX_ST_DEMOTED_SEEN,    /* mapped, copied, closed, dup'ed or handed on in its process */
	TDAX_ST_DEMOTED_OPENED,  /* another open of the file broke its lease */
	TDAX_ST_DEMOTED_WRITEBACK, /* a checkpoint of the write-back */
	TDAX_ST_DEMOTED_FULL,    /* no room in the log for its record */
	TDAX_ST_DEMOTED_KERNEL,  /* a call only the kernel answers: a real sync, truncate, fallocate, ... */
	TDAX_ST_DEMOTED_UNSELECTED, /* the selection dropped it (busier files took its room) */
	TDAX_ST_PERSISTS,        /* tdax_persist calls answered from the log (explicit mappings) */
	TDAX_ST_PERSISTS_REAL,   /* tdax_persist calls that went to the kernel (msync) */
	TDAX_ST_UPGRADES_RESERVED, /* upgrades not taken: the log's reserve for explicit mappings */
	TDAX_ST_FALLBACK0,       /* + enum tdax_fallback */
	/* Sync latency histograms, one sync in TDAX_LAT_EVERY per thread timed:
	 * lightweight syncs' then real ones', each TDAX_LAT_BUCKETS counts
	 * (tdax_lat_bound) and the sum of the nanoseconds timed. */
	TDAX_ST_LAT0 = TDAX_ST_FALLBACK0 + TDAX_FB_COUNT,
	/* Device memory mapped in ahead of use (device.h tdax_device_prefault):
	 * the page faults that took, and the bytes. (After the histograms: a
	 * region made before them has zeros here, and older libraries leave
	 * them alone.) */
	TDAX_ST_MAP_FAULTS = TDAX_ST_LAT0 + 2 * (10 + 1),
	TDAX_ST_MAP_BYTES,
	/* Bypass mode's block cache (preload/cache.h), by block: */
	TDAX_ST_CACHE_HITS,      /* blocks a read or write of a promoted file found cached */
	TDAX_ST_CACHE_MISSES,    /* blocks it did not: read from the kernel, or taken from the pool */
	TDAX_ST_CACHE_FILLS,     /* blocks read in from the kernel before a write to a part of them */
	TDAX_ST_CACHE_EVICTIONS, /* blocks S3-FIFO let go to keep the pool of free blocks */
	TDAX_ST_CACHE_WRITEBACKS, /* dirty blocks written into their file (evicted or demoted) */
	TDAX_ST_CACHE_NOBLOCK,   /* blocks a write found no free block for: into the file at once */
	/* Appends logged where tdax knew the file's end (preload/landing.h),
	 * without reading it back from the kernel. */
	TDAX_ST_KNOWN_LANDINGS,
	TDAX_ST_COUNT
};

#define TDAX_LAT_EVERY 16
#define TDAX_LAT_BUCKETS 10

/* The upper bound (ns, inclusive) of latency bucket i; the last has none. */
static inline uint64_t tdax_lat_bound(int i)
{
	return i < TDAX_LAT_BUCKETS - 1 ? 256ull << (2 * i) : UINT64_MAX; /* 256 ns .. 16.8 ms, x4 */
}

/* The counter of bucket i (TDAX_LAT_BUCKETS: the sum) of light or real syncs. */
static inline enum tdax_stat tdax_lat_stat(bool light, int i)
{
	return (enum tdax_stat)(TDAX_ST_LAT0 + (light ? 0 : TDAX_LAT_BUCKETS + 1) + i);
}

/* The bucket a latency falls in. */
static inline int tdax_lat_bucket(uint64_t ns)
{
	int i = 0;
	while (ns > tdax_lat_bound(i))
		i++;
	return i;
}

static inline _Atomic uint64_t *tdax_stats(const struct tdax_device *dev)
{
	return (_Atomic uint64_t *)(dev->base + TDAX_STATS_OFF);
}

const char *tdax_stat_name(enum tdax_stat s);
const char *tdax_fallback_name(enum tdax_fallback f);

#endif
