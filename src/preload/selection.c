/*
 * selection -- which of this process's files bypass mode may promote
 * (selection.h).
 */
#define _GNU_SOURCE
#include "preload/selection.h"
#include "core/log.h"
#include "core/util.h"
#include "preload/state.h"

#include <stdlib.h>
#include <string.h>

static struct tdax_select_params params;
static uint64_t window_ns;

/* The selection's scratch space, one per file, and its state. */
static struct tdax_candidate *cand;
static uint32_t *order, *of; /* the ranking; the file of each candidate */
static _Atomic bool selecting;
static _Atomic uint64_t selected_ns;
static uint64_t selected_total;
static uint64_t selected_set; /* which files were candidates (a signature) */

bool tdax_selection_init(const struct tdax_device *dev)
{
	uint32_t n = tdax_promoted_count();
	cand = calloc(n, sizeof(*cand));
	order = calloc(n, sizeof(*order));
	of = calloc(n, sizeof(*of));
	if (!cand || !order || !of)
		return false;
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	params.capacity = u.capacity / 100 * tdax_env_value("TDAX_BYPASS_SHARE_PCT", 50, 1, 100);
	params.floor = tdax_env_value("TDAX_BYPASS_FLOOR", 0, 0, (uint64_t)1 << 40);
	window_ns = tdax_env_value("TDAX_BYPASS_WINDOW_MS", 1000, 10, 60000) * 1000000u;
	params.hold_ns = tdax_rt.wb_age_ns < window_ns ? tdax_rt.wb_age_ns : window_ns;
	params.append_hold_ns = TDAX_SELECT_APPEND_HOLD_NS;
	params.keep_pct = TDAX_SELECT_KEEP_PCT;
	return true;
}

static void profiled(struct tdax_promoted *b, uint64_t now)
{
	if (atomic_load_explicit(&b->profiled_ns, memory_order_relaxed) != now)
		atomic_store_explicit(&b->profiled_ns, now, memory_order_relaxed);
}

/* The writes b (locked) holds back go into its profile. */
static void flush(struct tdax_promoted *b, uint64_t now)
{
	tdax_profile_writes(&b->prof, window_ns, now, b->pend_wr, false, b->pend_n - b->pend_ap_n);
	tdax_profile_writes(&b->prof, window_ns, now, b->pend_ap, true, b->pend_ap_n);
	b->pend_wr = b->pend_ap = 0;
	b->pend_n = b->pend_ap_n = 0;
	profiled(b, now);
}

/* A write's counts are held back, and added to the profile every
 * PEND_MAX writes and at each sync: no clock read and no locked add per
 * write (the profile lags by at most that many). */
#define PEND_MAX 32

void tdax_selection_wrote(struct tdax_promoted *b, uint64_t len, bool append)
{
	if (append) {
		b->pend_ap += len;
		b->pend_ap_n++;
	} else {
		b->pend_wr += len;
	}
	if (++b->pend_n >= PEND_MAX)
		flush(b, tdax_coarse_ns());
}

void tdax_selection_served_read(int fd, uint64_t len)
{
	const struct tdax_fd *e = tdax_fd_get(fd);
	struct tdax_promoted *b = e ? tdax_promoted_of(e) : NULL;
	if (!b)
		return;
	uint64_t now = tdax_coarse_ns();
	tdax_profile_read(&b->prof, window_ns, now, len);
	profiled(b, now);
}

void tdax_selection_synced(struct tdax_promoted *b)
{
	uint64_t now = tdax_coarse_ns();
	flush(b, now);
	tdax_profile_sync(&b->prof, window_ns, now);
}

/* Select among the files profiled within the window (one thread at a
 * time: false if another is at it, whose result stands). always: even if
 * neither the candidates nor their bandwidth moved enough to call for it. */
static bool select_now(uint64_t now, bool always)
{
	bool idle = false;
	if (!atomic_compare_exchange_strong(&selecting, &idle, true))
		return false;
	uint32_t n = 0, files = tdax_promoted_count();
	uint64_t set = 0;
	for (uint32_t i = 0; i < files; i++) {
		struct tdax_promoted *b = tdax_promoted_at(i);
		if (now - atomic_load_explicit(&b->profiled_ns, memory_order_relaxed) > window_ns) {
			atomic_store_explicit(&b->selected, false, memory_order_relaxed);
			continue;
		}
		memset(&cand[n], 0, sizeof(cand[n]));
		tdax_profile_rates(&b->prof, window_ns, now, &cand[n].rates);
		/* (Read unlocked: a promotion or demotion meanwhile only moves
		 * the hysteresis of this one selection.) */
		cand[n].promoted = __atomic_load_n(&b->fd, __ATOMIC_RELAXED) >= 0;
		set += ((uint64_t)i + 1) * 0x9e3779b97f4a7c15ull;
		of[n++] = i;
	}
	uint64_t total = tdax_select_total(cand, n, &params);
	if (always || set != selected_set || tdax_select_due(selected_total, total)) {
		tdax_select(cand, order, n, &params);
		selected_total = total;
		selected_set = set;
		for (uint32_t k = 0; k < n; k++)
			atomic_store_explicit(&tdax_promoted_at(of[k])->selected, cand[k].selected,
					      memory_order_relaxed);
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
	struct tdax_rates r;
	tdax_profile_rates(&b->prof, window_ns, now, &r);
	uint64_t bw = tdax_select_bandwidth(&r);
	if (bw < params.floor || !bw ||
	    (bw < 2 * b->refused_bw && now - atomic_load(&selected_ns) < TDAX_SELECTION_RETRY_NS))
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

void tdax_selection_serve(void)
{
	uint64_t now = tdax_coarse_ns();
	if (!cand || now - atomic_load(&selected_ns) < TDAX_SELECTION_EVERY_NS)
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
