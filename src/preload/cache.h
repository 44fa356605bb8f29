/*
 * cache -- bypass mode's block cache (issue #20; the Transparent DAX
 * Mappings paper's §5): device blocks that hold the latest bytes of the
 * files this process promoted (promoted.h), so that their reads are served
 * from device memory and a demotion writes those bytes into the file.
 *
 * What is durable is not the cache's business: every write of a promoted
 * file is a log record first (persisted before the write returns, replayed
 * after a power cut, written in after the process's death), then a copy
 * into its blocks. So a block needs no flush, and nothing of the cache is
 * read by recovery; its arenas (log segments it claims, log.h) are wiped
 * when the log reclaims them.
 *
 * The blocks (bypass_block bytes, 4 KiB by default, a tunable read when
 * the cache is set up: state.h's tdax_bypass_tunables) come from arenas
 * the write-back thread claims from the log, up to the process's share of
 * the device: its files' part of bypass_share_pct of the log, which the
 * selection sets (selection.h) and the thread follows at run time. A block holds bytes
 * [0, hi) of its place in the file, and the file has no bytes of its own
 * past hi there. A write takes a block (write-allocate), filled from the
 * file first if the file had bytes there the write does not cover; it
 * stays until it is evicted or its file demoted. A read of a block that is
 * not cached is the kernel's: every byte not in a block is in the file (an
 * evicted block is written into it first; a write that finds no free block
 * puts its bytes into the file at once).
 *
 * The write-back thread keeps a pool of free blocks above a watermark, so
 * that a write never waits for a write-back: while blocks are wanted (the
 * process's first sync of a file it could promote, a promotion, or a write
 * that found none, since the arenas last went back) it claims arenas while
 * the share has room, then evicts by S3-FIFO (policy/s3fifo.h), writing dirty
 * victims into their files first (promoted.c drives an eviction: it holds
 * the files' locks). A write that finds the pool empty puts its bytes into
 * the file, never waits for a block (on a kernel without RWF_NOAPPEND,
 * only for a write of the thread's into the same file that is under way:
 * the two share the open file's O_APPEND, which each lifts around its
 * write).
 *
 * Locking: a file's blocks -- its map, their bytes and lengths -- are read
 * and written under the file's lock (promoted.h); the pool is lock-free (a
 * signal handler's write may take a block too); the queues and the arenas
 * are the write-back thread's alone, and only it puts blocks back in the
 * pool. A demotion drops a file's blocks at its lock's last release, so
 * that a write a signal handler interrupted never copies into a block
 * another file has by then.
 */
#ifndef TDAX_CACHE_H
#define TDAX_CACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "core/device.h"

/* Blocks of one file the map covers (a file's map is address space,
 * touched as used): with 4 KiB blocks, its first 16 GiB; bytes past them
 * go into the file at once. */
#define TDAX_CACHE_MAP_BLOCKS (1u << 22)

/* A file's part of the cache, under the file's lock. */
struct tdax_cached {
	uint32_t idx;             /* the file's entry */
	_Atomic uint32_t *map;    /* block + 1 by block number (0: none) */
	uint64_t ksize;           /* the file's size in the kernel */
	uint64_t lo, hi;          /* block numbers that may be mapped: [lo, hi) */
	uint64_t flo, fhi;        /* those of a checkpoint's flush */
	uint32_t blocks;          /* blocks it has */
	bool drop;                /* demoted: drop them at the lock's last release */
	_Atomic uint32_t evicting; /* evictions and checkpoint flushes of its blocks writing into the file */
	uint64_t hits, misses;    /* blocks its reads and writes found cached, or not */
	uint64_t hits_counted, misses_counted; /* of them, in the process's counters */
};

/* Set up at attach (bypass mode): the block size and the share. Arenas are
 * claimed by the write-back thread's passes (tdax_cache_serve) once blocks
 * are wanted; a process that syncs no file it could promote claims none.
 * False if it cannot be. */
bool tdax_cache_init(struct tdax_device *dev);

/* The bytes of device memory this process's cache may hold: its files'
 * part of the share (selection.h), followed at the write-back thread's
 * next pass. */
void tdax_cache_set_share(uint64_t bytes);

/* A sync of a file that may be promoted went well: the first has the
 * write-back thread claim the pool, so that a promotion finds blocks. */
void tdax_cache_prepare(void);

