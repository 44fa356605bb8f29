/*
 * files -- registration and validation of file identity entries.
 */
#define _GNU_SOURCE
#include "core/files.h"
#include "core/sys.h"
#include "core/crc32c.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* The identity's checksum: not the path, which a rename changes in place
 * while the file has live records (files.h). */
static uint32_t ident_crc(const struct tdax_file *f)
{
	return tdax_crc32c(0, &f->gen, offsetof(struct tdax_file, crc) - offsetof(struct tdax_file, gen));
}

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U /* Linux 6.8 */
#endif
#define FILEID_INO32_GEN 1             /* linux/exportfs.h: { u32 ino, gen } */

/*
 * XFS's geometry, version 1 (xfs_fs.h; a frozen ABI, answered by every
 * kernel with XFS, to any caller): only its UUID is read.
 */
struct xfs_geom_v1 {
	uint32_t blocksize, rtextsize, agblocks, agcount, logblocks, sectsize, inodesize, imaxpct;
	uint64_t datablocks, rtblocks, rtextents, logstart;
	unsigned char uuid[16];
	uint32_t sunit, swidth;
	int32_t version;
	uint32_t flags, logsectsize, rtsectsize, dirblocksize;
};
#define XFS_IOC_FSGEOMETRY_V1 _IOR('X', 100, struct xfs_geom_v1)

/*
 * The directory a path descriptor's file is in (by its /proc name), opened
 * -- a directory: no lease or open of the file itself is touched -- if it
 * is on the file's device; else -1.
 */
