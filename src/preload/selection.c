/*
 * selection -- which of this process's files bypass mode may promote
 * (selection.h).
 */
#define _GNU_SOURCE
#include "preload/selection.h"
#include "core/cachestat.h"
#include "core/log.h"
#include "core/util.h"
#include "preload/state.h"

#include <stdlib.h>
#include <string.h>

/* The selection's parameters (the selecting thread's), and those the
 * profiling threads read: the tunables of the last pass. */
static struct tdax_select_params params;
static uint64_t log_capacity;
static _Atomic uint64_t window_ns_, floor_;

static uint64_t window(void)
{
	return atomic_load_explicit(&window_ns_, memory_order_relaxed);
}

/* The tunables now into the parameters (tdax set changes them at run
 * time): true if the selection's changed. */
static bool tune(const struct tdax_device *dev)
{
	struct tdax_tunables t;
	tdax_bypass_tunables(dev, &t);
	atomic_store_explicit(&window_ns_, t.bypass_window_ns, memory_order_relaxed);
	atomic_store_explicit(&floor_, t.bypass_floor, memory_order_relaxed);
	struct tdax_select_params was = params;
	params.capacity = log_capacity / 100 * t.bypass_share_pct;
	params.floor = t.bypass_floor;
	params.hold_ns = tdax_rt.wb_age_ns < t.bypass_window_ns ? tdax_rt.wb_age_ns : t.bypass_window_ns;
	return params.capacity != was.capacity || params.floor != was.floor || params.hold_ns != was.hold_ns;
}

/* The selection's scratch space, one per file and one per file other
 * processes promoted, and its state. */
static struct tdax_candidate *cand;
static uint32_t *order, *of; /* the ranking; the file of each candidate (NOT_MINE: another's) */
static struct tdax_cachestat others[TDAX_CACHESTAT_SLOTS];
#define NOT_MINE UINT32_MAX
static _Atomic bool selecting;
static _Atomic uint64_t selected_ns;
static uint64_t selected_total;
static uint64_t selected_set; /* which files were candidates (a signature) */

bool tdax_selection_init(const struct tdax_device *dev)
{
	uint32_t n = tdax_promoted_count() + TDAX_CACHESTAT_SLOTS;
	cand = calloc(n, sizeof(*cand));
	order = calloc(n, sizeof(*order));
	of = calloc(n, sizeof(*of));
	if (!cand || !order || !of)
		return false;
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	log_capacity = u.capacity;
	tune(dev);
	tdax_cache_set_share(params.capacity);
	params.append_hold_ns = TDAX_SELECT_APPEND_HOLD_NS;
	params.keep_pct = TDAX_SELECT_KEEP_PCT;
	return true;
}

static void profiled(struct tdax_promoted *b, uint64_t now)
{
	if (atomic_load_explicit(&b->profiled_ns, memory_order_relaxed) != now)
		atomic_store_explicit(&b->profiled_ns, now, memory_order_relaxed);
}

/* The writes and syncs b (locked) holds back go into its profile. */
static void flush(struct tdax_promoted *b, uint64_t now)
{
	tdax_profile_writes(&b->prof, window(), now, b->pend_wr, false, b->pend_n - b->pend_ap_n);
	tdax_profile_writes(&b->prof, window(), now, b->pend_ap, true, b->pend_ap_n);
	if (b->pend_sy)
		tdax_profile_syncs(&b->prof, window(), now, b->pend_sy);
	b->pend_wr = b->pend_ap = 0;
	b->pend_n = b->pend_ap_n = b->pend_sy = 0;
	profiled(b, now);
}

/* A write's counts are held back, and added to the profile every
 * PEND_MAX writes and syncs, at a sync of a file not promoted (whose
 * selection may follow) and at every publish() of a promoted one: no
 * clock read and no locked add per write, none per lightweight sync (the
 * profile lags by at most that many, or TDAX_CACHESTAT_EVERY_NS). */
#define PEND_MAX 32

void tdax_selection_wrote(struct tdax_promoted *b, uint64_t len, bool append)
{
	if (append) {
		b->pend_ap += len;
		b->pend_ap_n++;
	} else {
		b->pend_wr += len;
	}
	if (++b->pend_n + b->pend_sy >= PEND_MAX)
		flush(b, tdax_coarse_ns());
}

void tdax_selection_served_read(int fd, uint64_t len)
{
	const struct tdax_fd *e = tdax_fd_get(fd);
	struct tdax_promoted *b = e ? tdax_promoted_of(e) : NULL;
	if (!b)
		return;
	uint64_t now = tdax_coarse_ns();
	tdax_profile_read(&b->prof, window(), now, len);
	profiled(b, now);
}

void tdax_selection_synced(struct tdax_promoted *b, uint64_t now)
{
	if (++b->pend_sy + b->pend_n >= PEND_MAX || b->fd < 0)
		flush(b, now);
}

/* Select among the files profiled within the window (one thread at a
 * time: false if another is at it, whose result stands). always: even if
 * neither the candidates nor their bandwidth moved enough to call for it. */
