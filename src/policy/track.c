/*
 * track -- sliding-window counters, the metric, decisions and range states.
 */
#include "policy/track.h"
#include "core/util.h"

static uint64_t bucket_of(uint64_t window_ns, uint64_t now)
{
	uint64_t width = window_ns / TDAX_WIN_BUCKETS;
	return now / (width ? width : 1);
}

void tdax_window_add(struct tdax_window *w, uint64_t window_ns, uint64_t now, uint32_t n)
{
	uint64_t num = bucket_of(window_ns, now);
	_Atomic uint64_t *b = &w->b[num % TDAX_WIN_BUCKETS];
	uint64_t tag = (num & 0xffffffffu) << 32;
	uint64_t cur = atomic_load_explicit(b, memory_order_relaxed);
	for (;;) {
		uint64_t next = (cur & ~0xffffffffull) == tag ? cur + n : tag | n;
		if (atomic_compare_exchange_weak(b, &cur, next))
			return;
	}
}

uint64_t tdax_window_sum(const struct tdax_window *w, uint64_t window_ns, uint64_t now)
{
	uint64_t num = bucket_of(window_ns, now), sum = 0;
	for (uint64_t k = 0; k < TDAX_WIN_BUCKETS && k <= num; k++) {
		uint64_t v = atomic_load_explicit(&w->b[(num - k) % TDAX_WIN_BUCKETS], memory_order_relaxed);
		if ((v >> 32) == ((num - k) & 0xffffffffu))
			sum += v & 0xffffffffu;
	}
	return sum;
}

const char *tdax_range_state_name(uint32_t s)
{
	static const char *const names[] = { "none", "to-upgrade", "upgrading", "upgraded",
					     "to-downgrade", "downgrading" };
	return s <= TDAX_R_DOWNGRADING ? names[s] : "invalid";
}

uint32_t tdax_track_fresh(struct tdax_range_track *r, uint64_t first_page, uint64_t npages)
{
	if (!npages)
		return 0;
	/* A write that starts on the page the previous one ended on (small
	 * appends) dirties one page less. A load and a store, not an exchange
	 * (a locked instruction on every write): two writers at once may both
	 * count their page, or a sync's reset may be missed, by one page. */
	uint32_t last = (uint32_t)(first_page + npages - 1);
	uint32_t prev = atomic_load_explicit(&r->last_page, memory_order_relaxed);
	if (prev != last + 1)
		atomic_store_explicit(&r->last_page, last + 1, memory_order_relaxed);
	return (uint32_t)npages - (prev == (uint32_t)first_page + 1 ? 1 : 0);
}

void tdax_track_count(struct tdax_range_track *r, const struct tdax_tunables *t, uint64_t now,
		      uint32_t npages, uint32_t fresh)
{
	if (npages)
		tdax_window_add(&r->wr, t->wr_window_ns, now, npages);
	if (fresh)
		atomic_fetch_add_explicit(&r->dirty, fresh, memory_order_relaxed);
}

void tdax_track_write(struct tdax_range_track *r, const struct tdax_tunables *t, uint64_t now,
		      uint64_t first_page, uint64_t npages)
{
	tdax_track_count(r, t, now, (uint32_t)npages, tdax_track_fresh(r, first_page, npages));
}

int tdax_track_metric(const struct tdax_range_track *r, const struct tdax_tunables *t, uint64_t now)
{
	uint64_t wr = tdax_window_sum(&r->wr, t->wr_window_ns, now);
	if (wr == 0 || wr < t->write_threshold)
		return -1;
	uint64_t m = 100 * tdax_window_sum(&r->wb, t->wb_window_ns, now) / wr;
	return m > 1000000 ? 1000000 : (int)m;
}

/* Move the state from `from` to `to` if it is still `from`. */
static bool move(struct tdax_range_track *r, uint32_t from, uint32_t to)
{
	if (!atomic_compare_exchange_strong(&r->state, &from, to))
		return false;
	atomic_fetch_add_explicit(&r->transitions, 1, memory_order_relaxed);
	return true;
}

static uint32_t clamp32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

