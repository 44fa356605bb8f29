/*
 * control -- tunables in the device: defaults, validation, snapshot, set by
 * name.
 */
#include "core/control.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(TDAX_TUNABLES_OFF + sizeof(struct tdax_control) <= TDAX_CACHESTAT_OFF,
	       "tunables fit their place in the header");

const struct tdax_tunable_info tdax_tunable_names[TDAX_TUNABLES_N] = {
	{ "upgrade_threshold", "%", "U: upgrade a range when M > U (0..100)" },
	{ "downgrade_threshold", "%", "D: downgrade a range when M < D (0..U)" },
	{ "write_threshold", "writes", "F: decide only once a range has F writes in its window" },
	{ "granularity_order", "", "G: ranges of 2^G pages, for files tracked from now on (0..20)" },
	{ "writeback_window_ms", "ms", "how long a writeback counts (the writeback decay)" },
	{ "write_window_ms", "ms", "how long a write counts (the write decay)" },
	{ "bypass_share_pct", "%", "bypass mode: the log's share for its block cache and selection (1..100)" },
	{ "bypass_block", "bytes", "bypass mode: block size of caches set up from now on (512..65536, 2^n)" },
	{ "bypass_floor", "B/s", "bypass mode: bandwidth below which a file is not promoted" },
	{ "bypass_window_ms", "ms", "bypass mode: the window a file's bandwidth is measured over" },
};

const char *tdax_tunables_check(const struct tdax_tunables *t)
{
	if (t->upgrade_pct > 100)
		return "upgrade_threshold must be in 0..100";
	if (t->downgrade_pct > 100)
		return "downgrade_threshold must be in 0..100";
	if (t->downgrade_pct > t->upgrade_pct)
		return "downgrade_threshold must not exceed upgrade_threshold";
	if (t->gran_order > TDAX_MAX_GRAN_ORDER)
		return "granularity_order must be in 0..20";
	if (t->wb_window_ns == 0 || t->wr_window_ns == 0)
		return "the windows must be longer than 0 ms";
	if (t->wb_window_ns > TDAX_MAX_WINDOW_NS || t->wr_window_ns > TDAX_MAX_WINDOW_NS)
		return "the windows must be at most 86400000 ms (a day)";
	if (t->bypass_share_pct < 1 || t->bypass_share_pct > 100)
		return "bypass_share_pct must be in 1..100";
	if (t->bypass_block < 512 || t->bypass_block > TDAX_MAX_BYPASS_BLOCK ||
	    (t->bypass_block & (t->bypass_block - 1)))
		return "bypass_block must be a power of two in 512..65536";
	if (t->bypass_window_ns < 10000000ull || t->bypass_window_ns > 60000000000ull)
		return "bypass_window_ms must be in 10..60000";
	return 0;
}

void tdax_control_get(const struct tdax_device *dev, struct tdax_tunables *t)
{
	const struct tdax_control *c = tdax_control(dev);
	t->upgrade_pct = atomic_load_explicit(&c->upgrade_pct, memory_order_relaxed);
	t->downgrade_pct = atomic_load_explicit(&c->downgrade_pct, memory_order_relaxed);
	t->write_threshold = atomic_load_explicit(&c->write_threshold, memory_order_relaxed);
	t->gran_order = atomic_load_explicit(&c->gran_order, memory_order_relaxed);
	t->wb_window_ns = atomic_load_explicit(&c->wb_window_ns, memory_order_relaxed);
	t->wr_window_ns = atomic_load_explicit(&c->wr_window_ns, memory_order_relaxed);
	const struct tdax_tunables d = TDAX_DEFAULT_TUNABLES;
	/* A region made before bypass mode's tunables has zeros there. */
	t->bypass_share_pct = atomic_load_explicit(&c->bypass_share_pct, memory_order_relaxed);
	t->bypass_block = atomic_load_explicit(&c->bypass_block, memory_order_relaxed);
	t->bypass_floor = atomic_load_explicit(&c->bypass_floor, memory_order_relaxed);
	t->bypass_window_ns = atomic_load_explicit(&c->bypass_window_ns, memory_order_relaxed);
	if (!t->bypass_share_pct && !t->bypass_block && !t->bypass_window_ns) {
		t->bypass_share_pct = d.bypass_share_pct;
		t->bypass_block = d.bypass_block;
		t->bypass_window_ns = d.bypass_window_ns;
	}
	if (tdax_tunables_check(t))
		*t = d;
}

