/*
 * tracking -- the runtime side of the policy (policy/track.h): tracking
 * of writes and syncs, and the jobs that carry out the decisions. An upgrade job has nothing to move (the page cache stays
 * coherent; writes are logged from now on). A downgrade job checkpoints the
 * file before the range stops being logged (SPEC §3.6).
 */
#define _GNU_SOURCE
#include "preload/tracking.h"
#include "core/control.h"
#include "core/ranges.h"
#include "core/sys.h"
#include "policy/track.h"
#include "preload/state.h"
#include "preload/wake.h"

/* Does the policy track writes and syncs (thesis, adaptive)? */
static bool tracks(void)
{
	return tdax_rt.policy == TDAX_POLICY_THESIS || tdax_rt.policy == TDAX_POLICY_ADAPTIVE;
}

/* The share of the log in use (%), as of the last write-back pass: the
 * adaptive policy raises its thresholds as the device fills. */
static _Atomic uint32_t fill_pct;

void tdax_tracking_fill(uint32_t pct)
{
	atomic_store_explicit(&fill_pct, pct, memory_order_relaxed);
}

/*
 * The reserve for explicit mappings (thesis section 7.2): past
 * 100 - TDAX_EXPLICIT_RESERVE_PCT % of the log in use (as of the last
 * write-back pass) no transparent upgrade is decided or carried -- pinned
 * ranges (tdax_tracking_pin) are upgraded whatever the fill.
 */
static bool reserved(void)
{
	return atomic_load_explicit(&fill_pct, memory_order_relaxed) + tdax_rt.reserve_pct >= 100;
}

/* The tunables range r is decided on: the device's, or under the adaptive
 * policy its own (policy/track.h). */
static const struct tdax_tunables *decided_on(const struct tdax_range *r, const struct tdax_tunables *t,
					      uint64_t now, struct tdax_tunables *own)
{
	if (tdax_rt.policy != TDAX_POLICY_ADAPTIVE)
		return t;
	tdax_track_adapt(&r->t, t, now, atomic_load_explicit(&fill_pct, memory_order_relaxed), own);
	return own;
}

static void note_dirty(struct tdax_file_rt *rt, uint32_t slot)
{
	uint32_t v = slot + 1;
	for (int i = 0; i < TDAX_FILE_DIRTY_SLOTS; i++)
		if (atomic_load_explicit(&rt->dirty_ranges[i], memory_order_relaxed) == v)
			return;
	for (int i = 0; i < TDAX_FILE_DIRTY_SLOTS; i++) {
		uint32_t empty = 0;
		if (atomic_compare_exchange_strong(&rt->dirty_ranges[i], &empty, v) || empty == v)
			return;
	}
	atomic_store(&rt->dirty_overflow, 1);
}

/*
 * Range r of file (idx, gen), made if new. A full range table (its slots
 * held by files that are gone, whose entries nothing freed: a directory
 * removed without tdax) would leave every new range on the kernel's path
 * for good: then the entries of gone files are freed, at most once a
 * second in a process, and the range asked for again.
 */
static struct tdax_range *range_made(uint32_t idx, uint32_t gen, uint32_t rno)
{
	static _Atomic uint64_t reclaimed_ns;
	struct tdax_range *r = tdax_ranges_get(tdax_rt.dev, idx, gen, rno, true);
	if (r)
		return r;
	uint64_t now = tdax_coarse_ns(), last = atomic_load_explicit(&reclaimed_ns, memory_order_relaxed);
	if ((last && now - last < 1000000000ull) ||
	    !atomic_compare_exchange_strong(&reclaimed_ns, &last, now) ||
	    !tdax_files_reclaim_gone(tdax_rt.dev))
		return NULL;
	return tdax_ranges_get(tdax_rt.dev, idx, gen, rno, true);
}

/* Upgrade-ahead (policy/track.h): an append over range rno's carry page,
 * pages [p0, p1] of it, hands the range's state to range rno + 1. */
static void carry(uint32_t idx, uint32_t gen, const struct tdax_range *r, uint32_t rno, uint32_t g,
		  uint64_t p0, uint64_t p1, const struct tdax_tunables *t, uint64_t now)
{
	uint64_t at = tdax_track_carry_page(g);
	if (p0 > at || p1 < at || rno == UINT32_MAX ||
	    atomic_load_explicit(&r->t.state, memory_order_relaxed) != TDAX_R_UPGRADED || reserved())
		return;
	struct tdax_range *next = range_made(idx, gen, rno + 1);
	if (next && tdax_track_carry(&r->t, &next->t, t, now))
		tdax_wake();
}