bool tdax_track_carry(const struct tdax_range_track *from, struct tdax_range_track *next,
		      const struct tdax_tunables *t, uint64_t now)
{
	if (atomic_load(&from->state) != TDAX_R_UPGRADED || atomic_load(&next->state) != TDAX_R_NONE)
		return false;
	if (!move(next, TDAX_R_NONE, TDAX_R_TO_UPGRADE))
		return false;
	tdax_window_add(&next->wr, t->wr_window_ns, now,
			clamp32(tdax_window_sum(&from->wr, t->wr_window_ns, now)));
	tdax_window_add(&next->wb, t->wb_window_ns, now,
			clamp32(tdax_window_sum(&from->wb, t->wb_window_ns, now)));
	tdax_window_add(&next->sy, t->wb_window_ns, now,
			clamp32(tdax_window_sum(&from->sy, t->wb_window_ns, now)));
	return true;
}

void tdax_track_bequeath(const struct tdax_range_track *r, const struct tdax_tunables *t, uint64_t now,
			 struct tdax_track_legacy *out)
{
	uint32_t s = atomic_load(&r->state);
	out->writes = clamp32(tdax_window_sum(&r->wr, t->wr_window_ns, now));
	out->writebacks = clamp32(tdax_window_sum(&r->wb, t->wb_window_ns, now));
	out->syncs = clamp32(tdax_window_sum(&r->sy, t->wb_window_ns, now));
	out->upgraded = s == TDAX_R_UPGRADED || s == TDAX_R_TO_UPGRADE || s == TDAX_R_UPGRADING;
}

bool tdax_track_inherit(struct tdax_range_track *r, const struct tdax_track_legacy *l,
			const struct tdax_tunables *t, uint64_t now)
{
	if (atomic_load(&r->state) != TDAX_R_NONE || tdax_window_sum(&r->wr, t->wr_window_ns, now))
		return false; /* not a range nothing has touched */
	tdax_window_add(&r->wr, t->wr_window_ns, now, l->writes);
	tdax_window_add(&r->wb, t->wb_window_ns, now, l->writebacks);
	tdax_window_add(&r->sy, t->wb_window_ns, now, l->syncs);
	return l->upgraded && move(r, TDAX_R_NONE, TDAX_R_UPGRADED);
}

/* The thesis' decision (listing 5.1) on the current metric. */
static enum tdax_decision decide(struct tdax_range_track *r, int m, const struct tdax_tunables *t,
				 bool may_upgrade)
{
	uint32_t s = atomic_load(&r->state);
	if (may_upgrade && m > (int)t->upgrade_pct) {
		if (s == TDAX_R_NONE && move(r, TDAX_R_NONE, TDAX_R_TO_UPGRADE))
			return TDAX_UPGRADE;
		if (s == TDAX_R_TO_DOWNGRADE && move(r, TDAX_R_TO_DOWNGRADE, TDAX_R_UPGRADED))
			return TDAX_UPGRADE; /* a pending downgrade is cancelled */
	} else if (m >= 0 && m < (int)t->downgrade_pct) {
		if (s == TDAX_R_UPGRADED && move(r, TDAX_R_UPGRADED, TDAX_R_TO_DOWNGRADE))
			return TDAX_DOWNGRADE;
		if (s == TDAX_R_TO_UPGRADE && move(r, TDAX_R_TO_UPGRADE, TDAX_R_NONE))
			return TDAX_DOWNGRADE; /* a pending upgrade is cancelled */
	}
	return TDAX_KEEP;
}

enum tdax_decision tdax_track_sync(struct tdax_range_track *r, const struct tdax_tunables *t,
				   uint64_t now, bool stream)
{
	return tdax_track_syncs(r, t, now, stream, 1);
}

enum tdax_decision tdax_track_syncs(struct tdax_range_track *r, const struct tdax_tunables *t,
				    uint64_t now, bool stream, uint32_t n)
{
	uint32_t dirty = atomic_exchange(&r->dirty, 0);
	atomic_store_explicit(&r->last_page, 0, memory_order_relaxed);
	if (!stream) {
		atomic_store_explicit(&r->stream_ns, 0, memory_order_relaxed); /* a stream may begin */
	} else if (dirty) {
		tdax_window_add(&r->wb, t->wb_window_ns, now, dirty);
		tdax_window_add(&r->sy, t->wb_window_ns, now, n);
		atomic_store_explicit(&r->synced_ns, now, memory_order_relaxed);
		uint64_t none = 0;
		if (atomic_load_explicit(&r->state, memory_order_relaxed) == TDAX_R_NONE)
			atomic_compare_exchange_strong(&r->stream_ns, &none, now);
	}
	return decide(r, tdax_track_metric(r, t, now), t, stream);
}

