/*
 * coherent -- coherent mode: write logging, sync decisions, the
 * checkpoint of a descriptor (real sync, then release).
 */
#define _GNU_SOURCE
#include "preload/coherent.h"
#include "core/log.h"
#include "preload/mapped.h"
#include "preload/landing.h"
#include "preload/lease.h"
#include "preload/mode.h"
#include "preload/tracking.h"
#include "preload/wake.h"
#include "core/recover.h"
#include "core/shadow.h"
#include "core/sys.h"
#include "core/testaid.h"
#include "core/trace.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


void tdax_coherent_uncover(uint32_t idx, enum tdax_fallback why)
{
	if (tdax_tracing)
		tdax_trace_event(TDAX_TR_META, idx, 0, 0, (uint16_t)why);
	atomic_fetch_add(&tdax_rt_of(idx)->uncovered, 1);
	tdax_fallback(why, tdax_file_at(tdax_rt.dev, idx)->path);
}

/* Log r bytes of iov at off; false if any part could not be logged. */
static bool log_iov(uint32_t idx, uint32_t gen, uint64_t off, const struct iovec *iov, int iovcnt, size_t r)
{
	struct tdax_device *dev = tdax_rt.dev;
	for (int i = 0; i < iovcnt && r > 0; i++) {
		const char *p = iov[i].iov_base;
		size_t n = iov[i].iov_len < r ? iov[i].iov_len : r;
		r -= n;
		while (n > 0) {
			uint32_t c = n < TDAX_COHERENT_CHUNK ? (uint32_t)n : TDAX_COHERENT_CHUNK;
			uint64_t seq;
			if (tdax_log_append(dev, idx, gen, off, p, c, &seq) != 0)
				return false;
			p += c;
			off += c;
			n -= c;
		}
	}
	return true;
}

void tdax_coherent_write_begin(const struct tdax_fd *e)
{
	/* (Sequentially consistent for landing.h's pending mark: the same
	 * locked add on x86.) */
	atomic_fetch_add(&tdax_rt_of(e->file_plus1 - 1)->inflight, 1);
}

void tdax_coherent_write_end(const struct tdax_fd *e)
{
	atomic_fetch_sub_explicit(&tdax_rt_of(e->file_plus1 - 1)->inflight, 1, memory_order_release);
}

void tdax_coherent_cold_begin(const struct tdax_fd *e)
{
	atomic_fetch_add(&tdax_rt_of(e->file_plus1 - 1)->cold_started, 1);
}

void tdax_coherent_cold_end(const struct tdax_fd *e)
{
	atomic_fetch_add_explicit(&tdax_rt_of(e->file_plus1 - 1)->cold_done, 1, memory_order_release);
}

struct tdax_cold_mark tdax_coherent_cold_look(const struct tdax_fd *e)
{
	const struct tdax_file_rt *rt = tdax_rt_of(e->file_plus1 - 1);
	uint64_t started = atomic_load(&rt->cold_started);
	return (struct tdax_cold_mark){ started, atomic_load(&rt->cold_done) };
}

bool tdax_coherent_cold_none_since(const struct tdax_fd *e, struct tdax_cold_mark m)
{
	return m.started == m.done && atomic_load(&tdax_rt_of(e->file_plus1 - 1)->cold_started) == m.started;
}

/* A record of idx was appended: the file has records from now on (their
 * age starts, the write-back thread of this process looks at it). */
static void has_records(uint32_t idx)
{
	/* A load first: a locked instruction right after the append's cache
	 * line flushes waits for them to finish (~150 ns here). */
	_Atomic uint64_t *first = &tdax_rt_of(idx)->first_log_ns;
	uint64_t zero = 0;
	if (!atomic_load_explicit(first, memory_order_relaxed))
		atomic_compare_exchange_strong(first, &zero, tdax_coarse_ns());
	tdax_rt.touched[idx] = 1;
	tdax_wake_want();
}

/* Log r bytes of iov at off as records of file (idx, gen) and count them.
 * The counts come first: a locked instruction right after the append's
 * cache-line flushes waits for them to finish (~150 ns on this machine, as
 * much as the append itself); they are taken back if the log could not
 * take the bytes. (has_records, after, loads first.) */
