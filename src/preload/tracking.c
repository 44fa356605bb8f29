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
#include "policy/track.h"
#include "preload/state.h"
#include "preload/wake.h"

/* The file's granularity: fixed when it is first tracked. */
static uint32_t gran_of(struct tdax_file_rt *rt, const struct tdax_tunables *t)
{
	uint32_t g = tdax_file_gran(rt);
	if (g)
		return g - 1;
	uint32_t none = 0;
	atomic_compare_exchange_strong(&rt->gran, &none, t->gran_order + 1);
	return tdax_file_gran(rt) - 1;
}

static void note_dirty(struct tdax_file_rt *rt, uint32_t slot)
{
	uint32_t v = slot + 1;
	for (int i = 0; i < 6; i++)
		if (atomic_load_explicit(&rt->dirty_ranges[i], memory_order_relaxed) == v)
			return;
	for (int i = 0; i < 6; i++) {
		uint32_t empty = 0;
		if (atomic_compare_exchange_strong(&rt->dirty_ranges[i], &empty, v) || empty == v)
			return;
	}
	atomic_store(&rt->dirty_overflow, 1);
}

/* Upgrade-ahead (policy/track.h): an append over range rno's carry page,
 * pages [p0, p1] of it, hands the range's state to range rno + 1. */
static void carry(uint32_t idx, uint32_t gen, const struct tdax_range *r, uint32_t rno, uint32_t g,
		  uint64_t p0, uint64_t p1, const struct tdax_tunables *t, uint64_t now)
{
	uint64_t at = tdax_track_carry_page(g);
	if (p0 > at || p1 < at || rno == UINT32_MAX ||
	    atomic_load_explicit(&r->t.state, memory_order_relaxed) != TDAX_R_UPGRADED)
		return;
	struct tdax_range *next = tdax_ranges_get(tdax_rt.dev, idx, gen, rno + 1, true);
	if (next && tdax_track_carry(&r->t, &next->t, t, now))
		tdax_wake();
}

bool tdax_tracking_write(uint32_t idx, uint32_t gen, uint64_t off, size_t len)
{
	if (tdax_rt.policy == TDAX_POLICY_ALWAYS)
		return true;
	if (len == 0)
		return false;
	struct tdax_device *dev = tdax_rt.dev;
	struct tdax_tunables t;
	tdax_control_get(dev, &t);
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	uint32_t g = gran_of(rt, &t);
	uint64_t first = off >> TDAX_PAGE_SHIFT, last = (off + len - 1) >> TDAX_PAGE_SHIFT;
	uint64_t now = tdax_coarse_ns();
	bool logged = true;
	/* At the end the file had: its size is raised after this look. */
	bool appends = tdax_rt.policy == TDAX_POLICY_AHEAD &&
		       off >= atomic_load_explicit(&rt->size_seen, memory_order_relaxed);
	for (uint64_t rno = first >> g; rno <= last >> g; rno++) {
		struct tdax_range *r = tdax_ranges_get(dev, idx, gen, (uint32_t)rno, true);
		if (!r) {
			logged = false; /* the table is full: this range stays with the kernel */
			continue;
		}
		uint64_t base = rno << g, p0 = first > base ? first : base;
		uint64_t end = ((rno + 1) << g) - 1, p1 = last < end ? last : end;
		tdax_track_write(&r->t, &t, now, p0 - base, p1 - p0 + 1);
		note_dirty(rt, (uint32_t)(((char *)r - (dev->base + dev->sb->ranges_off)) /
					  TDAX_RANGE_ENTRY_SIZE));
		if (appends)
			carry(idx, gen, r, (uint32_t)rno, g, p0 - base, p1 - base, &t, now);
		logged &= tdax_range_logged(atomic_load_explicit(&r->t.state, memory_order_relaxed));
	}
	return logged && tdax_rt.policy != TDAX_POLICY_NEVER;
}

