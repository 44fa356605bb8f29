/*
 * dirs -- the device's table of directories whose syncs the log may answer
 * (preload/dirsync.c). A slot per directory, found by hashing its file
 * system and inode: directories that share a slot share its count of
 * changes the log does not hold, which only makes their syncs real more
 * often. The slots are runtime state, shared by every process using the
 * device, and forgotten by a replay (recover.c); only `light_seq` is read
 * by recovery.
 */
#ifndef TDAX_DIRS_H
#define TDAX_DIRS_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/device.h"
#include "core/layout.h"

struct tdax_dir_slot {
	/* Odd while a real sync of a directory writes owner and ctime_ns: a
	 * reader trusts them only between two equal, even reads. */
	_Atomic uint32_t seq;
	/* The owner's file system keeps fine-grained change times (a change
	 * after a look at the time gets a later one): the guard below holds. */
	_Atomic uint32_t fine;
	/* The directory whose last real sync set ctime_ns (0, 0: none). */
	_Atomic uint64_t dev, ino;
	/* Changes in this slot's directories the log does not hold, since
	 * the owner's last real sync. */
	_Atomic uint64_t unlogged;
	/* The owner's change time as its last real sync saw it, moved on by
	 * each change the log holds (and nothing else in between): the guard
	 * that sees a change tdax did not (a process without tdax). */
	_Atomic uint64_t ctime_ns;
	uint64_t pad[3];
};
_Static_assert(sizeof(struct tdax_dir_slot) == TDAX_CACHELINE, "a slot is a cache line");

#define TDAX_DIR_SLOTS 15

/* Changes of names a directory sync keeps looked at (two statx each): a
 * workload that changes names far more often than it syncs a directory
 * would pay more for the looks than the light syncs save. */
#define TDAX_DIRSYNC_WATCH 64

struct tdax_dirs {
	/* How many more changes of names are looked at (preload/dirsync.c):
	 * each directory sync sets it to TDAX_DIRSYNC_WATCH, each change
	 * looked at takes one. At 0 or below the watch has lapsed: changes
	 * cost nothing, and the next directory sync is real. */
	_Atomic int32_t watch_left;
	uint32_t pad0;
	/* Sequence number (log.h) at the last directory sync answered from
	 * the log, persisted: a file whose creation is a record older than
	 * it may have been promised by it (recover.c makes such a file again
	 * even if no sync of the file itself was answered). */
	_Atomic uint64_t light_seq;
	uint64_t pad1[6];
	struct tdax_dir_slot slot[TDAX_DIR_SLOTS];
};
_Static_assert(TDAX_DIRS_OFF + sizeof(struct tdax_dirs) <= TDAX_HEADER_SIZE, "dirs fit the header");

static inline struct tdax_dirs *tdax_dirs(const struct tdax_device *dev)
{
	return (struct tdax_dirs *)(dev->base + TDAX_DIRS_OFF);
}

static inline struct tdax_dir_slot *tdax_dir_slot(const struct tdax_device *dev, uint64_t fsdev,
						   uint64_t ino)
{
	uint64_t h = (ino ^ fsdev * 0x9E3779B97F4A7C15ull) * 0xFF51AFD7ED558CCDull;
	return &tdax_dirs(dev)->slot[(h >> 32) % TDAX_DIR_SLOTS];
}

#endif