static bool log_counted(uint32_t idx, uint32_t gen, uint64_t off, const struct iovec *iov, int iovcnt,
			size_t r)
{
	_Atomic uint64_t *logged = &tdax_rt_of(idx)->logged_bytes;
	atomic_fetch_add_explicit(logged, r, memory_order_relaxed);
	tdax_count(TDAX_ST_LOGGED_WRITES, 1);
	tdax_count(TDAX_ST_LOGGED_BYTES, r);
	bool ok = log_iov(idx, gen, off, iov, iovcnt, r);
	has_records(idx); /* after: a checkpoint between would leave the record unlooked at */
	if (!ok) {
		atomic_fetch_sub_explicit(logged, r, memory_order_relaxed);
		tdax_count(TDAX_ST_LOGGED_WRITES, (uint64_t)-1);
		tdax_count(TDAX_ST_LOGGED_BYTES, (uint64_t)-r);
	}
	return ok;
}

void tdax_coherent_after_write(const struct tdax_fd *e, uint64_t off, const struct iovec *iov,
			       int iovcnt, size_t r, bool tracked)
{
	uint32_t idx = e->file_plus1 - 1;
	struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	struct tdax_file_rt *rt = &f->rt;
	if (f->gen != e->gen)
		return; /* the entry was freed (file unlinked): nothing to keep */
	enum tdax_fallback why = TDAX_FB_NONE;
	if (e->flags & TDAX_FD_NOLOG)
		why = TDAX_FB_DIRECT;
	else if (atomic_load_explicit(&rt->unmanaged, memory_order_relaxed))
		why = (enum tdax_fallback)atomic_load(&rt->unmanaged);
	else if (!iov || !(tracked ? tdax_tracking_logged(idx, e->gen, off, r)
				    : tdax_tracking_write(idx, e->gen, off, r)))
		why = TDAX_FB_NOT_UPGRADED; /* (no iov: off is an estimate, nothing to log) */
	else if (tdax_rt.big_write && r >= tdax_rt.big_write)
		why = TDAX_FB_BIG_WRITE; /* the dual path: the block path's, its sync real (coherent.h) */
	if (iov) /* (before the append, as the counts: see log_counted) */
		tdax_atomic_max(&rt->size_seen, off + r);
	bool logs = why == TDAX_FB_NONE;
#ifdef TDAX_TEST_BUILD
	if (logs && tdax_rt.test_lie) { /* positive control for the crash tests: claim coverage, log nothing */
		logs = false;
		tdax_count(TDAX_ST_LOGGED_WRITES, 1);
		has_records(idx);
	}
#endif
	if (logs && !log_counted(idx, e->gen, off, iov, iovcnt, r))
		why = TDAX_FB_LOG_FULL;
	if (tdax_tracing)
		tdax_trace_event(TDAX_TR_WRITE, idx, off, (uint32_t)r,
				 why != TDAX_FB_NONE && why != TDAX_FB_NOT_UPGRADED && why != TDAX_FB_LOG_FULL &&
				 why != TDAX_FB_BIG_WRITE);
	if (why != TDAX_FB_NONE) {
		atomic_fetch_add(&rt->uncovered, 1);
		tdax_count(TDAX_ST_UNLOGGED_WRITES, 1);
		if (why != TDAX_FB_NOT_UPGRADED)
			tdax_fallback(why, f->path);
	}
}

bool tdax_coherent_log_only(const struct tdax_fd *e, uint64_t off, const struct iovec *iov, int iovcnt,
			    size_t r)
{
	uint32_t idx = e->file_plus1 - 1;
	if (tdax_tracing)
		tdax_trace_event(TDAX_TR_WRITE, idx, off, (uint32_t)r, 0);
	return log_counted(idx, e->gen, off, iov, iovcnt, r);
}

/*
 * The bytes are in the page cache already (the mapping is the file's), so
 * a record of them is all a power cut needs; a later real sync of the file
 * (a checkpoint) releases it as any other. Only where the policy logs the
 * ranges: a record must not outlive its range's logging (SPEC 3.6).
 */