static uint32_t slot_of(const struct tdax_range *r)
{
	const struct tdax_device *dev = tdax_rt.dev;
	return (uint32_t)(((const char *)r - (dev->base + dev->sb->ranges_off)) / TDAX_RANGE_ENTRY_SIZE);
}

static uint64_t key_of(uint32_t idx, uint64_t rno)
{
	return (uint64_t)(idx + 1) << 32 | (uint32_t)rno;
}

/*
 * This thread's batch: the range its last writes went to, found again
 * without a look in the range table while its writes stay in it, and the
 * policy's counts of those writes, added to the range at once -- when the
 * thread writes elsewhere, when the window's bucket the batch began in
 * ends, after BATCH_WRITES writes, and first thing at a sync by this
 * thread (a write would otherwise cost a table look, the tunables' copy
 * and three locked instructions on the range's line). A sync by another
 * thread or process sees a batch's writes late, by BATCH_WRITES writes or
 * one bucket (1/8 of the write window) at most, and counts them at its
 * next sync: the counts of a heuristic, whose sums over the windows stay
 * (a writer thread with a syncer thread is upgraded after ~20 syncs where
 * it took ~5). The simulator counts each write at once. Which writes are
 * logged does not depend on the batch: the range's state is read at every
 * write.
 */
#define BATCH_WRITES 16

static __thread struct {
	struct tdax_range *r; /* NULL: no batch */
	uint64_t key;         /* r's key and its file's generation when taken */
	uint32_t fgen;
	uint32_t writes;      /* in the batch */
	uint32_t pages, dirty; /* their counts, not in r yet */
	uint64_t at, until;   /* when it began; when its bucket ends */
	int busy;             /* in use by this thread (a signal handler's write goes around) */
} cur TDAX_TLS;

static bool is_cur(uint32_t idx, uint32_t gen, uint64_t rno)
{
	return cur.r && cur.key == key_of(idx, rno) && cur.fgen == gen &&
	       atomic_load_explicit(&cur.r->key, memory_order_relaxed) == cur.key &&
	       atomic_load_explicit(&cur.r->fgen, memory_order_relaxed) == gen;
}

/* Add the batch's counts to its range, and begin the next batch (of the
 * same range) at now; t: the tunables. */
static void flush(uint64_t now, const struct tdax_tunables *t)
{
	struct tdax_range *r = cur.r;
	/* Late for its bucket (the thread wrote nothing since): counted now,
	 * never into a bucket the window has reused. */
	if (r && cur.writes && atomic_load_explicit(&r->key, memory_order_relaxed) == cur.key &&
	    atomic_load_explicit(&r->fgen, memory_order_relaxed) == cur.fgen)
		tdax_track_count(&r->t, t, now < cur.until ? cur.at : now, cur.pages, cur.dirty);
	uint64_t width = t->wr_window_ns / TDAX_WIN_BUCKETS ? t->wr_window_ns / TDAX_WIN_BUCKETS : 1;
	cur.writes = cur.pages = cur.dirty = 0;
	cur.at = now;
	cur.until = (now / width + 1) * width;
}

/* Range rno of the file, in this thread's batch: the one going on (same:
 * is_cur), or a new one (the old one added to its range). NULL if the
 * table is full.
 * The clock is read for a batch's first write and every 4th after (a read
 * cost a cold write 1 % of its time): a batch runs 3 writes past its
 * bucket at most. */
static struct tdax_range *batch_for(uint32_t idx, uint32_t gen, uint64_t rno, bool same)
{
	if (same && cur.writes < BATCH_WRITES && ((cur.writes & 3) || tdax_coarse_ns() < cur.until))
		return cur.r;
	uint64_t now = tdax_coarse_ns();
	struct tdax_tunables t;
	tdax_control_get(tdax_rt.dev, &t);
	flush(now, &t);
	if (same)
		return cur.r;
	cur.r = range_made(idx, gen, (uint32_t)rno);
	cur.key = key_of(idx, rno);
	cur.fgen = gen;
	return cur.r;
}

/* Does a write at off, of pages [first, last] of a file of ranges of 2^g
 * pages, go into this thread's batch? Not if it spans ranges, if the
 * policy may carry its range on (an append over its carry page), or if it
 * comes from a signal handler amid a batch. */
static bool batched(const struct tdax_file_rt *rt, uint32_t g, uint64_t off, uint64_t first,
		    uint64_t last)
{
	if (first >> g != last >> g || cur.busy)
		return false;
	if (tdax_rt.policy != TDAX_POLICY_ADAPTIVE)
		return true;
	uint64_t at = (first >> g << g) + tdax_track_carry_page(g);
	return !(first <= at && at <= last &&
		 off >= atomic_load_explicit(&rt->size_seen, memory_order_relaxed));
}

