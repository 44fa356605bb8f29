/*
 * coherent -- coherent mode (SPEC §2, §3): the write path that copies
 * writes of upgraded ranges into the device log, the sync path that answers
 * with a fence when everything dirty is in the device, and checkpoints
 * (a real sync of the file, then release of its records).
 *
 * Invariant: a file's `uncovered` count is zero only if every change made
 * to it since its last successful real sync is held by live log records.
 * A sync is answered in the device only then, and only if no background
 * sync failed and the file's size is what tdax writers left it.
 */
#ifndef TDAX_COHERENT_H
#define TDAX_COHERENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "preload/fdtable.h"
#include "preload/state.h"

/* ---- entry points per operation (coherent_ops.c, mode.h) ---------- */

/* A write of iov (n entries) through managed fd at off, or at the file
 * position when off is -1; rwf: pwritev2's flags. Returns what the call
 * returns. */
ssize_t tdax_coherent_write(int fd, const struct tdax_fd *e, const struct iovec *iov, int n, off_t off,
			    int rwf);

/* ftruncate of a managed file: a record in the log (tdax_coherent_truncated);
 * fallocate: a hole or a zeroed range is a record too
 * (tdax_coherent_fallocated), an allocation that keeps the size changes
 * nothing tdax promises, and any other mode is checkpointed first where
 * records could be replayed over the result. */
int tdax_coherent_ftruncate(int fd, const struct tdax_fd *e, off_t len);
int tdax_coherent_fallocate(int fd, const struct tdax_fd *e, int mode, off_t off, off_t len);

/* The kernel changed the file's size or layout, or moved bytes into it
 * unseen (copy_file_range, sendfile, splice): the next sync is real. */
void tdax_coherent_changed(int fd, const struct tdax_fd *e, enum tdax_fallback why);

/* Coherent mode's table of entry points (mode.h). */
extern const struct tdax_mode_ops tdax_coherent_mode;

/* ---- the write and sync path (coherent.c) ---------------------------- */

/* Bracket a real write through a managed fd (the sync guard allows for
 * growth by writes in flight). */
void tdax_coherent_write_begin(const struct tdax_fd *e);
void tdax_coherent_write_end(const struct tdax_fd *e);

/* A real write through a managed fd put r bytes of iov at off: log them (or
 * mark the file uncovered). A write of TDAX_BIG_WRITE bytes or more is not
 * logged even where its range is (the size-aware dual path, RomeFS): its
 * bytes take the block path alone, the file is uncovered, and its next sync
 * is a checkpoint -- a real sync, after which every older record of the
 * file is released, so none is ever replayed over the big write's bytes;
 * syncs that cover only small writes stay lightweight. Call before
 * tdax_coherent_write_end. tracked:
 * the policy counted the write before it was made (tdax_tracking_write, at
 * where it was expected to land), so it is only asked whether the range is
 * logged. With iov NULL, off is only an estimate (a cold write): the file
 * is uncovered, nothing is logged. */
void tdax_coherent_after_write(const struct tdax_fd *e, uint64_t off, const struct iovec *iov,
			       int iovcnt, size_t r, bool tracked);

/* One record carries at most this much; larger writes become several. */
#define TDAX_COHERENT_CHUNK (256u << 10)

/* Log r bytes of iov at off as records of the file (entry e's) and count
 * them; no kernel write (bypass.h: a promoted file's write). False if the
 * log could not take all of them (a part may be logged). */
bool tdax_coherent_log_only(const struct tdax_fd *e, uint64_t off, const struct iovec *iov, int iovcnt,
			    size_t r);

/*
 * The first sync of a file the process made (O_CREAT, empty), registered
 * only now (policy always registers a file at its first sync, manage.c):
 * log its creation -- it was empty then -- and every byte it holds, read
 * back from the page cache, so that this sync is answered from the log as
 * the later ones are. Only a file of at most TDAX_COHERENT_COVER_MAX bytes
 * (a larger one's first sync is real: cheaper than copying it). True if
 * the file is covered now; false leaves it uncovered (its sync is real).
 */
bool tdax_coherent_cover_made(int fd, uint32_t idx, uint32_t gen);
#define TDAX_COHERENT_COVER_MAX (256u << 10)

/* Bytes p[0..len) of an explicit mapping (explicit.h) are at off of file
 * (idx, gen) in the page cache: log them, if every range under them is
 * logged, and make the records durable. True if they are durable in the
 * device now; false if not (the caller asks the kernel). */
bool tdax_coherent_persist(uint32_t idx, uint32_t gen, uint64_t off, const void *p, size_t len);

/* A write that is not logged reached the kernel: the file is uncovered. A
 * cold one (tdax_tracking_cold) put r bytes at off (at the file position:
 * an estimate); blind: one whose place tdax does not know (off, r: 0). */
void tdax_coherent_unlogged(const struct tdax_fd *e, uint64_t off, size_t r, bool blind);