static bool select_now(uint64_t now, bool always)
{
	bool idle = false;
	if (!atomic_compare_exchange_strong(&selecting, &idle, true))
		return false;
	bool retuned = tune(tdax_rt.dev);
	uint32_t n = 0, files = tdax_promoted_count();
	uint64_t set = 0;
	for (uint32_t i = 0; i < files; i++) {
		struct tdax_promoted *b = tdax_promoted_at(i);
		if (tdax_age_ns(now, atomic_load_explicit(&b->profiled_ns, memory_order_relaxed)) > window()) {
			atomic_store_explicit(&b->selected, false, memory_order_relaxed);
			continue;
		}
		memset(&cand[n], 0, sizeof(cand[n]));
		tdax_profile_rates(&b->prof, window(), now, &cand[n].rates);
		/* (Read unlocked: a promotion or demotion meanwhile only moves
		 * the hysteresis of this one selection.) */
		cand[n].promoted = __atomic_load_n(&b->fd, __ATOMIC_RELAXED) >= 0;
		set += ((uint64_t)i + 1) * 0x9e3779b97f4a7c15ull;
		of[n++] = i;
	}
	/* The files other processes hold promoted compete for the same share:
	 * every process ranks them with its own, and so makes the same
	 * choice (each applies its part of it). */
	uint32_t m = tdax_cachestat_others(tdax_rt.dev, tdax_pid(), others, TDAX_CACHESTAT_SLOTS);
	for (uint32_t k = 0; k < m; k++, n++) {
		cand[n] = (struct tdax_candidate){
			.rates = { .read = others[k].read, .write = others[k].write, .append = others[k].append,
				   .syncs = 1 },
			.promoted = true,
		};
		of[n] = NOT_MINE;
	}
	set += (uint64_t)m * 0xc2b2ae3d27d4eb4full;
	uint64_t total = tdax_select_total(cand, n, &params);
	if (retuned || always || set != selected_set || tdax_select_due(selected_total, total) ||
	    tdax_select_over(cand, n, &params)) {
		tdax_select(cand, order, n, &params);
		selected_total = total;
		selected_set = set;
		uint64_t mine = 0, all = 0;
		for (uint32_t k = 0; k < n; k++) {
			all += cand[k].selected ? cand[k].footprint : 0;
			if (of[k] == NOT_MINE)
				continue;
			mine += cand[k].selected ? cand[k].footprint : 0;
			atomic_store_explicit(&tdax_promoted_at(of[k])->selected, cand[k].selected,
					      memory_order_relaxed);
		}
		/* This process's cache takes its files' part of the share. */
		tdax_cache_set_share(all ? (uint64_t)((double)params.capacity * (double)mine / (double)all)
					 : params.capacity);
	}
	atomic_store(&selected_ns, now);
	atomic_store(&selecting, false);
	return true;
}

bool tdax_selection_takes(struct tdax_promoted *b)
{
	if (atomic_load_explicit(&b->selected, memory_order_relaxed))
		return true;
	/* Not taken: ask again once its bandwidth has doubled since it was
	 * last refused, or a while after -- not at every sync. */
	uint64_t now = tdax_coarse_ns();
	if (b->pend_n || b->pend_sy)
		flush(b, now); /* (a file demoted at this sync held some back) */
	struct tdax_rates r;
	tdax_profile_rates(&b->prof, window(), now, &r);
	uint64_t bw = tdax_select_bandwidth(&r);
	if (bw < atomic_load_explicit(&floor_, memory_order_relaxed) || !bw ||
	    (bw < 2 * b->refused_bw && tdax_age_ns(now, atomic_load(&selected_ns)) < TDAX_SELECTION_RETRY_NS))
		return false;
	bool asked = select_now(now, true);
	bool taken = atomic_load_explicit(&b->selected, memory_order_relaxed);
	if (asked)
		b->refused_bw = taken ? 0 : bw;
	return taken;
}

void tdax_selection_after_fork_child(void)
{
	atomic_store(&selecting, false);
}

static bool still_promoted(uint32_t idx)
{
	return idx < tdax_promoted_count() && tdax_promoted_at(idx)->fd >= 0;
}

/* The figures of this process's promoted files into the device's table. */
static void publish(void)
{
	static uint64_t last;
	uint64_t now = tdax_coarse_ns();
	if (now - last < TDAX_CACHESTAT_EVERY_NS)
		return;
	last = now;
	struct tdax_cache_usage u;
	tdax_cache_usage(&u);
	uint32_t pid = tdax_pid();
	for (uint32_t i = 0, files = tdax_promoted_count(); i < files && atomic_load(&tdax_fds_promoted); i++) {
		struct tdax_promoted *b = tdax_promoted_at(i);
		if (b->fd < 0)
			continue;
		tdax_promoted_lock(b);
		tdax_promoted_catch_up(b, i);
		flush(b, now);
		tdax_cache_count(&b->cached);
		struct tdax_rates r;
		tdax_profile_rates(&b->prof, window(), now, &r);
		struct tdax_cachestat v = {
			.blocks = b->cached.blocks, .block_size = u.block_size, .hits = b->cached.hits,
			.misses = b->cached.misses, .read = r.read, .write = r.write, .append = r.append,
		};
		uint32_t gen = b->gen;
		bool promoted = b->fd >= 0;
		tdax_promoted_unlock(b);
		if (promoted)
			tdax_cachestat_put(tdax_rt.dev, pid, i, gen, &v);
	}
	tdax_cachestat_sweep(tdax_rt.dev, pid, still_promoted);
}

void tdax_selection_serve(void)
{
	publish();
	uint64_t now = tdax_coarse_ns();
	if (!cand || tdax_age_ns(now, atomic_load(&selected_ns)) < TDAX_SELECTION_EVERY_NS)
		return;
	select_now(now, false);
	for (uint32_t i = 0, files = tdax_promoted_count(); i < files && atomic_load(&tdax_fds_promoted); i++) {
		struct tdax_promoted *b = tdax_promoted_at(i);
		if (atomic_load_explicit(&b->selected, memory_order_relaxed) ||
		    __atomic_load_n(&b->fd, __ATOMIC_RELAXED) < 0)
			continue;
		tdax_promoted_lock(b);
		if (b->fd >= 0 && !atomic_load_explicit(&b->selected, memory_order_relaxed))
			tdax_promoted_demote(b, i, -1, TDAX_ST_DEMOTED_UNSELECTED);
		tdax_promoted_unlock(b);
	}
}
