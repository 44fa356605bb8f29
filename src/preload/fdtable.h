/*
 * fdtable -- the table of the process's file descriptors tdax manages, and
 * the descriptors tdax keeps open for itself. Which descriptors get an entry
 * is manage.h's choice; this file only keeps the table true.
 *
 * The table is indexed by descriptor number and trusted on the write path
 * without a system call, so it must never outlive the descriptor: every
 * way a number is closed or handed out again that tdax can see forgets the
 * entry (close, close_range, closefrom, dup2/dup3 over it, syscall(2), and
 * each call that makes a new descriptor). The sync path, which must not be
 * fooled at all, also checks the entry against the descriptor's inode.
 *
 * tdax's own descriptors (the trace, an O_DSYNC file's twin) live high,
 * close-on-exec, and are invisible to the application's close family: a
 * program that closes "every descriptor" keeps tdax working, and one that
 * dup2()s onto such a number gets it (tdax's moves out of the way first).
 */
#ifndef TDAX_FDTABLE_H
#define TDAX_FDTABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One managed file descriptor. */
enum {
	TDAX_FD_APPEND = 1, /* O_APPEND: the kernel chooses the offset */
	/* O_DSYNC, O_SYNC: written through the twin, then a data sync or a
	 * sync; in unregistered mode (no twin yet) the kernel syncs each
	 * write, and the first one registers the file (unregistered.c). */
	TDAX_FD_DSYNC = 2,
	TDAX_FD_SYNC = 4,
	TDAX_FD_NOLOG = 8,  /* O_DIRECT: writes bypass the page cache, never logged */
	/* Unregistered mode: the open made the file (O_CREAT, empty) and may
	 * read it back, so its first sync may log what it holds (coherent.h:
	 * tdax_coherent_cover_made). */
	TDAX_FD_MADE = 16,
};
/* file_plus1 of a descriptor whose file has no entry yet (unregistered.h);
 * its gen is then the device's count of registrations at the last look. */
#define TDAX_FD_UNREGISTERED UINT32_MAX
struct tdax_fd {
	uint32_t file_plus1; /* file table index + 1; 0 = not managed */
	uint32_t gen;
	uint16_t flags;      /* TDAX_FD_* */
	uint8_t mode;        /* the file's mode: enum tdax_mode (mode.h) */
	uint8_t guarded;     /* lease.h: its syncs through the guard, up to TDAX_LEASE_AFTER_SYNCS */
	uint32_t twin_plus1; /* O_SYNC/O_DSYNC: tdax's own descriptor of the file without them */
	uint64_t dev, ino;   /* what the descriptor was when it was managed (st_dev, st_ino) */
	/* Where this descriptor's next write at the file position probably
	 * lands: the end of its last write, or where lseek() put it. Only the
	 * policy's estimate (coherent_ops.c): never the offset of a record. */
	_Atomic uint64_t pos;
	/* Unregistered mode: when this descriptor last synced (coarse ns). */
	_Atomic uint64_t synced_ns;
	/* lease.h: the lease epoch this process opened it in (0: it may never
	 * be leased), the lease's state, when a look last found it held and
	 * when the next attempt may be (coarse clock, in ms: the entry stays
	 * 64 bytes, one cache line). */
	_Atomic uint32_t opened_in;
	_Atomic uint32_t lease;
	_Atomic uint32_t lease_seen_ms;
	_Atomic uint32_t lease_retry_ms;
};
_Static_assert(sizeof(struct tdax_fd) == 64, "a descriptor's entry is one cache line");
/* TDAX_LEASE_NEVER: refused for good (not the file's owner, a file
 * system without leases). */
enum { TDAX_LEASE_NONE = 0, TDAX_LEASE_TAKING, TDAX_LEASE_HELD, TDAX_LEASE_NEVER };

#define TDAX_MAX_FDS 65536

extern struct tdax_fd *tdax_fds; /* TDAX_MAX_FDS entries; NULL while tdax is off */
/* Files promoted in this process now (bypass.h): while 0, no hook and no
 * lease break looks for one. */