/*
 * Cold writes: writes at the file position to a range that is not logged,
 * made without the file's position lock and without asking the kernel
 * where they landed (coherent_ops.c). They bracket the real write with
 * cold_begin/cold_end; a logged write at the file position, which reads its
 * offset back from the position, trusts it only if no cold write ran
 * between its look (before the write) and its read-back.
 */
struct tdax_cold_mark {
	uint64_t started, done;
};
void tdax_coherent_cold_begin(const struct tdax_fd *e);
void tdax_coherent_cold_end(const struct tdax_fd *e);
struct tdax_cold_mark tdax_coherent_cold_look(const struct tdax_fd *e);
bool tdax_coherent_cold_none_since(const struct tdax_fd *e, struct tdax_cold_mark m);

/*
 * A truncate is a record (TDAX_REC_TRUNCATE), replayed in order with the
 * writes: no checkpoint before it, and a file all of whose changes were
 * logged stays so. Look before the kernel's truncate, tell after it
 * succeeded (by descriptor or by name): if the file has records or is
 * covered, the truncate is logged, else (or if a logged write of another
 * thread raced it, so that the records' order may not be the kernel's, or
 * the log is full) the file is uncovered and its next sync is real.
 */
struct tdax_meta_mark {
	uint32_t inflight;
	uint64_t logged_bytes;
};
struct tdax_meta_mark tdax_coherent_meta_look(uint32_t idx);
void tdax_coherent_truncated(uint32_t idx, uint32_t gen, uint64_t size, struct tdax_meta_mark m);

/* A hole punched or a range zeroed (fallocate PUNCH_HOLE, ZERO_RANGE) in
 * the file open as fd, after the kernel's call succeeded: a record, kept
 * in order as a truncate is (the look before the call). */
void tdax_coherent_fallocated(int fd, uint32_t idx, uint32_t gen, int mode, uint64_t off, uint64_t len,
			      struct tdax_meta_mark m);

/* The file (idx, gen) was renamed from `from` to `to` (absolute): a rename
 * record holds both names, so that recovery finds the file under either,
 * whatever a crash kept (true); false if the caller must checkpoint
 * instead (the log is full, or the entry was let go). */
bool tdax_coherent_renamed(uint32_t idx, uint32_t gen, const char *from, const char *to);

/* The file open as fd (entry idx, gen, just made) was opened with
 * O_CREAT: if it is empty -- created by the open, or found so -- a create
 * record (name, permission bits) says so, and all its changes are logged
 * from here on: its first sync may be lightweight, and recovery makes the
 * file again if a power cut takes its name. True if so; false (not
 * empty, the log full, a logged write of another descriptor raced the
 * record) leaves the file's coverage to the caller. */
bool tdax_coherent_created(int fd, uint32_t idx, uint32_t gen, uint32_t mode);

/* The file's attributes changed (mode, owner, times, extended attributes):
 * the log holds none of it, so its next fsync is real (fdatasync, which
 * does not promise them, may stay lightweight). */
void tdax_coherent_attrs_changed(uint32_t idx);

/* fsync/fdatasync of a managed fd; returns what the call returns. */
int tdax_coherent_sync(int fd, const struct tdax_fd *e, bool datasync);

/* Real sync of the file open as fd, then release of its records. */
int tdax_coherent_checkpoint_fd(int fd, uint32_t idx, uint32_t gen, bool datasync);

/* Is fd the file of entry idx, generation gen? A sync of anything else
 * must not release that file's records. */
bool tdax_coherent_is_file(int fd, uint32_t idx, uint32_t gen);

/* tdax_coherent_checkpoint_fd in two steps, for a caller that must do
 * something between the snapshots and the sync (bypass mode's checkpoint
 * of a promoted file writes its dirty blocks in, promoted.c): snap takes
 * what the sync will cover; snapped syncs and releases, and with promoted
 * neither writes the records in again nor takes them from the promoter. */
struct tdax_checkpoint_snap {
	uint64_t first, bytes, unc, upto;
	uint32_t attrs, named;
};
void tdax_coherent_checkpoint_snap(uint32_t idx, struct tdax_checkpoint_snap *s);
int tdax_coherent_checkpoint_snapped(int fd, uint32_t idx, uint32_t gen, bool datasync,
				     const struct tdax_checkpoint_snap *s, bool promoted);

/* The next sync of the file must go to the kernel (metadata, unseen write). */
void tdax_coherent_uncover(uint32_t idx, enum tdax_fallback why);

/* The file goes to the kernel's sync path for good (its records stay
 * until its next real sync). */
void tdax_coherent_kernel_only(uint32_t idx, enum tdax_fallback why);

/* The same for a file whose removal tdax saw, its records let go: nothing
 * fell back (the application removed it), so no fallback is counted. */
void tdax_coherent_retire(uint32_t idx);

/* A write path tdax cannot follow reaches the file: checkpoint it and keep
 * it on the kernel path from now on. */
void tdax_coherent_unmanage(int fd, uint32_t idx, uint32_t gen, enum tdax_fallback why);

#endif
