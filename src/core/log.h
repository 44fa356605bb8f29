/*
 * log -- the write log in the device region.
 *
 * The log is a set of fixed-size segments. A writer (one thread) owns one
 * segment at a time and appends to it alone, so appends take no lock and a
 * record torn by a crash can only be the last of its own segment: it never
 * hides another writer's records. Every record carries a device-wide
 * sequence number, the file it belongs to, its offset and length, the
 * segment's epoch (bumped whenever the segment is reused, so stale records
 * are never read as new ones) and a CRC32C over header and data.
 *
 * A record is live until its file's released_seq (files.h) reaches its
 * sequence number. A segment whose records are all dead is reused: in place
 * by its owner, or by anyone once it has been sealed.
 */
#ifndef TDAX_LOG_H
#define TDAX_LOG_H

#include <linux/falloc.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/device.h"
#include "core/layout.h"

/* What a record asks of its file: WRITE puts its len data bytes at off;
 * TRUNCATE (no data) sets the file's size to off. Replay applies a file's
 * records in sequence order. RENAME changes nothing in the file: its data
 * are the two absolute names the file had and took ("old\0new\0"), the
 * places recovery looks for it besides its entry's path. CREATE says the
 * file existed, empty, at the absolute name its data hold ("path\0"),
 * with the permission bits off: replayed onto the file it empties it, and
 * a file a power cut took away before its name was durable is made anew
 * from it (recover.c). FALLOCATE punches or zeroes a range (its data: a
 * struct tdax_rec_falloc). */
enum {
	TDAX_REC_WRITE = 1, TDAX_REC_TRUNCATE = 2, TDAX_REC_RENAME = 3, TDAX_REC_CREATE = 4,
	TDAX_REC_FALLOCATE = 5,
};

/* The data of a FALLOCATE record: replayed as fallocate(fd, mode, off,
 * len). */
struct tdax_rec_falloc {
	uint64_t len;
	uint32_t mode;
	uint32_t pad;
};

/* The fallocate modes a record may hold: a hole punched, a range zeroed
 * -- idempotent, unlike a collapse or an insert, which replayed twice
 * would move bytes twice. Recovery applies no other. */
static inline bool tdax_falloc_is_record(int mode)
{
	return mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) || mode == FALLOC_FL_ZERO_RANGE ||
	       mode == (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE);
}

struct tdax_rec {
	uint32_t magic;
	uint16_t kind;
	uint16_t reserved;
	uint32_t hcrc;   /* crc32c of this header with hcrc = crc = 0 */
	uint32_t crc;    /* crc32c of this header with hcrc = crc = 0, then the data */
	uint64_t seq;
	uint32_t file;   /* file table index */
	uint32_t fgen;   /* that entry's generation */
	uint64_t off;    /* file offset of the data */
	uint32_t len;    /* data bytes following the header */
	uint32_t epoch;  /* segment epoch when written */
	uint32_t seg;    /* segment index */
	uint32_t pad[3];
};
_Static_assert(sizeof(struct tdax_rec) == TDAX_CACHELINE, "record header is one cache line");

#define TDAX_SEG_FREE 0ull
#define TDAX_SEG_SEALED UINT64_MAX
#define TDAX_SEG_ARENA 1u /* tdax_seg.kind */

struct tdax_seg_slot {
	uint32_t file;
	uint32_t fgen;
	uint64_t max_seq;
};

/*
 * Every field is read from a region others may write: each is bounds-checked
 * where it is read (nslots against TDAX_SEG_SLOTS, tail and written against
 * the segment's room), and the owner appends with its own copies of tail and
 * nslots, taken when it claims the segment (or adopts it: read, then checked).
 */
struct tdax_seg {
	_Atomic uint64_t owner; /* TDAX_SEG_FREE/SEALED, or pid << 32 | tid (0: the process's orphan, log.c) */
	uint32_t epoch;
	uint32_t nslots;
	_Atomic uint64_t tail;  /* bytes of records written after the header */
	struct tdax_seg_slot slot[TDAX_SEG_SLOTS]; /* files with records here */
	uint64_t written;       /* bytes that may hold old records or blocks: wiped at reclaim */
	/* TDAX_SEG_ARENA: a process's block cache has it (no records: no scan
	 * reads it), set before any block is written in it and cleared after
	 * its wipe; 0: the log's. */
	uint32_t kind;
};
_Static_assert(sizeof(struct tdax_seg) <= TDAX_SEG_HEADER_SIZE, "segment header size");

static inline uint32_t tdax_rec_size(uint32_t len)
{
	return (uint32_t)sizeof(struct tdax_rec) + ((len + TDAX_CACHELINE - 1) & ~(TDAX_CACHELINE - 1u));
}

/* i < nsegs: a segment number read from the region is checked before. */
static inline struct tdax_seg *tdax_seg_at(const struct tdax_device *dev, uint32_t i)
{
	TDAX_ASSERT(i < dev->sb->nsegs);
	return (struct tdax_seg *)(dev->base + dev->sb->segs_off + (uint64_t)i * dev->sb->seg_size);
}

/* Format the log of a new region (core/format.c): every segment header
 * zero (free, epoch 0, no records). Only the headers are written: a
 * segment's records count only up to its tail. Persistent on return. */
void tdax_log_format(struct tdax_device *dev);

/* Largest data length one record can carry on this device. */
uint32_t tdax_log_max_len(const struct tdax_device *dev);

/*
 * Append len bytes destined for (file, fgen) at off, and make the record
 * persistent before returning. Returns 0 and the record's sequence number,
 * -ENOSPC when no segment has room (the caller falls back to a real sync),
 * -EFBIG when len is larger than one record can carry.
 */