bool tdax_tracking_logged(uint32_t idx, uint32_t gen, uint64_t off, size_t len)
{
	if (tdax_rt.policy != TDAX_POLICY_THESIS && tdax_rt.policy != TDAX_POLICY_AHEAD)
		return tdax_rt.policy == TDAX_POLICY_ALWAYS;
	uint32_t g = tdax_file_gran(tdax_rt_of(idx));
	if (!g || len == 0)
		return false; /* not tracked yet: nothing of it is upgraded */
	g--;
	uint64_t first = off >> TDAX_PAGE_SHIFT, last = (off + len - 1) >> TDAX_PAGE_SHIFT;
	for (uint64_t rno = first >> g; rno <= last >> g; rno++) {
		struct tdax_range *r = tdax_ranges_get(tdax_rt.dev, idx, gen, (uint32_t)rno, false);
		if (!r || !tdax_range_logged(atomic_load_explicit(&r->t.state, memory_order_relaxed)))
			return false;
	}
	return true;
}

static bool belongs(const struct tdax_range *r, uint32_t idx, uint32_t gen)
{
	uint64_t k = atomic_load(&r->key);
	return k && (uint32_t)(k >> 32) == idx + 1 && atomic_load(&r->fgen) == gen;
}

bool tdax_tracking_stream(uint64_t prev, uint64_t now)
{
	struct tdax_tunables t;
	tdax_control_get(tdax_rt.dev, &t);
	return prev && now - prev <= t.wb_window_ns;
}

void tdax_tracking_sync(uint32_t idx, uint32_t gen)
{
	if (tdax_rt.policy == TDAX_POLICY_ALWAYS)
		return;
	struct tdax_device *dev = tdax_rt.dev;
	struct tdax_tunables t;
	tdax_control_get(dev, &t);
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	uint64_t now = tdax_coarse_ns();
	uint64_t prev = atomic_exchange(&rt->last_sync_ns, now);
	bool stream = tdax_tracking_stream(prev, now);
	if (stream && !atomic_load_explicit(&rt->streamed, memory_order_relaxed))
		atomic_store_explicit(&rt->streamed, 1, memory_order_relaxed);
	for (int i = 0; i < 6; i++) {
		/* A load first: most slots are empty, and an exchange of each
		 * cost a sync ~20 ns per slot. A write that fills one after the
		 * load counts at the next sync. */
		if (!atomic_load_explicit(&rt->dirty_ranges[i], memory_order_relaxed))
			continue;
		uint32_t v = atomic_exchange(&rt->dirty_ranges[i], 0);
		struct tdax_range *r = v && v <= dev->sb->max_ranges ? tdax_range_at(dev, v - 1) : NULL;
		if (r && belongs(r, idx, gen) && tdax_track_sync(&r->t, &t, now, stream) != TDAX_KEEP)
			tdax_wake();
	}
	if (atomic_load_explicit(&rt->dirty_overflow, memory_order_relaxed) &&
	    atomic_exchange(&rt->dirty_overflow, 0)) {
		for (uint32_t i = 0; i < dev->sb->max_ranges; i++) {
			struct tdax_range *r = tdax_range_at(dev, i);
			if (belongs(r, idx, gen) && atomic_load(&r->t.dirty) &&
			    tdax_track_sync(&r->t, &t, now, stream) != TDAX_KEEP)
				tdax_wake();
		}
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
		if (ok)
			tdax_count(job == TDAX_UPGRADE ? TDAX_ST_UPGRADES : TDAX_ST_DOWNGRADES, 1);
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
		if (atomic_load(&r->t.state) == TDAX_R_UPGRADED)
			tdax_track_reevaluate(&r->t, &t, now);
		run_job(r, checkpoint);
		if (pressure && atomic_load(&r->t.state) == TDAX_R_UPGRADED) {
			int m = tdax_track_metric(&r->t, &t, now);
			if (lowest < 0 || m < lowest)
				lowest = m < 0 ? 0 : m;
		}
	}
	if (lowest < 0)
		return;
	/* Device pressure: the ranges with the lowest M go first. */
	for (uint32_t i = 0; i < dev->sb->max_ranges; i++) {
		struct tdax_range *r = tdax_range_at(dev, i);
		if (atomic_load(&r->key) && atomic_load(&r->t.state) == TDAX_R_UPGRADED) {
			int m = tdax_track_metric(&r->t, &t, now);
			if ((m < 0 ? 0 : m) <= lowest && tdax_track_force_downgrade(&r->t))
				run_job(r, checkpoint);
		}
	}
}