enum batched { AROUND, COLD, LOGGED };

/* Are writes to r logged now (as far as the policy goes)? */
static bool logs(const struct tdax_range *r)
{
	return tdax_range_logged(atomic_load_explicit(&r->t.state, memory_order_relaxed)) &&
	       tdax_rt.policy != TDAX_POLICY_NEVER;
}

/* A write of len bytes at off, counted in this thread's batch if it goes
 * there: COLD or LOGGED, as its range is; AROUND if it does not (nothing
 * counted). With cold_only, a write to a logged range is not counted
 * either (AROUND). */
static enum batched batch_write(uint32_t idx, uint32_t gen, uint64_t off, size_t len, bool cold_only)
{
	const struct tdax_file_rt *rt = tdax_rt_of(idx);
	uint64_t first = off >> TDAX_PAGE_SHIFT, last = (off + len - 1) >> TDAX_PAGE_SHIFT;
	uint32_t g = tdax_file_gran(rt); /* G + 1; 0: the file's first tracked write */
	if (!g || !batched(rt, g - 1, off, first, last))
		return AROUND;
	g--;
	bool same = is_cur(idx, gen, first >> g);
	if (cold_only && same && logs(cur.r))
		return AROUND; /* a logged write's look, made cheap */
	cur.busy = 1;
	enum batched b = AROUND;
	struct tdax_range *r = batch_for(idx, gen, first >> g, same);
	if (r) {
		b = logs(r) ? LOGGED : COLD;
		if (b == COLD || !cold_only) {
			uint64_t base = first >> g << g;
			cur.writes++;
			cur.pages += (uint32_t)(last - first + 1);
			cur.dirty += tdax_track_fresh(&r->t, first - base, last - first + 1);
			/* At once: a sync visits only the ranges noted (and
			 * moves the range's last page back, for the next
			 * write's fresh pages), whoever makes it. */
			note_dirty(tdax_rt_of(idx), slot_of(r));
		} else {
			b = AROUND;
		}
	}
	cur.busy = 0;
	return b;
}

bool tdax_tracking_cold(uint32_t idx, uint32_t gen, uint64_t off, size_t len)
{
	return tdax_rt.policy != TDAX_POLICY_ALWAYS && len && batch_write(idx, gen, off, len, true) == COLD;
}

bool tdax_tracking_write(uint32_t idx, uint32_t gen, uint64_t off, size_t len)
{
	if (tdax_rt.policy == TDAX_POLICY_ALWAYS)
		return true;
	if (len == 0)
		return false;
	enum batched b = batch_write(idx, gen, off, len, false);
	if (b != AROUND)
		return b == LOGGED;
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	uint64_t first = off >> TDAX_PAGE_SHIFT, last = (off + len - 1) >> TDAX_PAGE_SHIFT;
	uint64_t now = tdax_coarse_ns();
	/* Around the batch (or the file's first tracked write). */
	struct tdax_device *dev = tdax_rt.dev;
	struct tdax_tunables t;
	tdax_control_get(dev, &t);
	if (!cur.busy)
		flush(now, &t);
	uint32_t g = tdax_ranges_gran(rt, &t);
	bool logged = true;
	/* At the end the file had: its size is raised after this look. */
	bool appends = tdax_rt.policy == TDAX_POLICY_ADAPTIVE &&
		       off >= atomic_load_explicit(&rt->size_seen, memory_order_relaxed);
	for (uint64_t rno = first >> g; rno <= last >> g; rno++) {
		struct tdax_range *r = range_made(idx, gen, (uint32_t)rno);
		if (!r) {
			logged = false; /* the table is full: this range stays with the kernel */
			continue;
		}
		uint64_t base = rno << g, p0 = first > base ? first : base;
		uint64_t end = ((rno + 1) << g) - 1, p1 = last < end ? last : end;
		tdax_track_write(&r->t, &t, now, p0 - base, p1 - p0 + 1);
		note_dirty(rt, slot_of(r));
		if (appends)
			carry(idx, gen, r, (uint32_t)rno, g, p0 - base, p1 - base, &t, now);
		logged &= logs(r);
	}
	return logged;
}

bool tdax_tracking_logged(uint32_t idx, uint32_t gen, uint64_t off, size_t len)
{
	if (!tracks())
		return tdax_rt.policy == TDAX_POLICY_ALWAYS;
	uint32_t g = tdax_file_gran(tdax_rt_of(idx));
	if (!g || len == 0)
		return false; /* not tracked yet: nothing of it is upgraded */
	g--;
	uint64_t first = off >> TDAX_PAGE_SHIFT, last = (off + len - 1) >> TDAX_PAGE_SHIFT;
	if (first >> g == last >> g && !cur.busy && is_cur(idx, gen, first >> g))
		return tdax_range_logged(atomic_load_explicit(&cur.r->t.state, memory_order_relaxed));
	for (uint64_t rno = first >> g; rno <= last >> g; rno++) {
		struct tdax_range *r = tdax_ranges_get(tdax_rt.dev, idx, gen, (uint32_t)rno, false);
		if (!r || !tdax_range_logged(atomic_load_explicit(&r->t.state, memory_order_relaxed)))
			return false;
	}
	return true;
}