static int dir_of_path_fd(int fd, dev_t dev)
{
	char link[32], path[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	long n = tdax_syscall(SYS_readlinkat, AT_FDCWD, link, path, sizeof(path) - 1);
	if (n <= 0)
		return -1;
	path[n] = '\0';
	char *slash = strrchr(path, '/');
	if (path[0] != '/' || !slash)
		return -1;
	slash[slash == path] = '\0';
	int d = tdax_sys_open(path, O_RDONLY | O_DIRECTORY | O_NOCTTY | O_CLOEXEC, 0);
	struct stat st;
	if (d >= 0 && (tdax_sys_fstat(d, &st) != 0 || st.st_dev != dev)) {
		tdax_sys_close(d);
		return -1;
	}
	return d;
}

/*
 * The id of fd's file system, one that outlives its device number: a disk
 * can come back under another number after a reboot (loop devices, NVMe
 * enumeration, device-mapper). ext4 and btrfs derive f_fsid from their
 * UUID; XFS's f_fsid *is* the device number, so there its UUID is asked
 * for (folded to 64 bits) -- through an ioctl, which a path descriptor
 * (O_PATH) does not take: then of its directory. -1 if neither answers.
 */
static int fs_id(int fd, dev_t dev, const struct statfs *sf, uint64_t *id)
{
	*id = 0;
	if (sf->f_type == XFS_SUPER_MAGIC) {
		struct xfs_geom_v1 g;
		int d = -1;
		long rc = tdax_syscall(SYS_ioctl, fd, XFS_IOC_FSGEOMETRY_V1, &g);
		if (rc != 0 && errno == EBADF && (d = dir_of_path_fd(fd, dev)) >= 0) {
			rc = tdax_syscall(SYS_ioctl, d, XFS_IOC_FSGEOMETRY_V1, &g);
			tdax_sys_close(d);
		}
		if (rc != 0)
			return -1;
		uint64_t half[2];
		memcpy(half, g.uuid, sizeof(half));
		*id = half[0] ^ half[1];
		return 0;
	}
	memcpy(id, &sf->f_fsid, sizeof(*id) < sizeof(sf->f_fsid) ? sizeof(*id) : sizeof(sf->f_fsid));
	return 0;
}

/*
 * The file system of a file, per mount and device number: its id (fs_id)
 * and type. Remembered for a few mounts, each slot written once, where the
 * kernel names mounts by an id it never gives again (STATX_MNT_ID_UNIQUE):
 * a mount's file system does not change under it, and a subvolume of one
 * (btrfs) has a device number of its own. Elsewhere an fstatfs each time.
 * -1 where fs_id cannot tell.
 */
#define KNOWN_FS 8
static struct {
	_Atomic int taken, ready;
	_Atomic uint64_t mnt, dev, fsid;
	_Atomic long type;
} known_fs[KNOWN_FS];

static int fs_of(int fd, const struct statx *stx, uint64_t *fsid, long *type)
{
	bool unique = stx->stx_mask & STATX_MNT_ID_UNIQUE;
	uint64_t dev = makedev(stx->stx_dev_major, stx->stx_dev_minor);
	for (int i = 0; unique && i < KNOWN_FS; i++)
		if (atomic_load_explicit(&known_fs[i].ready, memory_order_acquire) &&
		    atomic_load_explicit(&known_fs[i].mnt, memory_order_relaxed) == stx->stx_mnt_id &&
		    atomic_load_explicit(&known_fs[i].dev, memory_order_relaxed) == dev) {
			*fsid = atomic_load_explicit(&known_fs[i].fsid, memory_order_relaxed);
			*type = atomic_load_explicit(&known_fs[i].type, memory_order_relaxed);
			return 0;
		}
	struct statfs sf;
	*fsid = 0;
	*type = 0;
	if (fstatfs(fd, &sf) != 0)
		return 0;
	*type = (long)sf.f_type;
	if (fs_id(fd, dev, &sf, fsid) != 0)
		return -1;
	for (int i = 0, no = 0; unique && *fsid && i < KNOWN_FS; i++, no = 0)
		if (atomic_compare_exchange_strong(&known_fs[i].taken, &no, 1)) {
			atomic_store_explicit(&known_fs[i].mnt, stx->stx_mnt_id, memory_order_relaxed);
			atomic_store_explicit(&known_fs[i].dev, dev, memory_order_relaxed);
			atomic_store_explicit(&known_fs[i].fsid, *fsid, memory_order_relaxed);
			atomic_store_explicit(&known_fs[i].type, *type, memory_order_relaxed);
			atomic_store_explicit(&known_fs[i].ready, 1, memory_order_release);
			return 0;
		}
	return 0;
}

/* The inode generation of a path descriptor (it has no ioctl): from the
 * file handle, on the file systems whose handle is { inode, generation },
 * the same generation FS_IOC_GETVERSION gives. */
static bool igen_of_handle(int fd, const struct statx *stx, long type, uint32_t *igen)
{
	if (type != EXT4_SUPER_MAGIC && type != XFS_SUPER_MAGIC)
		return false;
	union {
		struct file_handle h;
		char room[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} fh = { .h.handle_bytes = MAX_HANDLE_SZ };
	int mnt;
	uint32_t v[2];
	if (name_to_handle_at(fd, "", &fh.h, &mnt, AT_EMPTY_PATH) != 0 || fh.h.handle_type != FILEID_INO32_GEN ||
	    fh.h.handle_bytes != sizeof(v))
		return false;
	memcpy(v, fh.h.f_handle, sizeof(v));
	if (v[0] != (uint32_t)stx->stx_ino)
		return false;
	*igen = v[1];
	return true;
}

/* The identity of fd; path_only: an O_PATH descriptor (then the inode
 * generation comes from its handle, or it is EOPNOTSUPP: without it a new
 * file on a reused inode number, born in the same clock tick, passes for a
 * removed one). *sealed (if not NULL): is the file append-only or
 * immutable (chattr +a, +i) now? */
static int ident(int fd, bool path_only, struct tdax_ident *id, bool *sealed)
{
	/* statx for the birth time; no timestamp that changes on writes is
	 * asked for (performance.md: a query of mtime/ctime costs the next
	 * write a journal update). */
	struct statx stx;
	if (tdax_statx_fd(fd, STATX_TYPE | STATX_INO | STATX_BTIME | STATX_MNT_ID_UNIQUE, &stx) != 0)
		return -1;
	if (!S_ISREG(stx.stx_mode)) {
		errno = EINVAL;
		return -1;
	}
	/* The file system's id, not the device number (fs_id); where a path
	 * descriptor cannot tell it, the caller opens the file (EOPNOTSUPP). */
	uint64_t fsid;
	long type;
	if (fs_of(fd, &stx, &fsid, &type) != 0) {
		if (path_only)
			errno = EOPNOTSUPP;
		return -1;
	}
	*id = (struct tdax_ident){ .ino = stx.stx_ino };
	if (sealed)
		*sealed = tdax_statx_sealed(&stx);
	id->dev = fsid ? fsid : (uint64_t)makedev(stx.stx_dev_major, stx.stx_dev_minor);
	int g = 0;
	if (path_only) {
		uint32_t igen;
		if (!igen_of_handle(fd, &stx, type, &igen)) {
			errno = EOPNOTSUPP;
			return -1;
		}
		id->igen = igen;
		id->flags |= TDAX_FILE_HAS_IGEN;
	} else if (tdax_syscall(SYS_ioctl, fd, FS_IOC_GETVERSION, &g) == 0) {
		id->igen = (uint32_t)g;
		id->flags |= TDAX_FILE_HAS_IGEN;
	}
	if (stx.stx_mask & STATX_BTIME) {
		id->btime = (uint64_t)stx.stx_btime.tv_sec * 1000000000u + stx.stx_btime.tv_nsec;
		id->flags |= TDAX_FILE_HAS_BTIME;
	}
	return 0;
}

int tdax_ident_of_fd(int fd, struct tdax_ident *id)
{
	return ident(fd, false, id, NULL);
}

int tdax_ident_of_path_fd(int fd, struct tdax_ident *id)
{
	return ident(fd, true, id, NULL);
}

bool tdax_ident_same(const struct tdax_ident *a, const struct tdax_ident *b)
{
	uint32_t both = a->flags & b->flags;
	return a->dev == b->dev && a->ino == b->ino &&
	       (!(both & TDAX_FILE_HAS_IGEN) || a->igen == b->igen) &&
	       (!(both & TDAX_FILE_HAS_BTIME) || a->btime == b->btime);
}

bool tdax_file_valid(const struct tdax_file *f)
{
	return atomic_load(&f->state) == TDAX_FILE_ACTIVE && f->crc == ident_crc(f) &&
	       f->path[sizeof(f->path) - 1] == '\0';
}

/* Cheap comparisons first: the checksum is computed only on a match. */
static bool entry_is(const struct tdax_file *f, const struct tdax_ident *id)
{
	struct tdax_ident e = tdax_file_ident(f);
	return f->ino == id->ino && atomic_load(&f->state) == TDAX_FILE_ACTIVE &&
	       tdax_ident_same(&e, id) && tdax_file_valid(f);
}

/*
 * The index: the file table by inode number, in the region after the table
 * (layout.h), so that finding a file costs a few probes and not a look at
 * every entry. Open addressing; a slot is (entry index + 1) << 32 | a tag
 * of the inode number, 0 when empty, DEAD when its entry was freed.
 *
 * Derived data, kept true in an order that makes it safe without a lock:
 * a file's slot is written before its entry becomes active and made dead
 * only after the entry is free, so every active entry has its slot from the
 * moment anyone can find it. Only the registration lock's holder writes
 * slots. A rebuild (when dead slots pile up) moves slots: the epoch is odd
 * while it runs, and a search that overlapped one searches the table
 * itself. A slot is a hint: every hit is checked against its entry.
 */
#define DEAD (0xFFFFFFFFull << 32)

static _Atomic uint64_t *index_at(const struct tdax_device *dev)
{
	return (_Atomic uint64_t *)(dev->base + dev->sb->files_off +
				    (uint64_t)dev->sb->max_files * TDAX_FILE_ENTRY_SIZE);
}

static uint32_t ino_tag(uint64_t ino)
{
	return (uint32_t)(ino ^ ino >> 32);
}

static uint32_t ino_slot(uint64_t ino, uint32_t slots)
{
	return (uint32_t)((ino * 0x9E3779B97F4A7C15ull) >> 32) & (slots - 1);
}

/* The p-th slot of inode ino's probe sequence. */
static _Atomic uint64_t *probe(const struct tdax_device *dev, uint64_t ino, uint32_t p)
{
	uint32_t slots = tdax_index_slots(dev->sb->max_files);
	return &index_at(dev)[(ino_slot(ino, slots) + p) & (slots - 1)];
}

/* Entries the index names for inode ino, in probe order: *pos is where to
 * go on (start with 0). Returns an entry index or -1 at the end. */
static int64_t index_next(const struct tdax_device *dev, uint64_t ino, uint32_t *pos)
{
	uint32_t slots = tdax_index_slots(dev->sb->max_files);
	for (; *pos < slots; (*pos)++) {
		uint64_t v = atomic_load_explicit(probe(dev, ino, *pos), memory_order_acquire);
		if (v == 0)
			break;
		uint32_t plus1 = (uint32_t)(v >> 32);
		if (v == DEAD || (uint32_t)v != ino_tag(ino) || plus1 == 0 || plus1 > dev->sb->max_files)
			continue;
		(*pos)++;
		return plus1 - 1;
	}
	*pos = slots;
	return -1;
}

/* Under the lock: put entry idx (inode ino) in the first empty or dead
 * slot of its probe sequence. */
static void index_put(struct tdax_device *dev, uint32_t idx, uint64_t ino)
{
	for (uint32_t p = 0; p < tdax_index_slots(dev->sb->max_files); p++) {
		_Atomic uint64_t *s = probe(dev, ino, p);
		uint64_t v = atomic_load(s);
		if (v == 0)
			atomic_fetch_add(dev->index_used, 1);
		else if (v != DEAD)
			continue;
		atomic_store_explicit(s, (uint64_t)(idx + 1) << 32 | ino_tag(ino), memory_order_release);
		tdax_dev_persist(dev, (const void *)s, sizeof(*s));
		return;
	}
	/* Full of dead slots: cannot happen, the lock's holder rebuilds first
	 * (index_room); the entry is then found by the search of the table. */
	atomic_store(dev->index_epoch, atomic_load(dev->index_epoch) | 1);
}

/* Under the lock: slot at is dead now; if the slot after it is empty, no
 * probe goes past it, so it and the dead run before it become empty (the
 * last first: each one emptied is followed by an empty one, whatever a
 * crash leaves). A file made and removed again and again (a journal a
 * transaction) leaves no trail of dead slots for every search to walk. */
static void index_trim(struct tdax_device *dev, uint32_t at)
{
	_Atomic uint64_t *ix = index_at(dev);
	uint32_t mask = tdax_index_slots(dev->sb->max_files) - 1;
	if (atomic_load(&ix[(at + 1) & mask]) != 0)
		return;
	for (uint32_t i = at; atomic_load(&ix[i]) == DEAD; i = (i - 1) & mask) {
		atomic_store(&ix[i], 0);
		tdax_dev_persist(dev, (const void *)&ix[i], sizeof(ix[i]));
		atomic_fetch_sub(dev->index_used, 1);
	}
}

/* Under the lock: entry idx (inode ino) is free now: its slot is dead. */
static void index_drop(struct tdax_device *dev, uint32_t idx, uint64_t ino)
{
	uint32_t slots = tdax_index_slots(dev->sb->max_files);
	for (uint32_t p = 0; p < slots; p++) {
		_Atomic uint64_t *s = probe(dev, ino, p);
		uint64_t v = atomic_load(s);
		if (v == 0)
			return;
		if (v != DEAD && (uint32_t)(v >> 32) == idx + 1) {
			atomic_store(s, DEAD);
			tdax_dev_persist(dev, (const void *)s, sizeof(*s));
			index_trim(dev, (uint32_t)(s - index_at(dev)));
		}
	}
}

/* Under the lock: the index anew from the table, if it needs it (dead
 * slots over a quarter, or a rebuild cut short: the epoch is odd). */
static void index_room(struct tdax_device *dev)
{
	uint32_t slots = tdax_index_slots(dev->sb->max_files);
	uint64_t epoch = atomic_load(dev->index_epoch);
	if (!(epoch & 1) && atomic_load(dev->index_used) <= slots / 2 + slots / 4)
		return;
	atomic_store(dev->index_epoch, epoch | 1);
	tdax_dev_persist(dev, (const void *)dev->index_epoch, sizeof(uint64_t));
	_Atomic uint64_t *ix = index_at(dev);
	memset((void *)ix, 0, (size_t)slots * 8);
	atomic_store(dev->index_used, 0);
	for (uint32_t i = 0; i < dev->sb->max_files; i++) {
		struct tdax_file *f = tdax_file_at(dev, i);
		if (atomic_load(&f->state) == TDAX_FILE_ACTIVE)
			index_put(dev, i, f->ino);
	}
	tdax_dev_persist(dev, (const void *)ix, (size_t)slots * 8);
	atomic_store(dev->index_epoch, (epoch | 1) + 1);
	tdax_dev_persist(dev, (const void *)dev->index_epoch, sizeof(uint64_t));
}

/*
 * The count of active entries (+ 1; 0: not known), under the lock. It may
 * count too many, never too few: a reader that finds none skips looking a
 * path up (tdax_files_none). So it goes up before an entry is active and
 * down after one is free, and a holder that dies between the two leaves
 * one too many; a count not known is made from the table.
 */
static void reg_lock(struct tdax_device *dev);

static uint64_t active_in_table(const struct tdax_device *dev)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < dev->sb->max_files; i++)
		n += atomic_load(&tdax_file_at(dev, i)->state) == TDAX_FILE_ACTIVE;
	return n;
}