bool tdax_coherent_persist(uint32_t idx, uint32_t gen, uint64_t off, const void *p, size_t len)
{
	struct tdax_device *dev = tdax_rt.dev;
	struct tdax_file *f = tdax_file_at(dev, idx);
	struct tdax_file_rt *rt = &f->rt;
	if (f->gen != gen || atomic_load(&rt->unmanaged) || atomic_load(&rt->rewrite) ||
	    !tdax_tracking_logged(idx, gen, off, len))
		return false;
#ifdef TDAX_TEST_BUILD
	if (tdax_rt.test_lie)
		return true; /* positive control for the crash tests: claim it, log nothing */
#endif
	struct iovec iov = { (void *)p, len };
	if (tdax_tracing)
		tdax_trace_event(TDAX_TR_WRITE, idx, off, (uint32_t)len, 0);
	if (!log_counted(idx, gen, off, &iov, 1, len))
		return false;
	/* (The append drained its record: durable now.) */
	if (atomic_load(&tdax_rt.lost)) /* the region went away meanwhile (watch.h) */
		return false;
	if (__builtin_expect(!atomic_load_explicit(&rt->synced, memory_order_relaxed), 0))
		tdax_file_set_synced(dev, f); /* recovery may apply its records now */
	return true;
}

void tdax_coherent_unlogged(const struct tdax_fd *e, uint64_t off, size_t r, bool blind)
{
	uint32_t idx = e->file_plus1 - 1;
	if (tdax_tracing)
		tdax_trace_event(TDAX_TR_WRITE, idx, off, (uint32_t)r, blind);
	atomic_fetch_add(&tdax_rt_of(idx)->uncovered, 1);
	tdax_count(TDAX_ST_UNLOGGED_WRITES, 1);
}

/* Records worth keeping in order with a new one: the file has some, or all
 * its changes since the last real sync are logged. */
static bool keeps_order(const struct tdax_file_rt *rt)
{
	return atomic_load(&rt->first_log_ns) || atomic_load(&rt->rewrite) ||
	       (!atomic_load(&rt->uncovered) && !atomic_load(&rt->unmanaged));
}

struct tdax_meta_mark tdax_coherent_meta_look(uint32_t idx)
{
	const struct tdax_file_rt *rt = tdax_rt_of(idx);
	return (struct tdax_meta_mark){ atomic_load(&rt->inflight), atomic_load(&rt->logged_bytes) };
}

/* No logged write was in flight at the look, nor ran since: a record
 * appended now stands where the kernel's change does among the writes. */
static bool mark_holds(const struct tdax_file_rt *rt, struct tdax_meta_mark m)
{
	return m.inflight == 0 && atomic_load(&rt->inflight) == 0 &&
	       atomic_load(&rt->logged_bytes) == m.logged_bytes;
}

/* A metadata record of idx was appended (logged) after the kernel's change,
 * or could not be: the file stays covered only if it was, in order. */
static void kept_in_order(uint32_t idx, bool logged, enum tdax_stat counter, struct tdax_meta_mark m)
{
	if (logged) {
		has_records(idx);
		tdax_count(counter, 1);
		if (mark_holds(tdax_rt_of(idx), m))
			return;
	}
	tdax_coherent_uncover(idx, TDAX_FB_METADATA);
}

void tdax_coherent_truncated(uint32_t idx, uint32_t gen, uint64_t size, struct tdax_meta_mark m)
{
	struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	struct tdax_file_rt *rt = &f->rt;
	if (f->gen != gen)
		return; /* the entry was freed: nothing to keep */
	atomic_store(&rt->size_seen, size);
	uint64_t seq;
	kept_in_order(idx, keeps_order(rt) && tdax_log_truncate(tdax_rt.dev, idx, gen, size, &seq) == 0,
		      TDAX_ST_LOGGED_TRUNCATES, m);
}

void tdax_coherent_fallocated(int fd, uint32_t idx, uint32_t gen, int mode, uint64_t off, uint64_t len,
			      struct tdax_meta_mark m)
{
	struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	struct tdax_file_rt *rt = &f->rt;
	uint64_t size, seq;
	if (f->gen != gen)
		return; /* the entry was freed: nothing to keep */
	bool sized = tdax_file_size(fd, &size) == 0; /* a zeroed range may have grown it */
	if (sized)
		atomic_store(&rt->size_seen, size);
	kept_in_order(idx, sized && keeps_order(rt) &&
			   tdax_log_fallocate(tdax_rt.dev, idx, gen, mode, off, len, &seq) == 0,
		      TDAX_ST_LOGGED_FALLOCATES, m);
}