extern _Atomic uint32_t tdax_fds_promoted;

static inline const struct tdax_fd *tdax_fd_get(int fd)
{
	if (fd < 0 || fd >= TDAX_MAX_FDS || !tdax_fds || !tdax_fds[fd].file_plus1)
		return NULL;
	return &tdax_fds[fd];
}

/* Allocate the table (at start-up); -1 if it cannot be had. */
int tdax_fdtable_init(void);

/* The number fd no longer names what the entry says (closed, reused). */
void tdax_fd_forget(int fd);
/* The process holds file entry idx once more (a descriptor, or a moment's
 * hold while a descriptor is managed again); unhold lets the entry go at
 * the last hold if it keeps nothing (tdax_files_let_go), after the policy
 * kept what it learned of a synced file for its name (tdax_tracking_closed). */
void tdax_fd_hold(uint32_t idx);
void tdax_fd_unhold(uint32_t idx, uint32_t gen);

/* fd gets an entry; the highest number that ever had one (scans stop
 * there: the table is TDAX_MAX_FDS long, a process uses its first few). */
void tdax_fd_used(int fd);
int tdax_fd_hiwater(void);

/* The lowest number from `from` on whose entry names file (dev, ino),
 * registered or not; -1 if none. */
int tdax_fd_naming(uint64_t dev, uint64_t ino, int from);

/* Numbers first..last (inclusive) are closed. */
void tdax_fd_forget_range(unsigned first, unsigned last);

/* Does fd still name the file its entry was made for? One statx; size is
 * filled in on the way (the sync guard needs it). */
bool tdax_fd_still(int fd, const struct tdax_fd *e, uint64_t *size);

/* ---- tdax's own descriptors ----------------------------------------- */

/* Move *fdp out of the application's way (high, close-on-exec) and keep it
 * there: *fdp is updated if it has to move again. -1 if it could not be
 * kept (the descriptor is then closed). */
int tdax_ownfd_keep(int *fdp);
/* Close a kept descriptor and forget it. */
void tdax_ownfd_close(int *fdp);
extern _Atomic uint64_t tdax_own_bits[TDAX_MAX_FDS / 64]; /* a bit per number of tdax's */
static inline bool tdax_ownfd_is(int fd)
{
	return fd >= 0 && fd < TDAX_MAX_FDS &&
	       (atomic_load_explicit(&tdax_own_bits[fd / 64], memory_order_relaxed) >> (fd % 64) & 1);
}
/* The application dup2()s onto fd: if it is tdax's, move tdax's away. */
void tdax_ownfd_evict(int fd);
/* Close first..last (inclusive) for the application, tdax's own excepted:
 * the real close_range on the parts between them. Async-signal-safe. */
int tdax_ownfd_close_range(unsigned first, unsigned last, int flags);

/* For the write-back thread: a descriptor table of its own, holding none
 * of the application's descriptors and none of the twins. The files it
 * opens for checkpoints then never take a number the application's open()
 * expects or its dup2() targets; without unshare(2) it shares as before. */
void tdax_fdtable_unshare(void);
/* (tdax_fds_private, state.h, then says so for this thread.) */

/*
 * Twins. O_SYNC and O_DSYNC stay on the application's descriptor, so that
 * it is synchronous wherever it goes (across exec, to a child without
 * tdax, over a Unix socket). tdax writes through a twin: the same file
 * opened again without them, kept as one of its own; the sync that makes
 * the write complete is then tdax's (a fence when the write is logged).
 * Entries of duplicated descriptors share their twin.
 */
/* Open fd's twin (flags: fd's open flags); its slot + 1, or 0 if it
 * cannot be had (the kernel then syncs every write itself). */
int tdax_twin_open(int fd, int flags);
int tdax_twin_fd(uint32_t twin_plus1);
void tdax_twin_ref(uint32_t twin_plus1);
void tdax_twin_unref(uint32_t twin_plus1);

#endif