static void active_add(struct tdax_device *dev, int delta)
{
	uint64_t v = atomic_load(dev->active_plus1);
	v = v ? v + (uint64_t)(int64_t)delta : active_in_table(dev) + 1 + (delta > 0);
	atomic_store(dev->active_plus1, v);
	tdax_dev_persist(dev, (const void *)dev->active_plus1, sizeof(uint64_t));
}

void tdax_files_count_active(struct tdax_device *dev)
{
	if (atomic_load(dev->active_plus1))
		return;
	reg_lock(dev);
	if (!atomic_load(dev->active_plus1)) {
		atomic_store(dev->active_plus1, active_in_table(dev) + 1);
		tdax_dev_persist(dev, (const void *)dev->active_plus1, sizeof(uint64_t));
	}
	tdax_pidlock_release(dev->reglock);
}

static void reg_lock(struct tdax_device *dev)
{
	tdax_pidlock_acquire(dev->reglock);
	index_room(dev); /* a holder that died may have left a rebuild half done */
}

/* The entry of identity id by a look at every entry: the index's fallback. */
static int find_in_table(struct tdax_device *dev, const struct tdax_ident *id, uint32_t *idx,
			 uint32_t *gen)
{
	for (uint32_t i = 0; i < dev->sb->max_files; i++) {
		struct tdax_file *f = tdax_file_at(dev, i);
		if (entry_is(f, id)) {
			*idx = i;
			*gen = f->gen;
			return 0;
		}
	}
	return -1;
}