bool tdax_coherent_renamed(uint32_t idx, uint32_t gen, const char *from, const char *to)
{
	struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	uint64_t seq;
	/* Always, not only when the file keeps records in order (as a truncate
	 * is): a real sync of the file does not make a rename durable, so
	 * records logged after the next one still need the old name found. */
	if (f->gen != gen || tdax_log_rename(tdax_rt.dev, idx, gen, from, to, &seq) != 0)
		return false;
	has_records(idx);
	atomic_fetch_add(&f->rt.named, 1);
	tdax_count(TDAX_ST_LOGGED_RENAMES, 1);
	return true;
}

bool tdax_coherent_created(int fd, uint32_t idx, uint32_t gen, uint32_t mode)
{
	struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	/* Empty after the look: a logged write of another descriptor from
	 * here on either shows in the mark or comes after the record. */
	struct tdax_meta_mark m = tdax_coherent_meta_look(idx);
	uint64_t size, seq;
	if (tdax_file_size(fd, &size) != 0 || size != 0)
		return false;
	char path[TDAX_FILE_PATH_MAX];
	memcpy(path, f->path, sizeof(path)); /* a copy: a rename may rewrite it meanwhile */
	path[sizeof(path) - 1] = '\0';
	if (f->gen != gen || tdax_log_create(tdax_rt.dev, idx, gen, path, mode, &seq) != 0)
		return false;
	has_records(idx);
	atomic_fetch_add(&f->rt.named, 1);
	tdax_count(TDAX_ST_LOGGED_CREATES, 1);
	return mark_holds(&f->rt, m);
}

/*
 * Whatever changes the file meanwhile is left to the guards: the count of
 * uncovered changes is taken first (a join of another descriptor, an
 * unlogged write, a metadata change after it leaves the file uncovered),
 * and the mark (a logged write in flight or made meanwhile may be older
 * in the log than the bytes read back, which would then be replayed over
 * it). Any of them: the records stay, harmless (they hold what the file
 * held), and the sync is real.
 */
bool tdax_coherent_cover_made(int fd, uint32_t idx, uint32_t gen)
{
	struct tdax_device *dev = tdax_rt.dev;
	struct tdax_file *f = tdax_file_at(dev, idx);
	struct tdax_file_rt *rt = &f->rt;
	uint64_t unc = atomic_load(&rt->uncovered);
	struct tdax_meta_mark m = tdax_coherent_meta_look(idx);
	struct stat st;
	uint64_t seq;
	if (tdax_sys_fstat(fd, &st) != 0 || (uint64_t)st.st_size > TDAX_COHERENT_COVER_MAX)
		return false;
	char path[TDAX_FILE_PATH_MAX];
	memcpy(path, f->path, sizeof(path)); /* a copy: a rename may rewrite it meanwhile */
	path[sizeof(path) - 1] = '\0';
	if (f->gen != gen || tdax_log_create(dev, idx, gen, path, (uint32_t)st.st_mode & 07777, &seq) != 0)
		return false;
	has_records(idx);
	atomic_fetch_add(&rt->named, 1);
	tdax_count(TDAX_ST_LOGGED_CREATES, 1);
	uint64_t size = (uint64_t)st.st_size;
	char buf[4096];
	for (uint64_t off = 0; off < size;) {
		size_t want = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
		ssize_t n = tdax_sys_pread(fd, buf, want, (off_t)off);
		struct iovec iov = { buf, n > 0 ? (size_t)n : 0 };
		if (n <= 0 || !log_iov(idx, gen, off, &iov, 1, (size_t)n))
			return false; /* (shrunk meanwhile: a change of its own, uncovered) */
		off += (uint64_t)n;
	}
	atomic_store(&rt->size_seen, size);
	if (!mark_holds(rt, m))
		return false;
	atomic_fetch_add(&rt->logged_bytes, size); /* (after the mark: its own bytes are no change) */
	tdax_count(TDAX_ST_LOGGED_BYTES, size);
	return atomic_compare_exchange_strong(&rt->uncovered, &unc, 0);
}

void tdax_coherent_attrs_changed(uint32_t idx)
{
	if (tdax_tracing)
		tdax_trace_event(TDAX_TR_META, idx, 0, 0, TDAX_FB_METADATA);
	atomic_fetch_add(&tdax_rt_of(idx)->attrs_changed, 1);
}

