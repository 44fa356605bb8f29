/*
 * files -- the file identity table in the device region. Each entry names
 * one file by (device, inode, inode generation), keeps the path and the
 * uid/gid of the process that registered it, and the sequence number up to
 * which the file's log records are released (really synced). Recovery
 * trusts an entry only when its checksum holds and opens the file only when
 * its identity still matches. An index by inode number after the table
 * (files.c) finds an entry in a few probes.
 */
#ifndef TDAX_FILES_H
#define TDAX_FILES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/device.h"
#include "core/layout.h"
#include "core/tunables.h" /* TDAX_MAX_GRAN_ORDER */

enum { TDAX_FILE_FREE = 0, TDAX_FILE_CLAIMING = 1, TDAX_FILE_ACTIVE = 2 };
enum { TDAX_REMOVING = 1, TDAX_REMOVED = 2, TDAX_REPLACED = 3 }; /* tdax_file_rt.removed */
/* What the file system gave beyond the inode number: an inode generation,
 * a birth time. Either tells a file from a later one on a reused inode. */
enum { TDAX_FILE_HAS_IGEN = 1, TDAX_FILE_HAS_BTIME = 2 };
/* Ranges a file remembers as written since its last sync (more: the sync
 * scans the range table). */
#define TDAX_FILE_DIRTY_SLOTS 6

/*
 * Per-file state of the runtime, shared by every process using the file
 * (PostgreSQL has many processes writing one WAL file). Lives in the device
 * so that all of them see one copy; none of it is needed for recovery
 * but `removed`, `synced` and `remade`.
 */
struct tdax_file_rt {
	_Atomic uint64_t uncovered;    /* changes since the last real sync the log does not hold */
	_Atomic uint64_t size_seen;    /* file size as tdax writers left it (sync guard) */
	_Atomic uint64_t logged_bytes; /* bytes logged since the last checkpoint */
	_Atomic uint64_t first_log_ns; /* CLOCK_MONOTONIC of the oldest unreleased record, 0 = none */
	_Atomic int32_t wb_error;      /* errno of a failed background sync, for the next sync */
	_Atomic uint32_t lock;         /* pid lock: writes that depend on the file position */
	_Atomic uint32_t unmanaged;    /* a write path tdax cannot see: TDAX_FB_* reason, 0 = none */
	_Atomic uint32_t rewrite;      /* a sync failed: re-apply the records before trusting one */
	_Atomic uint32_t inflight;     /* tdax writes between the real write and size_seen */
	_Atomic uint32_t gran;         /* G + 1 of this file's ranges, 0 = not tracked yet */
	_Atomic uint64_t last_sync_ns; /* CLOCK_MONOTONIC of the file's last sync (tracking) */
	_Atomic uint32_t dirty_ranges[TDAX_FILE_DIRTY_SLOTS]; /* range table slots + 1 written since the last sync */
	_Atomic uint32_t dirty_overflow;  /* more than fit above: the sync scans the table */
	/* Writes at the file position that tdax does not log and whose offset it
	 * does not ask the kernel for (coherent_ops.c, "cold"): started, done. */
	_Atomic uint64_t cold_started;
	_Atomic uint64_t cold_done;
	/* 1 once a sync came within the writeback window of the file's one
	 * before (tracking.c): only such syncs can upgrade a range, so a file
	 * without one has taught the policy nothing worth keeping. */
	_Atomic uint32_t streamed;
	/* TDAX_REMOVED once its last name was unlinked while it had records,
	 * TDAX_REPLACED once a rename over it took it (tdax_file_gone): they
	 * stay until the removal is durable -- until then a power cut can
	 * bring the file back (checkpoint.c). TDAX_REMOVING from just before
	 * such a call until it is known what it did. Persisted: recovery lets
	 * the records of such a file go when its path no longer leads to it,
	 * instead of reporting it unmatched, and unlinks again a file a power
	 * cut brought back after an unlink (a rename over it is not undone:
	 * the name would then lead to neither file). */
	_Atomic uint32_t removed;
	/* Attribute changes (chmod, chown, utimensat, xattrs) since the last
	 * real fsync: the log holds none, so the next fsync is real. */
	_Atomic uint32_t attrs_changed;
	/* 1 once a sync of the file succeeded since its registration, real
	 * or lightweight. Until then none of its records was acknowledged:
	 * recovery lets them go if the file is not at its path (a file
	 * created, written and never synced, whose creation a power cut
	 * undid), and does not make it again from its create record.
	 * Persisted. */
	_Atomic uint32_t synced;
	/* Renames and creations logged since the last checkpoint: a real
	 * sync of the file does not make its name durable, so a checkpoint
	 * syncs the directory too before it releases their records
	 * (coherent.c). */
	_Atomic uint32_t named;
	/* 1 once an open file of it was handed to a program tdax may not see
	 * (an exec or spawn inheriting a descriptor, one sent over a socket):
	 * no lease of it is trusted any more (preload/lease.h). */
	_Atomic uint32_t handed_on;
	/* The process (pid) that promoted the file (preload/bypass.h): its
	 * bytes may be in the log alone, not in the file. 0 once written
	 * back; recovery writes back the records of a dead one's file. Its
	 * start time (util.h tdax_pid_start), stored first: a process that
	 * got the pid later is not the promoter. */
	_Atomic uint32_t deferred;
	_Atomic uint64_t deferred_since;
	/* Set by recovery only: the file it made anew for this entry, its
	 * creation having been lost (recover.c); valid once `set` is 1.
	 * Recovery takes that file as the entry's own, so that a recovery
	 * cut short after the new file took its name finds it again.
	 * Persisted. */
	struct {
		uint64_t dev, ino, igen, btime;
		uint32_t flags;
		_Atomic uint32_t set;
	} remade;
};
_Static_assert(sizeof(struct tdax_file_rt) <= 192, "runtime state fits its place in the entry");