int tdax_files_find(struct tdax_device *dev, const struct tdax_ident *id, uint32_t *idx,
		    uint32_t *gen)
{
	uint64_t epoch = atomic_load(dev->index_epoch);
	if (!(epoch & 1)) {
		uint32_t pos = 0;
		for (int64_t i; (i = index_next(dev, id->ino, &pos)) >= 0;) {
			struct tdax_file *f = tdax_file_at(dev, (uint32_t)i);
			if (entry_is(f, id)) {
				*idx = (uint32_t)i;
				*gen = f->gen;
				return 0;
			}
		}
		if (atomic_load(dev->index_epoch) == epoch)
			return -1;
	}
	return find_in_table(dev, id, idx, gen); /* a rebuild ran: the index was in motion */
}

bool tdax_files_may_have(struct tdax_device *dev, uint64_t ino)
{
	uint64_t epoch = atomic_load(dev->index_epoch);
	if (epoch & 1)
		return true;
	uint32_t pos = 0;
	for (int64_t i; (i = index_next(dev, ino, &pos)) >= 0;) {
		const struct tdax_file *f = tdax_file_at(dev, (uint32_t)i);
		if (f->ino == ino && atomic_load(&f->state) == TDAX_FILE_ACTIVE)
			return true;
	}
	return atomic_load(dev->index_epoch) != epoch;
}