/*
 * The kernel's copy after a failed sync cannot be trusted (Linux may have
 * marked the failed pages clean). If every change since the last real sync
 * is in the log, write the records again before syncing; otherwise the
 * only honest answer is the error, and the records stay.
 */
static int rewrite_after_error(int fd, uint32_t idx, uint32_t gen)
{
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	if (!atomic_load(&rt->rewrite))
		return 0;
	if (atomic_load(&rt->uncovered) != 0) {
		errno = EIO;
		return -1;
	}
	/* (The replay's writes and truncates move the file's end.) */
	tdax_landing_resize_begin();
	int rc = tdax_replay_file(tdax_rt.dev, idx, gen, fd);
	tdax_landing_resize_end();
	return rc;
}

#ifdef TDAX_TEST_BUILD
/* Test aid (src/core/testaid.h): TDAX_TEST_FAIL_SYNC=N makes the N-th real sync
 * tdax makes in this process fail with EIO, as a dying disk's would. */
static bool injected_sync_failure(void)
{
	static _Atomic long seen;
	const char *s = TDAX_TEST_ENV("FAIL_SYNC");
	return s && atomic_fetch_add(&seen, 1) + 1 == atol(s);
}
#endif

/* The real sync of a checkpoint. */
static int real_sync(int fd, bool datasync)
{
#ifdef TDAX_TEST_BUILD
	if (injected_sync_failure()) {
		errno = EIO;
		return -1;
	}
#endif
	return tdax_mode_real_sync(fd, datasync);
}

/*
 * A file the checkpoint covers again may have grown by writes tdax did not
 * log (a cold write's offset is an estimate, coherent_ops.c), and its next
 * sync may now be a lightweight one, which reads no size: the size tdax
 * saw catches up here, or the first append it logs after them would look
 * like another writer's (landing.h) and make the next sync real, saying
 * so on stderr (test_landing: writes through an O_DIRECT descriptor; a
 * 128 B append loop showed that warning once in ~40 runs, its cold appends
 * a possible way there).
 */
static void seen_again(int fd, struct tdax_file_rt *rt)
{
	uint64_t size;
	if (tdax_file_size(fd, &size) == 0)
		tdax_atomic_max(&rt->size_seen, size);
}

/* Take the snapshots before the sync: what was written before it is
 * covered by it; later writes keep their records and counts. The age and
 * size of what is logged are taken first, then the sequence number, so
 * that a record logged from here on starts them again (and is
 * checkpointed at its age, or at exit); they are given back if the sync
 * fails. */
void tdax_coherent_checkpoint_snap(uint32_t idx, struct tdax_checkpoint_snap *s)
{
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	s->first = atomic_exchange(&rt->first_log_ns, 0);
	s->bytes = atomic_exchange(&rt->logged_bytes, 0);
	s->unc = atomic_load(&rt->uncovered);
	s->attrs = atomic_load(&rt->attrs_changed);
	s->named = atomic_load(&rt->named);
	s->upto = atomic_load(tdax_rt.dev->seq);
}

int tdax_coherent_checkpoint_snapped(int fd, uint32_t idx, uint32_t gen, bool datasync,
				     const struct tdax_checkpoint_snap *s, bool promoted)
{
	struct tdax_device *dev = tdax_rt.dev;
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	const char *path = tdax_file_at(dev, idx)->path;
	int rc = promoted ? 0 : rewrite_after_error(fd, idx, gen);
	if (rc == 0) {
		/* (The test build's durable view: the file as the sync finds
		 * it, the records written in again included.) */
		tdax_shadow_before_sync(fd, path);
		rc = real_sync(fd, datasync);
	}
	/* A rename or create record goes with the others: the name must be
	 * durable first, or a record logged later could not be found after a
	 * crash. */
	if (rc == 0 && s->named && (rc = tdax_sync_parent_dir(path)) == 0)
		tdax_count(TDAX_ST_DIR_SYNCS, 1);
	if (rc != 0) {
		int e = errno;
		uint64_t cur = 0;
		while (s->first && (cur == 0 || cur > s->first) &&
		       !atomic_compare_exchange_weak(&rt->first_log_ns, &cur, s->first))
			;
		atomic_fetch_add(&rt->logged_bytes, s->bytes);
		tdax_rt.touched[idx] = 1; /* the write-back pass may have let it go meanwhile */
		atomic_store(&rt->rewrite, 1);
		tdax_count(TDAX_ST_SYNC_ERRORS, 1);
		errno = e;
		return -1;
	}
	/* Persisted before a lightweight sync can follow (recovery reads it). */
	if (!atomic_load(&rt->synced))
		tdax_file_set_synced(dev, tdax_file_at(dev, idx));
	uint64_t unc = s->unc;
	uint32_t attrs = s->attrs, named = s->named;
	if (atomic_compare_exchange_strong(&rt->uncovered, &unc, 0) && unc)
		seen_again(fd, rt);
	if (!datasync)
		atomic_compare_exchange_strong(&rt->attrs_changed, &attrs, 0);
	atomic_compare_exchange_strong(&rt->named, &named, 0);
	if (!promoted) /* (a promoted file's records stay its promoter's) */
		atomic_store(&rt->rewrite, 0);
	tdax_log_release(dev, idx, gen, s->upto);
	return 0;
}