struct tdax_file {
	_Atomic uint32_t state;        /* TDAX_FILE_* */
	uint32_t gen;                  /* bumped each time the entry is reused */
	uint64_t dev;
	uint64_t ino;
	uint64_t igen;
	uint64_t btime;                /* birth time, ns since the epoch */
	uint32_t uid;
	uint32_t gid;
	uint32_t flags;                /* TDAX_FILE_HAS_IGEN, TDAX_FILE_HAS_BTIME */
	uint32_t crc;                  /* identity: gen .. flags (not the path) */
	_Atomic uint64_t released_seq; /* records with seq <= this are dead */
	union {
		struct tdax_file_rt rt;
		char rt_space[192];
	};
	char path[TDAX_FILE_PATH_MAX];
};

_Static_assert(sizeof(struct tdax_file) == TDAX_FILE_ENTRY_SIZE, "file entry size");

/* rt->gran as stored (G + 1, 0 = not tracked yet), cut to a G no tdax
 * exceeds: the value comes from the region and is used as a shift. */
static inline uint32_t tdax_file_gran(const struct tdax_file_rt *rt)
{
	uint32_t g = atomic_load_explicit(&rt->gran, memory_order_relaxed);
	return g > TDAX_MAX_GRAN_ORDER + 1 ? TDAX_MAX_GRAN_ORDER + 1 : g;
}

/* Is this removal state (rt.removed) one of a file whose last name is
 * gone (unlinked, or replaced by a rename)? */
static inline bool tdax_file_gone(uint32_t removed)
{
	return removed == TDAX_REMOVED || removed == TDAX_REPLACED;
}

/* idx < max_files: an index read from the region is checked before. */
static inline struct tdax_file *tdax_file_at(const struct tdax_device *dev, uint32_t idx)
{
	TDAX_ASSERT(idx < dev->sb->max_files);
	return (struct tdax_file *)(dev->base + dev->sb->files_off +
				    (uint64_t)idx * TDAX_FILE_ENTRY_SIZE);
}

/* Format the file table of a new region (core/format.c): every entry free,
 * the index empty. Persistent on return. */
void tdax_files_format(struct tdax_device *dev);

/* The identity of an open file: file system id (one that outlives the
 * device number: f_fsid, XFS's UUID; else the device number), inode and, where the file system has them, inode generation
 * and birth time (flags say which). */
struct tdax_ident {
	uint64_t dev, ino, igen, btime;
	uint32_t flags;
};
int tdax_ident_of_fd(int fd, struct tdax_ident *id);
/* The same of an O_PATH descriptor, where the file system lets its inode
 * generation be had without opening the file (ext4, xfs) and its id too
 * (XFS: from the directory the file is in); else -1 with errno
 * EOPNOTSUPP: open the file and ask tdax_ident_of_fd. */
int tdax_ident_of_path_fd(int fd, struct tdax_ident *id);
/* Same file: same file system and inode, and every part of the identity
 * both sides know agrees. */
bool tdax_ident_same(const struct tdax_ident *a, const struct tdax_ident *b);

/* The identity entry f names. */
static inline struct tdax_ident tdax_file_ident(const struct tdax_file *f)
{
	return (struct tdax_ident){ f->dev, f->ino, f->igen, f->btime, f->flags };
}

/*
 * Find the entry for the file open as fd, or register it (path as given,
 * the caller's uid/gid). Returns 0 with *idx and *gen set (*created tells whether the entry is new), or -1 with err set (table
 * full, path too long, not a regular file).
 */
int tdax_files_register(struct tdax_device *dev, int fd, const char *path, uint32_t *idx,
			uint32_t *gen, bool *created, struct tdax_err *err);

/* An entry recovery may trust: active, checksum good. */
bool tdax_file_valid(const struct tdax_file *f);

/* Look up a registered file by identity: 0 with *idx and *gen set if found.
 * No lock: a few probes of the index. */
int tdax_files_find(struct tdax_device *dev, const struct tdax_ident *id, uint32_t *idx,
		    uint32_t *gen);

/*
 * How many entries were made on the device so far. A process that writes a
 * file it has not registered (preload/unregistered.c) reads it after each
 * write: when it has not moved, no entry was made since the last look, so
 * the file still has none and nobody else's sync can be lightweight
 * without the real sync that follows every registration (a new entry is
 * uncovered). Not persisted: only its changes mean something.
 */