/*
 * Write an entry's path and persist it. In place, the entry valid all the
 * while: a crash in the middle leaves a path that leads nowhere, never an
 * invalid entry (its live records would be dead with it); a rename of a
 * file with records logs both names first (tdax_log_rename), and recovery
 * tries them. The last byte is never written: the path always ends.
 */
static void set_path(struct tdax_device *dev, struct tdax_file *f, const char *path)
{
	/* Callers refuse longer paths. */
	size_t n = strlen(path);
	TDAX_ASSERT(n < TDAX_FILE_PATH_MAX);
	memcpy(f->path, path, n);
	memset(f->path + n, 0, sizeof(f->path) - 1 - n);
	tdax_dev_persist(dev, f->path, sizeof(f->path));
}

int tdax_files_rename(struct tdax_device *dev, uint32_t idx, uint32_t gen, const char *path)
{
	if (path[0] != '/' || strlen(path) >= TDAX_FILE_PATH_MAX)
		return -1;
	struct tdax_file *f = tdax_file_at(dev, idx);
	reg_lock(dev);
	int rc = -1;
	if (f->gen == gen && atomic_load(&f->state) == TDAX_FILE_ACTIVE) {
		set_path(dev, f, path);
		rc = 0;
	}
	tdax_pidlock_release(dev->reglock);
	return rc;
}

/* Under the lock: entry f (index idx) is free; then its slot goes. The
 * generation moves on at once: a process still holding the entry sees
 * that it is not current (its records would be nobody's). */
static void free_entry(struct tdax_device *dev, struct tdax_file *f, uint32_t idx)
{
	atomic_store(&f->state, TDAX_FILE_FREE);
	f->gen++;
	tdax_dev_persist(dev, f, TDAX_CACHELINE);
	index_drop(dev, idx, f->ino);
	active_add(dev, -1);
}

bool tdax_file_orphaned(const struct tdax_file *f)
{
	uint64_t since = atomic_load(&f->rt.deferred_since);
	uint32_t pid = atomic_load(&f->rt.deferred);
	return pid && (!tdax_pid_alive(pid) || (since && tdax_pid_start(pid) != since));
}

bool tdax_files_orphaned(struct tdax_device *dev)
{
	for (uint32_t i = 0; i < dev->sb->max_files; i++) {
		const struct tdax_file *f = tdax_file_at(dev, i);
		if (atomic_load_explicit(&f->rt.deferred, memory_order_relaxed) && tdax_file_orphaned(f))
			return true;
	}
	return false;
}

