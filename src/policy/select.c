/*
 * select -- bypass mode's profiles and selection (select.h).
 */
#include "policy/select.h"
#include "policy/track.h"

/* Units of 64 bytes, rounded up; what one window bucket adds at once is
 * held below 2^32. */
static uint32_t units(uint64_t bytes)
{
	uint64_t u = (bytes + (1u << TDAX_PROFILE_UNIT_SHIFT) - 1) >> TDAX_PROFILE_UNIT_SHIFT;
	return u > 0x7fffffffu ? 0x7fffffffu : (uint32_t)u;
}

void tdax_profile_read(struct tdax_profile *p, uint64_t window_ns, uint64_t now, uint64_t bytes)
{
	if (bytes)
		tdax_window_add(&p->rd, window_ns, now, units(bytes));
}

void tdax_profile_writes(struct tdax_profile *p, uint64_t window_ns, uint64_t now, uint64_t bytes,
			 bool append, uint32_t n)
{
	if (!bytes)
		return;
	tdax_window_add(append ? &p->ap : &p->wr, window_ns, now, units(bytes));
	tdax_window_add(&p->ops, window_ns, now, n);
}

void tdax_profile_write(struct tdax_profile *p, uint64_t window_ns, uint64_t now, uint64_t bytes,
			bool append)
{
	tdax_profile_writes(p, window_ns, now, bytes, append, 1);
}

void tdax_profile_syncs(struct tdax_profile *p, uint64_t window_ns, uint64_t now, uint32_t n)
{
	tdax_window_add(&p->sy, window_ns, now, n);
}

void tdax_profile_sync(struct tdax_profile *p, uint64_t window_ns, uint64_t now)
{
	tdax_profile_syncs(p, window_ns, now, 1);
}

/* n events of a window of window_ns, per second (in microseconds: no
 * product here comes near 2^64 for rates below terabytes a second). */
static uint64_t per_second(uint64_t n, uint64_t window_ns)
{
	uint64_t us = window_ns / 1000u;
	return us ? n * 1000000u / us : 0;
}

void tdax_profile_rates(const struct tdax_profile *p, uint64_t window_ns, uint64_t now,
			struct tdax_rates *r)
{
	r->read = per_second(tdax_window_sum(&p->rd, window_ns, now) << TDAX_PROFILE_UNIT_SHIFT, window_ns);
	r->write = per_second(tdax_window_sum(&p->wr, window_ns, now) << TDAX_PROFILE_UNIT_SHIFT, window_ns);
	r->append = per_second(tdax_window_sum(&p->ap, window_ns, now) << TDAX_PROFILE_UNIT_SHIFT, window_ns);
	r->ops = per_second(tdax_window_sum(&p->ops, window_ns, now), window_ns);
	r->syncs = tdax_window_sum(&p->sy, window_ns, now);
}

uint64_t tdax_select_bandwidth(const struct tdax_rates *r)
{
	return r->read + r->write + r->append;
}

/* What a file would hold in the block cache (select.h). */
static uint64_t footprint(const struct tdax_rates *r, const struct tdax_select_params *p)
{
	return (r->write * (p->hold_ns / 1000000u) + r->append * (p->append_hold_ns / 1000000u)) / 1000u;
}

/* Its place in the ranking: a promoted file's bandwidth with its bonus;
 * 0 if it is no candidate. */
static uint64_t rank(const struct tdax_candidate *c, const struct tdax_select_params *p)
{
	uint64_t bw = tdax_select_bandwidth(&c->rates);
	uint64_t floor = c->promoted ? p->floor / 2 : p->floor;
	if (!c->rates.syncs || bw < floor || !bw)
		return 0;
	return c->promoted ? bw * (100u + p->keep_pct) / 100u : bw;
}

uint64_t tdax_select_total(const struct tdax_candidate *c, size_t n, const struct tdax_select_params *p)
{
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += rank(&c[i], p) ? tdax_select_bandwidth(&c[i].rates) : 0;
	return total;
}

uint64_t tdax_select(struct tdax_candidate *c, uint32_t *order, size_t n,
		     const struct tdax_select_params *p)
{
	uint64_t total = 0;
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		c[i].footprint = footprint(&c[i].rates, p);
		c[i].selected = false;
		if (!(c[i].score = rank(&c[i], p)))
			continue;
		total += tdax_select_bandwidth(&c[i].rates);
		/* Insertion into the ranking, largest first: the candidates are
		 * the files of one process that synced in the window, few. */
		size_t j = m++;
		for (; j > 0 && c[order[j - 1]].score < c[i].score; j--)
			order[j] = order[j - 1];
		order[j] = (uint32_t)i;
	}
	uint64_t left = p->capacity;
	for (size_t k = 0; k < m; k++) {
		struct tdax_candidate *x = &c[order[k]];
		if (x->footprint <= left) {
			x->selected = true;
			left -= x->footprint;
		}
	}
	return total;
}

bool tdax_select_over(const struct tdax_candidate *c, size_t n, const struct tdax_select_params *p)
{
	uint64_t held = 0;
	for (size_t i = 0; i < n; i++)
		held += c[i].promoted ? footprint(&c[i].rates, p) : 0;
	return held > p->capacity + p->capacity / 100u * p->keep_pct;
}

bool tdax_select_due(uint64_t last, uint64_t now_total)
{
	uint64_t d = now_total > last ? now_total - last : last - now_total;
	return d > last / 4 || (last == 0) != (now_total == 0);
}