/*
 * What the policy knew of a file that went (its first range's counts and
 * last sync), kept a while under a key, in a few slots per process: the
 * writeback window, as a stream is. Two such memories:
 *
 * Heirs (policy/track.h): the names whose file was removed after a sync,
 * for a new file at the same name. Per process (a journal is made and
 * removed by the process that uses it), keyed by the name as the
 * application gave it (a name that happens to match another's costs logged
 * writes, never a byte).
 *
 * Departed files: a file synced once and closed has its entry let go at
 * its close (files.h: one sync is no stream), before an unlink could find
 * it -- SQLite's rollback journal under synchronous=NORMAL is created,
 * written, synced once, closed and unlinked in every transaction, and no
 * journal would ever leave an heir. So the last close of a synced file
 * keeps its legacy, keyed by inode number, for an unlink of that inode
 * within the window to leave to its name. The number alone (the entry's
 * device is a file system id, not a stat's st_dev): a file of another file
 * system that matches costs logged writes, never a byte.
 */
static void caught_up(uint32_t idx, uint32_t gen); /* (the held syncs, below) */

struct memory {
	_Atomic uint64_t key; /* 0: free */
	struct tdax_track_legacy legacy;
	uint64_t last_sync_ns;
};
struct memories {
	struct memory *slot;
	uint32_t n;
	_Atomic uint32_t next;
	/* The latest last_sync_ns of any slot: none is in its window after
	 * the window of this one, so a key is not even made. */
	_Atomic uint64_t latest_ns;
};
static struct memory heir_slots[8], departed_slots[4];
static struct memories heirs = { heir_slots, 8, 0, 0 }, departed = { departed_slots, 4, 0, 0 };

static void keep(struct memories *m, uint64_t key, const struct tdax_track_legacy *legacy, uint64_t last_sync_ns)
{
	struct memory *s = &m->slot[atomic_fetch_add(&m->next, 1) % m->n];
	atomic_store(&s->key, 0); /* (two threads at one slot: the last one's, or none) */
	s->legacy = *legacy;
	s->last_sync_ns = last_sync_ns;
	uint64_t latest = atomic_load(&m->latest_ns);
	while (latest < last_sync_ns && !atomic_compare_exchange_weak(&m->latest_ns, &latest, last_sync_ns))
		;
	atomic_store(&s->key, key);
}

/* Is any slot of m in its window at now? */
static bool recent(struct memories *m, uint64_t now)
{
	uint64_t latest = atomic_load_explicit(&m->latest_ns, memory_order_relaxed);
	return latest && tdax_tracking_stream(latest, now);
}

/* The slot of key, if its file synced within the window. */
static struct memory *recall(struct memories *m, uint64_t key, uint64_t now)
{
	for (uint32_t i = 0; i < m->n; i++)
		if (atomic_load(&m->slot[i].key) == key && tdax_tracking_stream(m->slot[i].last_sync_ns, now))
			return &m->slot[i];
	return NULL;
}

/* What the policy knew of (idx, gen): its first range's counts, or none
 * (no range yet: its syncs alone). */
static void legacy_of(uint32_t idx, uint32_t gen, struct tdax_track_legacy *out)
{
	struct tdax_range *r = tdax_ranges_get(tdax_rt.dev, idx, gen, 0, false);
	struct tdax_tunables t;
	tdax_control_get(tdax_rt.dev, &t);
	*out = (struct tdax_track_legacy){ 0, 0, 0, false };
	if (r)
		tdax_track_bequeath(&r->t, &t, tdax_coarse_ns(), out);
}

void tdax_tracking_removed(uint32_t idx, uint32_t gen, const char *name)
{
	caught_up(idx, gen);
	uint64_t last = atomic_load(&tdax_rt_of(idx)->last_sync_ns);
	if (!tracks() || !last)
		return;
	struct tdax_track_legacy legacy;
	legacy_of(idx, gen, &legacy);
	keep(&heirs, tdax_name_hash(name), &legacy, last);
}