void tdax_files_forget(struct tdax_device *dev, uint32_t idx, uint32_t gen)
{
	struct tdax_file *f = tdax_file_at(dev, idx);
	reg_lock(dev);
	if (f->gen == gen && atomic_load(&f->state) == TDAX_FILE_ACTIVE)
		free_entry(dev, f, idx);
	tdax_pidlock_release(dev->reglock);
}

/* Nothing in the entry anyone still needs: no records, no failed sync to
 * report or repair, no writer tdax cannot see, no write on its way. What
 * the policy learned of the file is lost with it. */
static bool idle(const struct tdax_file_rt *rt)
{
	return !atomic_load(&rt->first_log_ns) && !atomic_load(&rt->rewrite) &&
	       !atomic_load(&rt->wb_error) && !atomic_load(&rt->unmanaged) &&
	       !atomic_load(&rt->inflight) &&
	       atomic_load(&rt->cold_started) == atomic_load(&rt->cold_done);
}

/* Rules for freeing an entry that is idle, beside that: */
typedef bool (*done_with_fn)(const struct tdax_file_rt *rt, uint64_t now);

/* Its file never had a stream of syncs: the policy learned nothing. */
static bool never_streamed(const struct tdax_file_rt *rt, uint64_t now)
{
	(void)now;
	return !atomic_load(&rt->streamed);
}

/* Its file was synced, but not for TDAX_FILE_QUIET_NS: the stream is over. */
static bool stream_over(const struct tdax_file_rt *rt, uint64_t now)
{
	uint64_t last = atomic_load(&rt->last_sync_ns);
	return last && now - last >= TDAX_FILE_QUIET_NS;
}

/* Free entry (idx, gen) if it is idle and done_with says so; checked again
 * under the lock. Never waits: the callers run in close() and open(),
 * maybe in a signal handler that interrupted this very thread's
 * registration. */
static bool let_go_if(struct tdax_device *dev, uint32_t idx, uint32_t gen, done_with_fn done_with)
{
	struct tdax_file *f = tdax_file_at(dev, idx);
	uint64_t now = tdax_now_ns();
	if (f->gen != gen || !done_with(&f->rt, now) || !idle(&f->rt))
		return false;
	if (!tdax_pidlock_try(dev->reglock))
		return false;
	index_room(dev);
	bool done = f->gen == gen && atomic_load(&f->state) == TDAX_FILE_ACTIVE &&
		    done_with(&f->rt, now) && idle(&f->rt);
	if (done)
		free_entry(dev, f, idx);
	tdax_pidlock_release(dev->reglock);
	return done;
}

bool tdax_files_let_go(struct tdax_device *dev, uint32_t idx, uint32_t gen)
{
	return let_go_if(dev, idx, gen, never_streamed);
}

bool tdax_files_let_go_quiet(struct tdax_device *dev, uint32_t idx, uint32_t gen)
{
	return let_go_if(dev, idx, gen, stream_over);
}

/* Whenever: idle is all it takes. */
static bool any_time(const struct tdax_file_rt *rt, uint64_t now)
{
	(void)rt, (void)now;
	return true;
}

uint32_t tdax_files_let_go_others(struct tdax_device *dev, const struct tdax_ident *id)
{
	/* Found first, freed after: a free may rebuild the index under the
	 * search. Another file system's inode of that number is not in the
	 * way; what is read here is checked again under the lock (the
	 * generation). */
	struct in_way { uint32_t idx, gen; } in_way[8];
	uint32_t n = 0, pos = 0, freed = 0;
	for (int64_t i; n < 8 && (i = index_next(dev, id->ino, &pos)) >= 0;) {
		const struct tdax_file *f = tdax_file_at(dev, (uint32_t)i);
		struct tdax_ident e = tdax_file_ident(f);
		if (e.ino == id->ino && e.dev == id->dev && !tdax_ident_same(&e, id))
			in_way[n++] = (struct in_way){ (uint32_t)i, f->gen };
	}
	for (uint32_t k = 0; k < n; k++)
		freed += let_go_if(dev, in_way[k].idx, in_way[k].gen, any_time);
	return freed;
}

/* Is the file of entry f still at its path? Raw system calls: under the
 * preload these must not go through tdax's own hooks. */