int tdax_log_append(struct tdax_device *dev, uint32_t file, uint32_t fgen, uint64_t off,
		    const void *data, uint32_t len, uint64_t *seq);

/* Append a truncate of (file, fgen) to size, persistent on return; returns
 * as tdax_log_append. */
int tdax_log_truncate(struct tdax_device *dev, uint32_t file, uint32_t fgen, uint64_t size,
		      uint64_t *seq);

/* Append a rename of (file, fgen) from path `from` to `to` (absolute, each
 * shorter than TDAX_FILE_PATH_MAX), persistent on return; returns as
 * tdax_log_append (-EINVAL for a path too long). */
int tdax_log_rename(struct tdax_device *dev, uint32_t file, uint32_t fgen, const char *from,
		    const char *to, uint64_t *seq);

/* Append the creation of (file, fgen): empty, at absolute path (shorter
 * than TDAX_FILE_PATH_MAX), permission bits mode; persistent on return,
 * returns as tdax_log_rename. */
int tdax_log_create(struct tdax_device *dev, uint32_t file, uint32_t fgen, const char *path,
		    uint32_t mode, uint64_t *seq);

/* Append a fallocate(mode, off, len) of (file, fgen), persistent on
 * return; returns as tdax_log_append. */
int tdax_log_fallocate(struct tdax_device *dev, uint32_t file, uint32_t fgen, int mode, uint64_t off,
		       uint64_t len, uint64_t *seq);

/* The name a CREATE record holds, checked to be NUL-terminated within its
 * data; NULL if it is not. */
const char *tdax_rec_create_path(const struct tdax_rec *r, const char *data);

/* The names a RENAME record holds, checked to be two NUL-terminated paths
 * within its data; false if they are not. */
bool tdax_rec_rename_paths(const struct tdax_rec *r, const char *data, const char **from,
			   const char **to);

/* Records of (file, fgen) up to seq are in the file on flash: free them,
 * and reclaim the segments left dead now or, if this process scanned in
 * the last 10 ms, at the next tdax_log_reclaim_due (log.c). */
void tdax_log_release(struct tdax_device *dev, uint32_t file, uint32_t fgen, uint64_t seq);
/* The reclaim releases left due since the last scan, if any. */
void tdax_log_reclaim_due(struct tdax_device *dev);

/* Seal the current thread's segment and the orphans of the process's
 * exited threads (log.c; at exit, before closing the device; tests). */
void tdax_log_seal_mine(struct tdax_device *dev);

/*
 * The room of a segment this process claims is mapped in ahead of its
 * writer (no page fault on an append's path): by the writer itself, 64 KiB
 * ahead of its tail, unless the process's write-back thread got there
 * first: map_claimed maps in the rest of the segments claimed since its
 * last call (that thread's work, each pass), and after_fork forgets what
 * the parent had mapped (a child's page tables start empty).
 */
void tdax_log_map_claimed(const struct tdax_device *dev);
void tdax_log_after_fork(const struct tdax_device *dev);

/* Seal segments whose owning thread is gone; returns how many. */
unsigned tdax_log_seal_dead(struct tdax_device *dev);

/* Reuse every sealed segment whose records are all dead. */
void tdax_log_reclaim(struct tdax_device *dev);

/*
 * Block arenas (bypass mode's block cache, preload/cache.h): a free segment
 * taken by the calling thread (its owner, as a writer's: when the thread is
 * gone the segment is sealed and reclaimed) to hold blocks of files, not
 * records. It says so in its header, persistently, before it is returned:
 * no scan ever reads its bytes as records, whatever they hold. Its blocks
 * are the room after the header's first `block` bytes. Returns the
 * segment's index, or -1 if no segment is free.
 */
int64_t tdax_log_claim_arena(struct tdax_device *dev);
/* The arena goes back to the log: sealed, its first `used` bytes (after
 * the header) wiped when it is reclaimed. */
void tdax_log_release_arena(struct tdax_device *dev, uint32_t seg, uint64_t used);

/* A live owner of some segment (pid), or 0 if no process is writing. */
uint32_t tdax_log_live_owner(const struct tdax_device *dev);

struct tdax_log_usage {
	uint64_t capacity;   /* bytes of all segments */
	uint64_t used;       /* bytes not available to new records */
	uint32_t segs_free, segs_owned, segs_sealed;
	uint32_t segs_arena; /* of the owned ones: block arenas */
};
void tdax_log_usage(const struct tdax_device *dev, struct tdax_log_usage *u);

/* Is this record live (its file entry valid and not released past it)? */
bool tdax_rec_live(const struct tdax_device *dev, const struct tdax_rec *r);

/*
 * Walk every record in every segment. fn is called for each valid record
 * (data follows the header); damaged records and torn tails are counted and
 * reported through bad (which may be NULL). A non-zero return from fn stops
 * the walk and is returned.
 */
enum tdax_rec_damage { TDAX_REC_CORRUPT = 1, TDAX_REC_TORN = 2 };
struct tdax_scan_cb {
	int (*rec)(void *ctx, const struct tdax_rec *r);
	void (*bad)(void *ctx, uint32_t seg, uint64_t pos, enum tdax_rec_damage what,
		    const struct tdax_rec *hdr_if_readable);
	void *ctx;
	/* The device's memory is exactly what its writers left (the same
	 * boot, no power failure declared): a free segment holds no live
	 * record and each other one's tail is where its last whole record
	 * ends, so only [0, tail) of the segments in use is read -- not the
	 * whole log, faulting in every page of it. Otherwise (false) every
	 * segment is read to its end: after a power cut a tail, or the owner
	 * word, may not have reached the device when the records did. */
	bool exact;
};
int tdax_log_scan(struct tdax_device *dev, const struct tdax_scan_cb *cb);

#endif