void tdax_tracking_closed(uint32_t idx, uint32_t gen)
{
	caught_up(idx, gen);
	const struct tdax_file_rt *rt = tdax_rt_of(idx);
	uint64_t last = atomic_load(&rt->last_sync_ns);
	/* A stream's entry stays (files.h): its unlink finds it. */
	if (!tracks() || !last || atomic_load(&rt->streamed))
		return;
	const struct tdax_file *f = tdax_file_at(tdax_rt.dev, idx);
	uint64_t ino = f->ino;
	struct tdax_track_legacy legacy;
	legacy_of(idx, gen, &legacy);
	if (f->gen == gen && ino)
		keep(&departed, ino, &legacy, last);
}

void tdax_tracking_closed_unregistered(uint64_t ino, uint64_t synced_ns)
{
	static const struct tdax_track_legacy none = { 0, 0, 0, false }; /* its syncs alone */
	if (tracks() && synced_ns && ino)
		keep(&departed, ino, &none, synced_ns);
}

void tdax_tracking_unlinked(int dirfd, const char *path)
{
	uint64_t now = tdax_coarse_ns();
	struct stat st;
	if (!tracks() || !recent(&departed, now) ||
	    tdax_sys_fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
		return;
	struct memory *d = recall(&departed, st.st_ino, now);
	if (!d)
		return;
	struct tdax_track_legacy legacy = d->legacy;
	uint64_t last = d->last_sync_ns;
	atomic_store(&d->key, 0); /* one heir per removal */
	keep(&heirs, tdax_name_hash(path), &legacy, last);
}

/* The heir slot of name, if its predecessor synced within the window. */
static struct memory *heir_of(const char *name, uint64_t now)
{
	return recent(&heirs, now) ? recall(&heirs, tdax_name_hash(name), now) : NULL;
}

enum tdax_heir tdax_tracking_heir(const char *name)
{
	const struct memory *h = tracks() ? heir_of(name, tdax_coarse_ns()) : NULL;
	return !h ? TDAX_HEIR_NONE : h->legacy.upgraded ? TDAX_HEIR_UPGRADED : TDAX_HEIR_COLD;
}

void tdax_tracking_inherit(uint32_t idx, uint32_t gen, const char *name)
{
	uint64_t now = tdax_coarse_ns();
	struct memory *h = tracks() ? heir_of(name, now) : NULL;
	if (!h)
		return;
	struct tdax_tunables t;
	tdax_control_get(tdax_rt.dev, &t);
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	struct tdax_track_legacy legacy = h->legacy;
	uint64_t last = h->last_sync_ns;
	atomic_store(&h->key, 0); /* one heir per removal */
	tdax_ranges_gran(rt, &t);
	struct tdax_range *r = range_made(idx, gen, 0);
	if (!r)
		return;
	/* Its stream goes on: a first sync within the window of the removed
	 * file's last one counts its writebacks. */
	uint64_t none = 0;
	atomic_compare_exchange_strong(&rt->last_sync_ns, &none, last);
	atomic_store(&rt->streamed, 1);
	if (tdax_track_inherit(&r->t, &legacy, &t, now))
		tdax_count(TDAX_ST_UPGRADES, 1);
}

static bool belongs(const struct tdax_range *r, uint32_t idx, uint32_t gen)
{
	uint64_t k = atomic_load(&r->key);
	return k && (uint32_t)(k >> 32) == idx + 1 && atomic_load(&r->fgen) == gen;
}

/* A sync at now after one at prev (0: none) within the writeback window. */
static bool within_window(uint64_t prev, uint64_t now, const struct tdax_tunables *t)
{
	return prev && tdax_age_ns(now, prev) <= t->wb_window_ns;
}

bool tdax_tracking_stream(uint64_t prev, uint64_t now)
{
	struct tdax_tunables t;
	tdax_control_get(tdax_rt.dev, &t);
	return within_window(prev, now, &t);
}

/* Is r pinned by a live process (an explicit mapping)? A dead one's pin
 * goes. */
static bool pinned(struct tdax_range *r)
{
	uint32_t pid = atomic_load_explicit(&r->pin_pid, memory_order_relaxed);
	if (!pid)
		return false;
	if (tdax_pid_alive(pid))
		return true;
	atomic_compare_exchange_strong(&r->pin_pid, &pid, 0);
	return false;
}

/* A sync of r's file at now: counted, decided, and a decision's job woken
 * (a downgrade of a pinned range is taken back, and an upgrade into the
 * reserve for explicit mappings). */
static void synced(struct tdax_range *r, const struct tdax_tunables *t, uint64_t now, bool stream, uint32_t n)
{
	struct tdax_tunables own;
	enum tdax_decision d = tdax_track_syncs(&r->t, decided_on(r, t, now, &own), now, stream, n);
	if (d == TDAX_DOWNGRADE && pinned(r))
		tdax_track_pin(&r->t);
	else if (d == TDAX_UPGRADE && reserved() && !pinned(r) && tdax_track_unmark(&r->t))
		tdax_count(TDAX_ST_UPGRADES_RESERVED, 1);
	else if (d != TDAX_KEEP)
		tdax_wake();
}

/* n syncs of file (idx, gen), the first at first, the last at now (t: the
 * tunables): counted and decided on each range they found dirty. */
static void syncs(uint32_t idx, uint32_t gen, const struct tdax_tunables *t, uint64_t first, uint64_t now,
		  uint32_t n)
{
	struct tdax_device *dev = tdax_rt.dev;
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	uint64_t prev = atomic_exchange(&rt->last_sync_ns, now);
	/* A stream: the previous sync, or the first of these, within the
	 * writeback window of the last. */
	bool stream = within_window(prev ? prev : (n > 1 ? first : 0), now, t);
	if (stream && !atomic_load_explicit(&rt->streamed, memory_order_relaxed))
		atomic_store_explicit(&rt->streamed, 1, memory_order_relaxed);
	for (int i = 0; i < TDAX_FILE_DIRTY_SLOTS; i++) {
		/* A load first: most slots are empty, and an exchange of each
		 * cost a sync ~20 ns per slot. A write that fills one after the
		 * load counts at the next sync. */
		if (!atomic_load_explicit(&rt->dirty_ranges[i], memory_order_relaxed))
			continue;
		uint32_t v = atomic_exchange(&rt->dirty_ranges[i], 0);
		struct tdax_range *r = v && v <= dev->sb->max_ranges ? tdax_range_at(dev, v - 1) : NULL;
		if (r && belongs(r, idx, gen))
			synced(r, t, now, stream, n);
	}
	if (atomic_load_explicit(&rt->dirty_overflow, memory_order_relaxed) &&
	    atomic_exchange(&rt->dirty_overflow, 0)) {
		for (uint32_t i = 0; i < dev->sb->max_ranges; i++) {
			struct tdax_range *r = tdax_range_at(dev, i);
			if (belongs(r, idx, gen) && atomic_load(&r->t.dirty))
				synced(r, t, now, stream, n);
		}
	}
}

/*
 * A sync of a file whose ranges written since its last sync are all
 * upgraded (one at least) can only keep them so or start their downgrade, and a downgrade is no worse a few
 * syncs late: such syncs are held back, in this thread, and counted at
 * once (syncs(): one decision per range) at the thread's next sync of
 * another file or of one with a range not upgraded, after HELD_MAX of
 * them, once the window's bucket the first began in ends, at a close or
 * unlink of the file by this thread, and at exit. The policy's work per
 * sync (the tunables' copy, three locked instructions and four window
 * sums on the range's line) cost a lightweight sync more than the rest of
 * it, as in bypass mode (tdax_tracking_sync_later). The counts of a
 * heuristic: a thread that stops syncing and never closes the file leaves
 * its held ones uncounted, a downgrade is decided up to HELD_MAX syncs or
 * one bucket (1/8 of the writeback window) late. An upgrade is never held
 * back: a range not upgraded is decided at each sync, as before.
 */
#define HELD_MAX 64

static __thread struct {
	uint32_t idx, gen;
	uint32_t n;                 /* syncs held back; 0: none */
	uint64_t first, last, until; /* the first's and the last's time; when the first's bucket ends */
} held TDAX_TLS;

/* Count this thread's held syncs, after its batch of writes (cur.busy);
 * not if their file's entry went meanwhile (another file's now). */
static void catch_up(const struct tdax_tunables *t, uint64_t now)
{
	flush(now, t);
	if (held.n && tdax_file_at(tdax_rt.dev, held.idx)->gen == held.gen)
		syncs(held.idx, held.gen, t, held.first, held.last, held.n);
	held.n = 0;
}

/* Has (idx, gen) ranges written since its last sync, every one upgraded?
 * Moves each one's last page back, as its sync would (sync_later). */
static bool all_upgraded(uint32_t idx, uint32_t gen)
{
	const struct tdax_file_rt *rt = tdax_rt_of(idx);
	const struct tdax_device *dev = tdax_rt.dev;
	if (atomic_load_explicit(&rt->dirty_overflow, memory_order_relaxed))
		return false;
	bool some = false;
	for (int i = 0; i < TDAX_FILE_DIRTY_SLOTS; i++) {
		uint32_t v = atomic_load_explicit(&rt->dirty_ranges[i], memory_order_relaxed);
		if (!v)
			continue;
		struct tdax_range *r = v <= dev->sb->max_ranges ? tdax_range_at(dev, v - 1) : NULL;
		if (!r || !belongs(r, idx, gen) ||
		    atomic_load_explicit(&r->t.state, memory_order_relaxed) != TDAX_R_UPGRADED)
			return false;
		atomic_store_explicit(&r->t.last_page, 0, memory_order_relaxed);
		some = true;
	}
	return some;
}

/* `always` keeps no stream, but the next open of the file asks how long
 * ago its last sync was (files.h TDAX_FILE_QUIET_NS): noted to a tenth of
 * that, so that syncs in a row store nothing (the line is every syncing
 * process's). */
static void noted(uint32_t idx, uint64_t now)
{
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	if (now - atomic_load_explicit(&rt->last_sync_ns, memory_order_relaxed) > TDAX_FILE_QUIET_NS / 10)
		atomic_store_explicit(&rt->last_sync_ns, now, memory_order_relaxed);
}

void tdax_tracking_sync(uint32_t idx, uint32_t gen)
{
	uint64_t now = tdax_coarse_ns();
	if (tdax_rt.policy == TDAX_POLICY_ALWAYS) {
		noted(idx, now);
		return;
	}
	struct tdax_tunables t;
	if (cur.busy) { /* a signal handler's sync amid this thread's counting */
		tdax_control_get(tdax_rt.dev, &t);
		syncs(idx, gen, &t, now, now, 1);
		return;
	}
	cur.busy = 1;
	bool same = held.n && held.idx == idx && held.gen == gen;
	if (same && held.n < HELD_MAX && now < held.until && all_upgraded(idx, gen)) {
		held.n++;
		held.last = now;
		cur.busy = 0;
		return;
	}
	tdax_control_get(tdax_rt.dev, &t);
	catch_up(&t, now); /* the thread's own writes count at its sync */
	if (all_upgraded(idx, gen)) {
		uint64_t width = t.wb_window_ns / TDAX_WIN_BUCKETS ? t.wb_window_ns / TDAX_WIN_BUCKETS : 1;
		held.idx = idx;
		held.gen = gen;
		held.n = 1;
		held.first = held.last = now;
		held.until = (now / width + 1) * width;
	} else {
		syncs(idx, gen, &t, now, now, 1);
	}
	cur.busy = 0;
}

/* This thread's held syncs of (idx, gen), counted now (before its close or
 * unlink reads the file's last sync). */
static void caught_up(uint32_t idx, uint32_t gen)
{
	if (held.n && held.idx == idx && held.gen == gen)
		tdax_tracking_flush();
}

void tdax_tracking_flush(void)
{
	if (cur.busy)
		return;
	struct tdax_tunables t;
	tdax_control_get(tdax_rt.dev, &t);
	cur.busy = 1;
	catch_up(&t, tdax_coarse_ns());
	cur.busy = 0;
}

void tdax_tracking_after_fork(void)
{
	cur.r = NULL; /* the parent counts its batch and its held syncs */
	held.n = 0;
}

bool tdax_tracking_sync_later(uint32_t idx)
{
	if (tdax_rt.policy == TDAX_POLICY_ALWAYS)
		return true;
	const struct tdax_file_rt *rt = tdax_rt_of(idx);
	if (atomic_load_explicit(&rt->dirty_overflow, memory_order_relaxed))
		return false;
	const struct tdax_device *dev = tdax_rt.dev;
	for (int i = 0; i < TDAX_FILE_DIRTY_SLOTS; i++) {
		uint32_t v = atomic_load_explicit(&rt->dirty_ranges[i], memory_order_relaxed);
		if (v && v <= dev->sb->max_ranges)
			atomic_store_explicit(&tdax_range_at(dev, v - 1)->t.last_page, 0, memory_order_relaxed);
	}
	return true;
}

void tdax_tracking_synced(uint32_t idx, uint32_t gen, uint32_t n, uint64_t first, uint64_t last)
{
	if (!n)
		return;
	if (tdax_rt.policy == TDAX_POLICY_ALWAYS) {
		noted(idx, last);
		return;
	}
	struct tdax_tunables t;
	tdax_control_get(tdax_rt.dev, &t);
	syncs(idx, gen, &t, first, last, n);
}

bool tdax_tracking_pin(uint32_t idx, uint32_t gen, uint64_t off, size_t len)
{
	if (!tracks() || len == 0)
		return tdax_rt.policy == TDAX_POLICY_ALWAYS;
	struct tdax_device *dev = tdax_rt.dev;
	struct tdax_tunables t;
	tdax_control_get(dev, &t);
	uint32_t g = tdax_ranges_gran(tdax_rt_of(idx), &t);
	bool logged = true;
	for (uint64_t rno = off >> (g + TDAX_PAGE_SHIFT); rno <= (off + len - 1) >> (g + TDAX_PAGE_SHIFT); rno++) {
		struct tdax_range *r = range_made(idx, gen, (uint32_t)rno);
		if (!r) {
			logged = false; /* the table is full: this range stays with the kernel */
			continue;
		}
		tdax_ranges_pin(r);
		logged &= tdax_track_pin(&r->t);
	}
	return logged;
}

void tdax_tracking_unpin(uint32_t idx, uint32_t gen, uint64_t off, size_t len)
{
	uint32_t g = tdax_file_gran(tdax_rt_of(idx));
	if (!tracks() || !g || len == 0)
		return;
	g--;
	for (uint64_t rno = off >> (g + TDAX_PAGE_SHIFT); rno <= (off + len - 1) >> (g + TDAX_PAGE_SHIFT); rno++) {
		struct tdax_range *r = tdax_ranges_get(tdax_rt.dev, idx, gen, (uint32_t)rno, false);
		if (r)
			tdax_ranges_unpin(r);
	}
}

/*
 * Run the job a range is marked for, if this worker gets it. The worker
 * holds the range's job lock for the whole job: a job found running without
 * a live holder was left by a worker that died, and is run again (else the
 * range would stay UPGRADING or DOWNGRADING, logged, for good).
 */
static void run_job(struct tdax_range *r, int (*checkpoint)(uint32_t idx))
{
	if (tdax_range_file(r) >= tdax_rt.dev->sb->max_files)
		return; /* a damaged entry: no file to run a job on */
	if (!tdax_track_job_pending(&r->t) || !tdax_pidlock_try(&r->job_pid))
		return;
	tdax_track_job_reclaim(&r->t);
	enum tdax_decision job = tdax_track_job_begin(&r->t);
	if (job != TDAX_KEEP) {
		bool ok = true;
		if (job == TDAX_DOWNGRADE)
			ok = checkpoint(tdax_range_file(r)) == 0;
		tdax_track_job_end(&r->t, job, ok);
		if (ok) {
			bool up = job == TDAX_UPGRADE;
			tdax_count(up ? TDAX_ST_UPGRADES : TDAX_ST_DOWNGRADES, 1);
			uint64_t wait = tdax_track_reaction(&r->t, job, tdax_coarse_ns());
			if (wait) {
				tdax_count(up ? TDAX_ST_UPGRADE_WAIT_NS : TDAX_ST_DOWNGRADE_WAIT_NS, wait);
				tdax_count(up ? TDAX_ST_UPGRADES_TIMED : TDAX_ST_DOWNGRADES_TIMED, 1);
			}
		}
	}
	tdax_pidlock_release(&r->job_pid);
}

void tdax_tracking_work(bool pressure, int (*checkpoint)(uint32_t idx))
{
	struct tdax_device *dev = tdax_rt.dev;
	struct tdax_tunables t;
	tdax_control_get(dev, &t);
	uint64_t now = tdax_coarse_ns();
	int lowest = -1;
	for (uint32_t i = 0; i < dev->sb->max_ranges; i++) {
		struct tdax_range *r = tdax_range_at(dev, i);
		if (!atomic_load_explicit(&r->key, memory_order_relaxed) ||
		    tdax_range_file(r) >= dev->sb->max_files)
			continue;
		const struct tdax_file *f = tdax_file_at(dev, tdax_range_file(r));
		if (f->gen != atomic_load(&r->fgen))
			continue; /* its file is gone */
		struct tdax_tunables own;
		bool pin = atomic_load(&r->t.state) == TDAX_R_UPGRADED && pinned(r);
		if (atomic_load(&r->t.state) == TDAX_R_UPGRADED && !pin)
			tdax_track_reevaluate(&r->t, decided_on(r, &t, now, &own), now);
		run_job(r, checkpoint);
		if (pressure && !pin && atomic_load(&r->t.state) == TDAX_R_UPGRADED) {
			int m = tdax_track_metric(&r->t, &t, now);
			if (lowest < 0 || m < lowest)
				lowest = m < 0 ? 0 : m;
		}
	}
	if (lowest < 0)
		return;
	/* Device pressure: the ranges with the lowest M go first; pinned
	 * ones (explicit mappings) have priority and stay (thesis 7.2). */
	for (uint32_t i = 0; i < dev->sb->max_ranges; i++) {
		struct tdax_range *r = tdax_range_at(dev, i);
		if (atomic_load(&r->key) && atomic_load(&r->t.state) == TDAX_R_UPGRADED && !pinned(r)) {
			int m = tdax_track_metric(&r->t, &t, now);
			if ((m < 0 ? 0 : m) <= lowest && tdax_track_force_downgrade(&r->t))
				run_job(r, checkpoint);
		}
	}
}