static bool still_there(const struct tdax_file *f)
{
	int fd = (int)tdax_syscall(SYS_openat, AT_FDCWD, f->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT && errno != ENOTDIR; /* in doubt, it is */
	struct tdax_ident now, was = tdax_file_ident(f);
	bool same = tdax_ident_of_fd(fd, &now) != 0 || tdax_ident_same(&now, &was);
	tdax_syscall(SYS_close, fd);
	return same;
}

uint32_t tdax_files_reclaim_gone(struct tdax_device *dev)
{
	if (!tdax_pidlock_try(dev->reglock))
		return 0;
	index_room(dev);
	uint32_t freed = 0;
	for (uint32_t i = 0; i < dev->sb->max_files; i++) {
		struct tdax_file *f = tdax_file_at(dev, i);
		if (!tdax_file_valid(f) || !idle(&f->rt) || still_there(f))
			continue;
		free_entry(dev, f, i);
		freed++;
	}
	tdax_pidlock_release(dev->reglock);
	return freed;
}

/*
 * Under the lock, the table full: make room. Entries that keep nothing
 * (idle), up to an eighth of the table so that the next registrations find
 * room at once: first those without a sync for a second, then any. A
 * process that still has such a file open finds the entry not current and
 * registers the file again (manage.h). Failing those, the entries of files
 * that are gone -- removed or replaced by a program without tdax -- and
 * have no records waiting. Returns a free slot, or -1.
 */
static int64_t make_room(struct tdax_device *dev)
{
	uint64_t now = tdax_now_ns();
	uint32_t n = dev->sb->max_files, want = n / 8 ? n / 8 : 1, freed = 0;
	int64_t slot = -1;
	for (uint64_t quiet = TDAX_FILE_QUIET_NS;; quiet = 0) {
		for (uint32_t i = 0; i < n && freed < want; i++) {
			struct tdax_file *f = tdax_file_at(dev, i);
			uint64_t last = atomic_load(&f->rt.last_sync_ns);
			if (atomic_load(&f->state) != TDAX_FILE_ACTIVE || !idle(&f->rt) ||
			    (last && now - last < quiet))
				continue;
			free_entry(dev, f, i);
			freed++;
			slot = slot < 0 ? i : slot;
		}
		if (freed >= want || !quiet)
			break;
	}
	for (uint32_t i = 0; i < n && slot < 0; i++) {
		struct tdax_file *f = tdax_file_at(dev, i);
		if (!tdax_file_valid(f) || atomic_load(&f->rt.first_log_ns) ||
		    atomic_load(&f->rt.rewrite) || still_there(f))
			continue;
		free_entry(dev, f, i);
		slot = i;
	}
	return slot;
}

/* Under the lock: a free entry, looked for from where the last one was
 * found (entries are taken and freed in turn, so that is usually close). */
static int64_t free_slot(struct tdax_device *dev)
{
	static _Atomic uint32_t from;
	uint32_t n = dev->sb->max_files, start = atomic_load(&from) % n;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = (start + k) % n;
		if (atomic_load(&tdax_file_at(dev, i)->state) != TDAX_FILE_ACTIVE) {
			atomic_store(&from, i + 1);
			return i;
		}
	}
	return make_room(dev);
}

int tdax_files_register(struct tdax_device *dev, int fd, const char *path, uint32_t *idx,
			uint32_t *gen, bool *created, struct tdax_err *err)
{
	struct tdax_ident id;
	bool sealed;
	if (ident(fd, false, &id, &sealed) != 0)
		return tdax_errf(err, "%s: not a regular file, or fstat failed: %s", path,
				 strerror(errno));
	if (sealed)
		return tdax_errf(err, "%s: append-only or immutable (chattr +a, +i): recovery could not "
			"write records into it; tdax leaves this file to the kernel", path);
	if (path[0] != '/')
		return tdax_errf(err, "%s: not an absolute path; recovery could not find the file "
			"again", path);
	if (strlen(path) >= TDAX_FILE_PATH_MAX)
		return tdax_errf(err, "%s: path longer than %d bytes; tdax leaves this file to the "
			"kernel", path, TDAX_FILE_PATH_MAX - 1);

	/* One registrar at a time across all processes, so that a file never
	 * gets two entries. Registration happens at open, not per write. */
	reg_lock(dev);
	*created = false;
	if (tdax_files_find(dev, &id, idx, gen) == 0) {
		tdax_pidlock_release(dev->reglock);
		return 0;
	}
	int64_t slot = free_slot(dev);
	if (slot < 0) {
		tdax_pidlock_release(dev->reglock);
		return tdax_errf(err, "%s: the device's file table is full (%u files with records "
			"or in use); tdax leaves this file to the kernel", path, dev->sb->max_files);
	}
	struct tdax_file *f = tdax_file_at(dev, (uint32_t)slot);
	atomic_store(&f->state, TDAX_FILE_CLAIMING);
	tdax_dev_persist(dev, f, TDAX_CACHELINE);
	f->gen++;
	f->dev = id.dev;
	f->ino = id.ino;
	f->igen = id.igen;
	f->btime = id.btime;
	f->flags = id.flags;
	f->uid = (uint32_t)geteuid();
	f->gid = (uint32_t)getegid();
	atomic_store(&f->released_seq, 0);
	memset(f->rt_space, 0, sizeof(f->rt_space));
	/* What was written to the file before it had an entry is in no
	 * record: its first sync, whoever makes it, is a real one. */
	atomic_store(&f->rt.uncovered, 1);
	f->path[sizeof(f->path) - 1] = '\0';
	set_path(dev, f, path);
	f->crc = ident_crc(f);
	tdax_dev_persist(dev, f, offsetof(struct tdax_file, rt));
	index_put(dev, (uint32_t)slot, id.ino); /* findable before it is active */
	active_add(dev, 1);
	atomic_store(&f->state, TDAX_FILE_ACTIVE);
	tdax_dev_persist(dev, f, TDAX_CACHELINE);
	atomic_fetch_add(dev->registrations, 1); /* after: a look that sees it finds the entry */
	*idx = (uint32_t)slot;
	*gen = f->gen;
	*created = true;
	tdax_pidlock_release(dev->reglock);
	return 0;
}

