/*
 * layout -- the on-device layout of a tdax region in one place: the layout
 * version, the magic, every fixed offset in the header, every entry size
 * and the geometry a new region gets (as libpmemobj's heap_layout.h). The
 * structures at these places belong to their modules (device.h: super-block
 * and state; stats.h: counters; control.h: tunables; files.h: file entries;
 * ranges.h: range entries; log.h: segments and records; dirs.h:
 * directories), each of which
 * checks with a _Static_assert that it fits its place here.
 *
 * Changing any value here changes the layout: bump TDAX_LAYOUT_VERSION.
 *
 *   0             struct tdax_super: immutable geometry, checksummed
 *   256           struct tdax_state: boot id of last use, clean flag
 *   512           the device-wide sequence counter (own cache line)
 *   576           the registration lock word, the file index's epoch and
 *                 use count, the count of active entries (own cache line)
 *   640           the count of registrations (own cache line: read after
 *                 every write of a file not registered, files.h)
 *   1024          device-wide counters (stats.h)
 *   2048          tunables of the policy (control.h)
 *   2304          promoted files' rates and cache figures: status, selection (cachestat.h)
 *   3072          directories whose syncs the log may answer (dirs.h)
 *   4096          end of the header
 *   files_off     file identity table (files.h), max_files entries, then
 *                 its index by inode (tdax_index_slots(max_files) words)
 *   ranges_off    tracked file ranges (ranges.h), max_ranges entries
 *   segs_off      write log segments (log.h), nsegs * seg_size bytes
 * (files_off, ranges_off and segs_off are in the super-block; a new region
 * has its tables in that order right after the header.)
 */
#ifndef TDAX_LAYOUT_H
#define TDAX_LAYOUT_H

#define TDAX_MAGIC "TDAXREGN"      /* first 8 bytes of the super-block, written last */
#define TDAX_LAYOUT_VERSION 9
#define TDAX_CACHELINE 64

/* The header: fixed offsets from the start of the region. */
#define TDAX_SUPER_OFF 0
#define TDAX_STATE_OFF 256
#define TDAX_SEQ_OFF 512
#define TDAX_REGLOCK_OFF 576
#define TDAX_INDEX_EPOCH_OFF 584 /* in the registration lock's line: the lock's holder writes both */
#define TDAX_INDEX_USED_OFF 592
#define TDAX_FILES_ACTIVE_OFF 600 /* active entries + 1; 0: not known (a region of an older build) */
#define TDAX_REGISTRATIONS_OFF 640
#define TDAX_STATS_OFF 1024
#define TDAX_TUNABLES_OFF 2048
#define TDAX_CACHESTAT_OFF 2304
#define TDAX_DIRS_OFF 3072
#define TDAX_HEADER_SIZE 4096

/* The tables after the header: entry sizes (the super-block records them
 * and open refuses other values). */
#define TDAX_FILE_ENTRY_SIZE 1024u /* struct tdax_file, files.h */
#define TDAX_RANGE_ENTRY_SIZE 256u /* struct tdax_range, ranges.h */
#define TDAX_SEG_HEADER_SIZE 256u  /* struct tdax_seg at the start of each segment, log.h */
#define TDAX_SEG_SLOTS 12          /* files with records in one segment, log.h */
#define TDAX_REC_MAGIC 0x52584454u /* "TDXR", first word of a record, log.h */
#define TDAX_FILE_PATH_MAX 768     /* path bytes in a file entry, files.h */

/* The file table's index: slots of 8 bytes, a power of two at least
 * twice the table (so that a probe finds a free slot soon). */
static inline uint32_t tdax_index_slots(uint32_t max_files)
{
	uint64_t want = 2 * (uint64_t)max_files; /* (every probe asks: no loop) */
	return want <= 64 ? 64 : (uint32_t)(1ull << (64 - __builtin_clzll(want - 1)));
}

/* The geometry of a new region. */
#define TDAX_DEFAULT_CAPACITY (256ull << 20)
#define TDAX_MIN_CAPACITY (8ull << 20)
#define TDAX_DEFAULT_SEG_SIZE (1u << 20)
#define TDAX_MIN_SEG_SIZE 4096u       /* and segments are multiples of it */
#define TDAX_DEFAULT_MAX_FILES 1024u
#define TDAX_DEFAULT_MAX_RANGES 8192u

#endif