static inline uint64_t tdax_files_registrations(const struct tdax_device *dev)
{
	return atomic_load(dev->registrations);
}

/* Could a file with inode number ino be registered? False means it is not
 * (what a stat() tells is enough to skip a file); true, that it may be. */
bool tdax_files_may_have(struct tdax_device *dev, uint64_t ino);

/* Is no file registered at all? Then no path needs a look (a stat) to
 * learn whether it names one. A registration running meanwhile is as if
 * it came after: its entry is uncovered (its first sync is real). */
static inline bool tdax_files_none(const struct tdax_device *dev)
{
	return atomic_load(dev->active_plus1) == 1;
}

/* The count tdax_files_none reads, made from the table if it is not known
 * (a region an older build used); at a process's attach. */
void tdax_files_count_active(struct tdax_device *dev);

/* Is f promoted (rt.deferred) by a process that is gone (dead, or its pid
 * taken by another)? */
bool tdax_file_orphaned(const struct tdax_file *f);

/* Is any file orphaned? Its bytes are in the log alone until recovery
 * writes them (recover.h). */
bool tdax_files_orphaned(struct tdax_device *dev);

/* The last descriptor of (idx, gen) in a process was closed: free the
 * entry if the file never had a stream of syncs (rt.streamed: nothing the
 * policy learned would be lost) and the entry holds nothing anyone needs
 * (records, an error, a writer tdax cannot see). True if it was
 * freed. Never waits for the registration lock. */
bool tdax_files_let_go(struct tdax_device *dev, uint32_t idx, uint32_t gen);

/* How long a file synced before goes without a sync before its entry is
 * of no more use to the policy: a stream that long quiet is over. */
#define TDAX_FILE_QUIET_NS 1000000000ull

/* A file is opened anew (a descriptor that is not the process's hold of
 * entry (idx, gen)): free its entry if it holds nothing anyone needs and
 * the file has had no sync for TDAX_FILE_QUIET_NS. Such an entry only
 * costs: every descriptor of a registered file pays the registered path
 * on each write (a database synced under tdax, then run without syncs:
 * 0.92 of itself), where one without an entry waits for its first sync.
 * What the policy learned of the file is lost with it; a process still
 * holding it registers the file again (manage.h). True if it was freed.
 * Never waits for the registration lock. */
bool tdax_files_let_go_quiet(struct tdax_device *dev, uint32_t idx, uint32_t gen);

/* The file with identity id has no entry, but its inode number is in
 * some: the file system gave the number again, so the file of each such
 * entry on the same file system is gone (an open file keeps its inode).
 * Free those that hold nothing anyone needs (a journal made and removed
 * each transaction would otherwise pay the identity's look at every
 * open). Returns how many were freed. Never waits for the registration
 * lock. */
uint32_t tdax_files_let_go_others(struct tdax_device *dev, const struct tdax_ident *id);

/* Free the entries of files that are gone from their paths (removed or
 * replaced where tdax did not see it: a directory deleted by a program
 * without tdax) and hold nothing anyone needs: their ranges become free
 * for other files (ranges.h: a range of a freed entry is stale). For a
 * full range table; a scan of the table, a path look per entry. Never
 * waits for the registration lock. Returns how many were freed. */
uint32_t tdax_files_reclaim_gone(struct tdax_device *dev);

/* The file was renamed: its new absolute path, written in place (files.c,
 * set_path). Its live records stay valid: the caller logs the rename
 * first (tdax_log_rename), so that recovery finds the file under either
 * name whatever a crash leaves of the entry's path. */
int tdax_files_rename(struct tdax_device *dev, uint32_t idx, uint32_t gen, const char *path);

/* The directory `from` was renamed to `to` (absolute paths): every entry
 * below it takes its new path; with exchange, entries below `to` move to
 * `from` as well (RENAME_EXCHANGE). Returns how many entries moved. Their
 * records should have been released before (no rename record names them). */
int tdax_files_move_below(struct tdax_device *dev, const char *from, const char *to, bool exchange);

/* A sync of the file succeeded (rt.synced), persistently. */
void tdax_file_set_synced(struct tdax_device *dev, struct tdax_file *f);

/* Recovery is making the file of entry f anew (a power cut undid its
 * creation): the new file's identity, persistently, before the file takes
 * its name (rt.remade). */
void tdax_file_set_remade(struct tdax_device *dev, struct tdax_file *f, const struct tdax_ident *id);

/* The file is gone (last link removed, records released): free the entry. */
void tdax_files_forget(struct tdax_device *dev, uint32_t idx, uint32_t gen);

/* Set the entry's removal state (rt.removed: 0, TDAX_REMOVING,
 * TDAX_REMOVED or TDAX_REPLACED), persistently: recovery reads it. */
void tdax_file_set_removed(struct tdax_device *dev, struct tdax_file *f, uint32_t v);

/* Mark records of (idx, gen) up to seq as released, persistently. */
void tdax_file_release(struct tdax_device *dev, uint32_t idx, uint32_t gen, uint64_t seq);

#endif