void tdax_file_set_removed(struct tdax_device *dev, struct tdax_file *f, uint32_t v)
{
	atomic_store(&f->rt.removed, v);
	tdax_dev_persist(dev, (const void *)&f->rt.removed, sizeof(f->rt.removed));
}

void tdax_file_set_synced(struct tdax_device *dev, struct tdax_file *f)
{
	atomic_store(&f->rt.synced, 1);
	tdax_dev_persist(dev, (const void *)&f->rt.synced, sizeof(f->rt.synced));
}

void tdax_file_set_remade(struct tdax_device *dev, struct tdax_file *f, const struct tdax_ident *id)
{
	atomic_store(&f->rt.remade.set, 0);
	tdax_dev_persist(dev, (const void *)&f->rt.remade.set, sizeof(f->rt.remade.set));
	f->rt.remade.dev = id->dev;
	f->rt.remade.ino = id->ino;
	f->rt.remade.igen = id->igen;
	f->rt.remade.btime = id->btime;
	f->rt.remade.flags = id->flags;
	tdax_dev_persist(dev, &f->rt.remade, sizeof(f->rt.remade));
	atomic_store(&f->rt.remade.set, 1); /* last: a torn identity is never believed */
	tdax_dev_persist(dev, (const void *)&f->rt.remade.set, sizeof(f->rt.remade.set));
}

void tdax_file_release(struct tdax_device *dev, uint32_t idx, uint32_t gen, uint64_t seq)
{
	struct tdax_file *f = tdax_file_at(dev, idx);
	if (f->gen != gen)
		return;
	uint64_t cur = atomic_load(&f->released_seq);
	while (cur < seq && !atomic_compare_exchange_weak(&f->released_seq, &cur, seq))
		;
	tdax_dev_persist(dev, (const void *)&f->released_seq, sizeof(uint64_t));
}

/* "dir/..." below dir: the rest after the slash, or NULL. */
static const char *below(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && path[n] == '/' ? path + n : NULL;
}

int tdax_files_move_below(struct tdax_device *dev, const char *from, const char *to, bool exchange)
{
	int moved = 0;
	reg_lock(dev);
	for (uint32_t i = 0; i < dev->sb->max_files; i++) {
		struct tdax_file *f = tdax_file_at(dev, i);
		if (atomic_load(&f->state) != TDAX_FILE_ACTIVE)
			continue;
		const char *rest = below(f->path, from), *dst = to;
		if (!rest && exchange) {
			rest = below(f->path, to);
			dst = from;
		}
		char path[TDAX_FILE_PATH_MAX + 1];
		if (!rest || snprintf(path, sizeof(path), "%s%s", dst, rest) >= TDAX_FILE_PATH_MAX)
			continue; /* not below, or too long now: recovery will find it unmatched */
		set_path(dev, f, path);
		moved++;
	}
	tdax_pidlock_release(dev->reglock);
	return moved;
}

void tdax_files_format(struct tdax_device *dev)
{
	uint64_t n = (uint64_t)dev->sb->max_files * TDAX_FILE_ENTRY_SIZE +
		     (uint64_t)tdax_index_slots(dev->sb->max_files) * 8; /* and the index: empty */
	memset(tdax_file_at(dev, 0), 0, n);
	tdax_dev_persist(dev, tdax_file_at(dev, 0), n);
	atomic_store(dev->active_plus1, 1);
	tdax_dev_persist(dev, (const void *)dev->active_plus1, sizeof(uint64_t));
}
