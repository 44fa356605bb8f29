/*
 * promoted -- the files bypass mode (bypass.h) promoted in this process:
 * their state, their lock and their demotion, for every part of tdax that
 * must see a promoted file's bytes in the kernel first (the hooks that
 * read or hand a file on, checkpoints, lease breaks, fork, exit).
 *
 * The device holds the promoted file's bytes as log records (what is
 * durable) and in its blocks of the block cache (cache.h: what the file
 * lacks). Reads, lseek and fstat through its own descriptor are served
 * from the blocks, and from the kernel's copy where no block is (below);
 * the write-back's checkpoint writes its dirty blocks in and keeps it
 * promoted; everything else that could see the kernel's copy demotes it
 * first, in this process (mmap, close, dup, fcntl, a read with flags,
 * sendfile/splice/copy_file_range, fork, exec, sending it over a socket,
 * truncate, fallocate, unlink, rename, exit) and in any other (their open
 * breaks the write lease: the write-back thread demotes, then lets it go).
 *
 * Which files: in bypass mode every managed descriptor of a registered
 * file takes this mode's entries; a file is promoted after a sync that
 * left every change of it logged or on flash (a lightweight sync of a
 * file the policy logs, or any real one) while the selection takes it
 * (selection.h: the files with most bandwidth that fit the device's
 * share) and this process holds a write lease on its only open file and
 * no other descriptor of it; otherwise its calls are coherent mode's.
 *
 * Order: a per-file lock of this process (recursive: a signal handler may
 * write while its thread is inside) is held around each write, around
 * promotion and demotion, and around the look of a sync; a real sync
 * (coherent mode's, or a checkpoint of the write-back thread) runs outside
 * it, counted, and no file is promoted while one runs. So no checkpoint
 * ever releases a record whose bytes the file does not have yet.
 *
 * Death: the entry's rt.deferred names the process (pid) whose records the
 * file may lack. The next process to attach to the device, or `tdax
 * recover`, writes the records of a dead one's file into it (recover.c).
 */
#ifndef TDAX_PROMOTED_H
#define TDAX_PROMOTED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "core/stats.h"
#include "policy/select.h"
#include "preload/cache.h"
#include "preload/fdtable.h"

/* A file of this process, by entry index: its lock (recursive: a signal
 * handler may call in while its thread is inside), and while promoted its
 * descriptor, position and size, which are tdax's until demotion, and its
 * blocks (demotion writes the dirty ones in). */
struct tdax_promoted {
	_Atomic uint64_t owner; /* the lock: the holding thread's id, 0 free */
	uint32_t depth;         /* the holder's nesting */
	uint32_t syncs;         /* real syncs running outside the lock: no promotion */
	int fd;                 /* promoted: the application's descriptor; -1: not */
	uint32_t gen;           /* promoted: the entry's generation */
	uint32_t epoch;         /* moves at each demotion */
	bool append;            /* the open file has O_APPEND */
	bool readable;          /* and was opened for reading */
	_Atomic uint64_t pos;   /* promoted: the open file's position */
	_Atomic uint64_t size;  /* promoted: the file's size */
	struct tdax_cached cached; /* its blocks */
	/* Which files may be promoted (selection.h): */
	struct tdax_profile prof;      /* what this process does with the file */
	_Atomic uint64_t profiled_ns;  /* its last call profiled */
	_Atomic bool selected;         /* the last selection took it */
	uint64_t refused_bw;           /* its bandwidth when it was last not taken (locked) */
	uint64_t pend_wr, pend_ap;     /* writes and syncs not in the profile yet (locked) */
	uint32_t pend_n, pend_ap_n, pend_sy;
	/* Lightweight syncs the policy has not heard of yet (locked;
	 * tracking.h's tdax_tracking_sync_later): how many, the first's and
	 * the last's time. */
	uint32_t light_n;
	uint64_t light_first_ns, light_last_ns;
};

/* This process's files, by entry index: nfiles of them (0 before init). */
uint32_t tdax_promoted_count(void);
struct tdax_promoted *tdax_promoted_at(uint32_t idx);

/* The file of a managed descriptor's entry, or NULL (no entry yet, or
 * not bypass mode). */
struct tdax_promoted *tdax_promoted_of(const struct tdax_fd *e);
void tdax_promoted_lock(struct tdax_promoted *b);
void tdax_promoted_unlock(struct tdax_promoted *b);

/* Demote b (locked, promoted; idx its entry) for a reason (one of the
 * TDAX_ST_DEMOTED_* counters): its dirty blocks are written into the file
 * through fd_here (a number of this thread's table for the same open file;
 * -1: the application's, reached), its position put back; the blocks go
 * at the lock's last release. A failure keeps the records (rt.rewrite) and
 * is the next sync's error. */
int tdax_promoted_demote(struct tdax_promoted *b, uint32_t idx, int fd_here, enum tdax_stat why);

/* b (locked; idx its entry): the policy hears of its lightweight syncs
 * (tdax_tracking_synced). At a demotion, by the write-back thread
 * every TDAX_CACHESTAT_EVERY_NS, and every TDAX_LIGHT_SYNCS_MAX syncs. */
void tdax_promoted_catch_up(struct tdax_promoted *b, uint32_t idx);
#define TDAX_LIGHT_SYNCS_MAX (1u << 20)

/* A fork is under way: nothing may be promoted. */
bool tdax_promoted_frozen(void);

/* This process's start time, for an entry's rt.deferred_since. */
uint64_t tdax_promoted_since(void);

/* Set up at attach (bypass mode only); false if it could not be. */
bool tdax_promoted_init(uint32_t max_files);