bool tdax_coherent_is_file(int fd, uint32_t idx, uint32_t gen)
{
	const struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	struct tdax_ident now, was = tdax_file_ident(f);
	return f->gen == gen && tdax_ident_of_fd(fd, &now) == 0 && tdax_ident_same(&now, &was);
}

int tdax_coherent_checkpoint_fd(int fd, uint32_t idx, uint32_t gen, bool datasync)
{
	if (!tdax_coherent_is_file(fd, idx, gen))
		return tdax_mode_real_sync(fd, datasync);
	struct tdax_checkpoint_snap s;
	tdax_coherent_checkpoint_snap(idx, &s);
	return tdax_coherent_checkpoint_snapped(fd, idx, gen, datasync, &s, false);
}

/*
 * The guard: a file size tdax writers did not leave means a writer tdax did
 * not see. The size is read first: a tdax write that grew the file has
 * either updated size_seen by the time it leaves `inflight`, or is still in
 * flight (and the growth is its own; a cold write is in flight until its
 * `cold_done`, and one that is done has made the file uncovered). A write that starts and finishes
 * between the two reads moves size_seen: then look again.
 */
static bool size_explained(int fd, const struct tdax_file_rt *rt, uint64_t size)
{
	uint64_t prev = UINT64_MAX;
	for (int tries = 0; tries < 4; tries++) {
		if (tries > 0 && tdax_file_size(fd, &size) != 0)
			return false;
		if (atomic_load_explicit(&rt->inflight, memory_order_acquire) > 0 ||
		    atomic_load(&rt->cold_started) != atomic_load_explicit(&rt->cold_done, memory_order_acquire))
			return true;
		uint64_t seen = atomic_load(&rt->size_seen);
		if (size == seen)
			return true;
		if (seen == prev)
			return false; /* nothing tdax did explains it */
		prev = seen;
	}
	return false;
}

/*
 * The C library's own output streams, stdout and stderr, write through its
 * internal calls, which no hook sees (a stream made by fopen or fdopen is
 * the hooks', interpose.c): a file at the descriptor of one of them (a
 * redirection, a dup2 onto 1 or 2, a daemon's closed stream's number
 * reused) may hold bytes no record has, and no size tells of an
 * overwrite -- once the stream was used, which gave it its buffer (a
 * stream never written has none: a Go program's stdout, a server's whose
 * output goes elsewhere). Its syncs are the kernel's from then on, as for
 * any stdio stream. (struct _IO_FILE's fields are the C library's ABI:
 * its putc_unlocked macros read them.)
 */
static bool on_a_std_stream(const struct tdax_fd *e)
{
	FILE *const streams[] = { stdout, stderr };
	for (unsigned i = 0; i < sizeof(streams) / sizeof(streams[0]); i++) {
		const FILE *s = streams[i];
		if (!s || !__atomic_load_n(&s->_IO_buf_base, __ATOMIC_RELAXED))
			continue;
		const struct tdax_fd *at = tdax_fd_get(s->_fileno);
		if (at && at->dev == e->dev && at->ino == e->ino)
			return true;
	}
	return false;
}