/* File idx is being promoted (c locked): its map, mapped once; ksize, its
 * size in the kernel. False if the map cannot be had, or no block is free
 * yet (the write-back thread is woken to claim some: a later sync
 * promotes it). */
bool tdax_cache_promote(struct tdax_cached *c, uint32_t idx, uint64_t ksize);

/* Promoted file c (locked) has its record of len bytes of iov at offset
 * at: put them in its blocks. A block that cannot be had (no free one,
 * past the map) gets its bytes in the file through fd at once. 0, or -1
 * with errno if such a write into the file failed. */
int tdax_cache_write(struct tdax_cached *c, int fd, uint64_t at, const struct iovec *iov, int n, size_t len);

/* A read of [at, at + len) of c (locked; within tdax's size) into
 * iov[0..n): true, and the bytes copied, if every block of it is cached;
 * false and nothing done otherwise -- the caller then reads the kernel's
 * copy (zeros past its end) and lays the cached blocks over it. */
bool tdax_cache_read(struct tdax_cached *c, uint64_t at, const struct iovec *iov, int n, size_t len);
void tdax_cache_overlay(struct tdax_cached *c, uint64_t at, const struct iovec *iov, int n, size_t len);

/* A demotion of c (locked): every dirty block written into the file through
 * fd (O_APPEND lifted), in file order, once the evictions of its blocks in
 * flight are done; c->drop set. 0, or -1 with errno. */
int tdax_cache_write_back(struct tdax_cached *c, int fd);

/* A checkpoint of c without a demotion (the write-back thread's, at the
 * write-back age): begin (c locked) marks its dirty blocks; write (c not
 * locked: a write meanwhile goes on, a demotion waits) puts the marked ones
 * into the file through fd; end (c locked) makes clean those not written to
 * since, if they were written in. write: 0, or -1 with errno. */
void tdax_cache_flush_begin(struct tdax_cached *c);
int tdax_cache_flush_write(struct tdax_cached *c, int fd);
void tdax_cache_flush_end(struct tdax_cached *c, bool written);

/* c's (locked) hits and misses since the last call into the process's
 * counters (cache_hits, cache_misses): at each publication of its figures
 * (selection.c) and when its blocks are dropped. */
void tdax_cache_count(struct tdax_cached *c);

/* Every block of c (locked) goes: at the lock's last release after a
 * demotion; the blocks are the pool's again at the next pass. */
void tdax_cache_drop(struct tdax_cached *c);

/* The write-back thread's pass: follow the share (the tunables: tdax set),
 * queue the blocks taken since the last pass, recycle the dropped ones,
 * give back the arenas past a smaller share once their blocks are out of
 * use, claim arenas while the pool is short and the share has room; give
 * them all back once none has been in use for a while. True if the pool is
 * still short of its watermark or blocks past the share are in use: then
 * take victims until there are none. */
bool tdax_cache_serve(void);

/* Eviction, by the write-back thread: victims (the blocks in use past a
 * smaller share, each once a pass; then by S3-FIFO until the pool is at
 * its watermark), each with its
 * file's entry index; then per file, under its lock, begin (which of them
 * are still the file's, their versions), without it write (dirty ones into
 * the file through fd), under it again end (those not written to since
 * go to the pool; the others are queued again). */
struct tdax_cache_victim {
	uint32_t block, file;
	uint32_t ver; /* begin's: the block's writes when it was looked at */
	bool take;    /* begin's: still the file's */
};
uint32_t tdax_cache_victims(struct tdax_cache_victim *v, uint32_t max);
void tdax_cache_evict_begin(struct tdax_cached *c, struct tdax_cache_victim *v, uint32_t n);
int tdax_cache_evict_write(struct tdax_cached *c, const struct tdax_cache_victim *v, uint32_t n, int fd);
void tdax_cache_evict_end(struct tdax_cached *c, struct tdax_cache_victim *v, uint32_t n, bool written);

/* At exit (every file demoted): the arenas go back to the log, and none is
 * claimed again. */
void tdax_cache_release_all(void);

/* In the child of a fork: the parent's arenas and blocks are not the
 * child's; c's (every file's, promoted.c) map is empty. */
void tdax_cache_after_fork_child(void);
void tdax_cache_forget(struct tdax_cached *c);

/* This process's cache. */
struct tdax_cache_usage {
	uint32_t block_size, arenas, blocks, free;
};
void tdax_cache_usage(struct tdax_cache_usage *u);

#endif