void tdax_track_adapt(const struct tdax_range_track *r, const struct tdax_tunables *t, uint64_t now,
		      uint32_t fill_pct, struct tdax_tunables *out)
{
	*out = *t;
	uint64_t syncs = tdax_window_sum(&r->sy, t->wb_window_ns, now);
	if (syncs > TDAX_TRACK_STEADY) {
		out->upgrade_pct = (uint32_t)(t->upgrade_pct * TDAX_TRACK_STEADY / syncs);
		out->downgrade_pct = (uint32_t)(t->downgrade_pct * TDAX_TRACK_STEADY / syncs);
	}
	if (fill_pct > TDAX_TRACK_FILL_FROM) {
		uint32_t span = TDAX_TRACK_FILL_FULL - TDAX_TRACK_FILL_FROM;
		uint32_t over = fill_pct < TDAX_TRACK_FILL_FULL ? fill_pct - TDAX_TRACK_FILL_FROM : span;
		out->upgrade_pct += (100 - out->upgrade_pct) * over / span;
	}
}

uint64_t tdax_track_reaction(struct tdax_range_track *r, enum tdax_decision job, uint64_t now)
{
	uint64_t since = job == TDAX_UPGRADE ? atomic_exchange(&r->stream_ns, 0)
		       : job == TDAX_DOWNGRADE ? atomic_load(&r->synced_ns) : 0;
	return since ? tdax_age_ns(now, since) : 0;
}

enum tdax_decision tdax_track_reevaluate(struct tdax_range_track *r, const struct tdax_tunables *t,
					 uint64_t now)
{
	int m = tdax_track_metric(r, t, now);
	if (m < 0 && tdax_range_logged(atomic_load(&r->state)))
		m = 0; /* idle */
	return decide(r, m, t, false);
}

bool tdax_track_pin(struct tdax_range_track *r)
{
	for (;;) {
		uint32_t s = atomic_load(&r->state);
		if (s == TDAX_R_UPGRADED)
			return true;
		if (s != TDAX_R_NONE && s != TDAX_R_TO_UPGRADE && s != TDAX_R_TO_DOWNGRADE)
			return false; /* a job is running (or a state no tdax writes) */
		if (move(r, s, TDAX_R_UPGRADED))
			return true;
	}
}

bool tdax_track_unmark(struct tdax_range_track *r)
{
	return move(r, TDAX_R_TO_UPGRADE, TDAX_R_NONE);
}

bool tdax_track_force_downgrade(struct tdax_range_track *r)
{
	return move(r, TDAX_R_UPGRADED, TDAX_R_TO_DOWNGRADE);
}

enum tdax_decision tdax_track_job_begin(struct tdax_range_track *r)
{
	uint32_t s = atomic_load(&r->state);
	if (s == TDAX_R_TO_UPGRADE && move(r, s, TDAX_R_UPGRADING))
		return TDAX_UPGRADE;
	if (s == TDAX_R_TO_DOWNGRADE && move(r, s, TDAX_R_DOWNGRADING))
		return TDAX_DOWNGRADE;
	return TDAX_KEEP;
}

void tdax_track_job_end(struct tdax_range_track *r, enum tdax_decision job, bool ok)
{
	if (job == TDAX_UPGRADE)
		atomic_store(&r->state, ok ? TDAX_R_UPGRADED : TDAX_R_TO_UPGRADE);
	else if (job == TDAX_DOWNGRADE)
		atomic_store(&r->state, ok ? TDAX_R_NONE : TDAX_R_TO_DOWNGRADE);
}

bool tdax_track_job_pending(const struct tdax_range_track *r)
{
	uint32_t s = atomic_load_explicit(&r->state, memory_order_relaxed);
	return s == TDAX_R_TO_UPGRADE || s == TDAX_R_UPGRADING || s == TDAX_R_TO_DOWNGRADE ||
	       s == TDAX_R_DOWNGRADING;
}

void tdax_track_job_reclaim(struct tdax_range_track *r)
{
	uint32_t s = TDAX_R_UPGRADING;
	if (!atomic_compare_exchange_strong(&r->state, &s, TDAX_R_TO_UPGRADE) && s == TDAX_R_DOWNGRADING)
		atomic_compare_exchange_strong(&r->state, &s, TDAX_R_TO_DOWNGRADE);
}