static void put(struct tdax_device *dev, const struct tdax_tunables *t)
{
	struct tdax_control *c = tdax_control(dev);
	atomic_store(&c->upgrade_pct, t->upgrade_pct);
	atomic_store(&c->downgrade_pct, t->downgrade_pct);
	atomic_store(&c->write_threshold, t->write_threshold);
	atomic_store(&c->gran_order, t->gran_order);
	atomic_store(&c->wb_window_ns, t->wb_window_ns);
	atomic_store(&c->wr_window_ns, t->wr_window_ns);
	atomic_store(&c->bypass_share_pct, t->bypass_share_pct);
	atomic_store(&c->bypass_block, t->bypass_block);
	atomic_store(&c->bypass_floor, t->bypass_floor);
	atomic_store(&c->bypass_window_ns, t->bypass_window_ns);
	tdax_dev_persist(dev, c, sizeof(*c));
}

void tdax_control_format(struct tdax_device *dev)
{
	struct tdax_tunables t = TDAX_DEFAULT_TUNABLES;
	put(dev, &t);
}

uint64_t tdax_tunable_value(const struct tdax_tunables *t, int i)
{
	switch (i) {
	case 0: return t->upgrade_pct;
	case 1: return t->downgrade_pct;
	case 2: return t->write_threshold;
	case 3: return t->gran_order;
	case 4: return t->wb_window_ns / 1000000u;
	case 5: return t->wr_window_ns / 1000000u;
	case 6: return t->bypass_share_pct;
	case 7: return t->bypass_block;
	case 8: return t->bypass_floor;
	default: return t->bypass_window_ns / 1000000u;
	}
}

/* Parse one NAME=VALUE into t; 0, or -1 with err. */
static int parse_one(struct tdax_tunables *t, const char *kv, struct tdax_err *err)
{
	const char *eq = strchr(kv, '=');
	size_t len = eq ? (size_t)(eq - kv) : strlen(kv);
	int i = 0;
	while (i < TDAX_TUNABLES_N && (strlen(tdax_tunable_names[i].name) != len ||
				       strncmp(tdax_tunable_names[i].name, kv, len) != 0))
		i++;
	if (!eq || i == TDAX_TUNABLES_N)
		return tdax_errf(err, "unknown tunable '%.*s' (see 'tdax get'); nothing was changed",
				 (int)len, kv);
	const char *value = eq + 1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(value, &end, 10);
	if (errno || end == value || *end || value[0] == '-' || (v > UINT32_MAX && i != 8))
		return tdax_errf(err, "%s: '%s' is not a whole number; nothing was changed",
				 tdax_tunable_names[i].name, value);
	switch (i) {
	case 0: t->upgrade_pct = (uint32_t)v; break;
	case 1: t->downgrade_pct = (uint32_t)v; break;
	case 2: t->write_threshold = (uint32_t)v; break;
	case 3: t->gran_order = (uint32_t)v; break;
	case 4: t->wb_window_ns = v * 1000000u; break;
	case 5: t->wr_window_ns = v * 1000000u; break;
	case 6: t->bypass_share_pct = (uint32_t)v; break;
	case 7: t->bypass_block = (uint32_t)v; break;
	case 8: t->bypass_floor = v; break;
	default: t->bypass_window_ns = v * 1000000u; break;
	}
	return 0;
}

int tdax_control_parse(struct tdax_tunables *t, char *const *kv, int n, struct tdax_err *err)
{
	for (int i = 0; i < n; i++)
		if (parse_one(t, kv[i], err))
			return -1;
	const char *bad = tdax_tunables_check(t);
	if (bad) {
		char all[256] = "";
		for (int i = 0, len = 0; i < n && len < (int)sizeof(all); i++)
			len += snprintf(all + len, sizeof(all) - (size_t)len, "%s%s", i ? " " : "", kv[i]);
		return tdax_errf(err, "%s refused: %s; nothing was changed", all, bad);
	}
	return 0;
}

int tdax_control_set(struct tdax_device *dev, char *const *kv, int n, struct tdax_err *err)
{
	struct tdax_tunables t;
	tdax_control_get(dev, &t);
	if (tdax_control_parse(&t, kv, n, err))
		return -1;
	put(dev, &t);
	return 0;
}