int tdax_coherent_sync(int fd, const struct tdax_fd *e, bool datasync)
{
	uint32_t idx = e->file_plus1 - 1;
	struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	struct tdax_file_rt *rt = &f->rt;
	uint64_t size = 0;
	/* The only open of the file (lease.h): no writer tdax does not see,
	 * and the number still names what it was leased with. */
	bool sole = tdax_lease_sole(fd, e, rt);
	if (!sole && !tdax_fd_still(fd, e, &size)) {
		/* The number names another file now (closed and reused in a
		 * way tdax did not see): not ours to answer or to release. */
		tdax_fd_forget(fd);
		return tdax_mode_real_sync(fd, datasync);
	}
	if (f->gen != e->gen)
		return tdax_mode_real_sync(fd, datasync);
	if (__builtin_expect(on_a_std_stream(e), 0))
		tdax_coherent_kernel_only(idx, TDAX_FB_STDIO);
	tdax_tracking_sync(idx, e->gen);
	int err = atomic_exchange(&rt->wb_error, 0);
	if (err) {
		/* A background sync of this file failed: report it once, as the
		 * kernel would; the records stay until a sync succeeds. */
		tdax_count(TDAX_ST_SYNC_ERRORS, 1);
		errno = err;
		return -1;
	}
	if (atomic_load(&rt->uncovered) == 0 && !atomic_load(&rt->rewrite) &&
	    !atomic_load(&rt->unmanaged) && !(e->flags & TDAX_FD_NOLOG) &&
	    (datasync || !atomic_load(&rt->attrs_changed)) && !tdax_mapped_file(idx)) {
		if (sole || size_explained(fd, rt, size)) {
			tdax_drain(tdax_rt.dev, 0); /* every record was persisted when written */
			if (atomic_load(&tdax_rt.lost)) /* the region went away meanwhile (watch.h) */
				return tdax_mode_real_sync(fd, datasync);
			/* The first sync it answers, of a file whose creation
			 * is a record: recovery may make the file anew now. */
			if (__builtin_expect(!atomic_load_explicit(&rt->synced, memory_order_relaxed), 0))
				tdax_file_set_synced(tdax_rt.dev, f);
			tdax_count_sync(true);
			if (tdax_tracing)
				tdax_trace_event(TDAX_TR_SYNC, idx, 0, 0, datasync);
			if (!sole)
				tdax_lease_try(fd, rt);
			return 0;
		}
		tdax_fallback(TDAX_FB_UNSEEN_WRITE, f->path);
	}
	if (atomic_load(&rt->unmanaged) == TDAX_FB_MMAP) /* (told now: see tdax_coherent_kernel_only) */
		tdax_fallback_said(TDAX_FB_MMAP, f->path);
	tdax_count_sync(false);
	if (tdax_tracing)
		tdax_trace_event(TDAX_TR_SYNC, idx, 0, 0, (uint16_t)(datasync | TDAX_TRF_REAL));
	int rc = tdax_coherent_checkpoint_fd(fd, idx, e->gen, datasync);
	if (rc == 0 && tdax_file_size(fd, &size) == 0)
		atomic_store(&rt->size_seen, size);
	return rc;
}

/* The file goes to the kernel for good; true if this made it so. */
static bool kernel_only(uint32_t idx, enum tdax_fallback why)
{
	uint32_t none = 0;
	if (tdax_tracing)
		tdax_trace_event(TDAX_TR_META, idx, 0, 0, (uint16_t)why);
	return atomic_compare_exchange_strong(&tdax_rt_of(idx)->unmanaged, &none, (uint32_t)why);
}

void tdax_coherent_kernel_only(uint32_t idx, enum tdax_fallback why)
{
	if (!kernel_only(idx, why))
		return;
	/* A writable shared mapping is said at the file's first sync the
	 * kernel then takes (LMDB maps its lock file so and never syncs it:
	 * nothing to tell); counted now. */
	if (why == TDAX_FB_MMAP)
		tdax_count((enum tdax_stat)(TDAX_ST_FALLBACK0 + why), 1);
	else
		tdax_fallback(why, tdax_file_at(tdax_rt.dev, idx)->path);
}

void tdax_coherent_retire(uint32_t idx)
{
	kernel_only(idx, TDAX_FB_METADATA);
}

void tdax_coherent_unmanage(int fd, uint32_t idx, uint32_t gen, enum tdax_fallback why)
{
	tdax_coherent_kernel_only(idx, why);
	tdax_coherent_checkpoint_fd(fd, idx, gen, true);
}