/* Before anything that could see the kernel's copy of the file open as
 * fd (a read, a stat, ...): demote it if it is promoted. */
void tdax_promoted_demote_fd_slow(int fd);
static inline void tdax_promoted_settle_fd(int fd)
{
	if (__builtin_expect(atomic_load_explicit(&tdax_fds_promoted, memory_order_relaxed) != 0, 0))
		tdax_promoted_demote_fd_slow(fd);
}

/* The same for the file a path names (stat, unlink, rename, truncate);
 * AT_SYMLINK_NOFOLLOW in flags as fstatat takes it. */
void tdax_promoted_demote_at_slow(int dirfd, const char *path, int flags);
static inline void tdax_promoted_settle_at(int dirfd, const char *path, int flags)
{
	if (__builtin_expect(atomic_load_explicit(&tdax_fds_promoted, memory_order_relaxed) != 0, 0))
		tdax_promoted_demote_at_slow(dirfd, path, flags);
}

/*
 * Served without a demotion while fd is the promoted descriptor of its
 * file: a read or pread (off -1: at the position) from its blocks, and
 * where one is not cached from the kernel's copy, up to tdax's size; an
 * lseek (SEEK_SET, SEEK_CUR, SEEK_END) on tdax's position and size; an
 * fstat with tdax's size. True and the result (*res, or -1 and errno) if
 * served; false otherwise (the caller demotes the file, then asks the
 * kernel).
 */
bool tdax_promoted_read_slow(int fd, const struct iovec *iov, int n, int64_t off, ssize_t *res);
bool tdax_promoted_seek_slow(int fd, off_t off, int whence, off_t *res);
bool tdax_promoted_fstat_slow(int fd, struct stat *st, int *res);
static inline bool tdax_promoted_read(int fd, const struct iovec *iov, int n, int64_t off, ssize_t *res)
{
	return __builtin_expect(atomic_load_explicit(&tdax_fds_promoted, memory_order_relaxed) != 0, 0) &&
	       tdax_promoted_read_slow(fd, iov, n, off, res);
}
static inline bool tdax_promoted_seek(int fd, off_t off, int whence, off_t *res)
{
	return __builtin_expect(atomic_load_explicit(&tdax_fds_promoted, memory_order_relaxed) != 0, 0) &&
	       tdax_promoted_seek_slow(fd, off, whence, res);
}
static inline bool tdax_promoted_fstat(int fd, struct stat *st, int *res)
{
	return __builtin_expect(atomic_load_explicit(&tdax_fds_promoted, memory_order_relaxed) != 0, 0) &&
	       tdax_promoted_fstat_slow(fd, st, res);
}

/*
 * A stat by name (or by descriptor with AT_EMPTY_PATH) of a file this
 * process promoted, served as fstat is, without a demotion: true and the
 * result (*res, or -1 and errno) if answered here -- by the kernel alone
 * when the name leads elsewhere; false when this thread cannot tell (the
 * caller demotes what the name leads to, then asks the kernel).
 */
bool tdax_promoted_stat_at_slow(int dirfd, const char *path, int flags, struct stat *st, int *res);
bool tdax_promoted_statx_slow(int dirfd, const char *path, int flags, unsigned mask, struct statx *stx,
			      int *res);
static inline bool tdax_promoted_stat_at(int dirfd, const char *path, int flags, struct stat *st, int *res)
{
	return __builtin_expect(atomic_load_explicit(&tdax_fds_promoted, memory_order_relaxed) != 0, 0) &&
	       tdax_promoted_stat_at_slow(dirfd, path, flags, st, res);
}
static inline bool tdax_promoted_statx(int dirfd, const char *path, int flags, unsigned mask,
				       struct statx *stx, int *res)
{
	return __builtin_expect(atomic_load_explicit(&tdax_fds_promoted, memory_order_relaxed) != 0, 0) &&
	       tdax_promoted_statx_slow(dirfd, path, flags, mask, stx, res);
}

/* Descriptors first..last are closed (close_range, closefrom). */
void tdax_promoted_demote_range_slow(unsigned first, unsigned last);
static inline void tdax_promoted_settle_range(unsigned first, unsigned last)
{
	if (__builtin_expect(atomic_load_explicit(&tdax_fds_promoted, memory_order_relaxed) != 0, 0))
		tdax_promoted_demote_range_slow(first, last);
}

/* Every promoted file of the process (exit, exec, spawn, fork). */
void tdax_promoted_settle_all(void);

/* Around fork (start.c): no promotion until after it, every file demoted
 * before it; the child promotes nothing its parent did. */
void tdax_promoted_before_fork(void);
void tdax_promoted_after_fork_parent(void);
void tdax_promoted_after_fork_child(void);

/* The write-back's checkpoint of file idx through fd, if this process has
 * it promoted: its dirty blocks written in, the real sync, its records up
 * to then released -- and it stays promoted (the lease is still held: no
 * other open can have seen the file). True and the checkpoint's result
 * (*rc: 0, or -1 and errno) if so; false if it is not promoted here. */
bool tdax_promoted_checkpoint(uint32_t idx, int fd, int *rc);

/* A checkpoint of file idx through fd (any descriptor table's number):
 * demote it first, and keep it from being promoted until done. */
void tdax_promoted_checkpoint_begin(uint32_t idx, int fd);
void tdax_promoted_checkpoint_end(uint32_t idx);

/* Write-back thread: demote the files whose lease another open is
 * breaking, then let the leases go (lease.h). */
void tdax_promoted_serve_breaks(void);

/* Write-back thread: the block cache's pass (cache.h), and the evictions
 * that keep its pool of free blocks, each under its file's lock. */
void tdax_promoted_serve_cache(void);

#endif
