/*
 * control -- tunables in the device: defaults, snapshot, set by name.
 */
#include "control.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(TDAX_TUNABLES_OFF + sizeof(struct tdax_control) <= TDAX_HEADER_SIZE,
	       "tunables fit the header");

const struct tdax_tunable_info tdax_tunable_names[6] = {
	{ "upgrade_threshold", "%", "U: upgrade a range when M > U (0..100)" },
	{ "downgrade_threshold", "%", "D: downgrade a range when M < D (0..U)" },
	{ "write_threshold", "writes", "F: decide only once a range has F writes in its window" },
	{ "granularity_order", "", "G: ranges of 2^G pages, for files tracked from now on (0..20)" },
	{ "writeback_window_ms", "ms", "how long a writeback counts (the writeback decay)" },
	{ "write_window_ms", "ms", "how long a write counts (the write decay)" },
};

void tdax_control_get(const struct tdax_device *dev, struct tdax_tunables *t)
{
	const struct tdax_control *c = tdax_control(dev);
	t->upgrade_pct = atomic_load_explicit(&c->upgrade_pct, memory_order_relaxed);
	t->downgrade_pct = atomic_load_explicit(&c->downgrade_pct, memory_order_relaxed);
	t->write_threshold = atomic_load_explicit(&c->write_threshold, memory_order_relaxed);
	t->gran_order = atomic_load_explicit(&c->gran_order, memory_order_relaxed);
	t->wb_window_ns = atomic_load_explicit(&c->wb_window_ns, memory_order_relaxed);
	t->wr_window_ns = atomic_load_explicit(&c->wr_window_ns, memory_order_relaxed);
	if (tdax_tunables_check(t))
		*t = (struct tdax_tunables)TDAX_DEFAULT_TUNABLES;
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
	tdax_persist(dev, c, sizeof(*c));
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
	default: return t->wr_window_ns / 1000000u;
	}
}

int tdax_control_set(struct tdax_device *dev, const char *name, const char *value,
		     struct tdax_err *err)
{
	int i = 0;
	while (i < 6 && strcmp(tdax_tunable_names[i].name, name) != 0)
		i++;
	if (i == 6)
		return tdax_errf(err, "unknown tunable '%s' (see 'tdax get')", name);
	char *end;
	errno = 0;
	unsigned long long v = strtoull(value, &end, 10);
	if (errno || end == value || *end || value[0] == '-' || v > UINT32_MAX)
		return tdax_errf(err, "%s: '%s' is not a whole number", name, value);
	struct tdax_tunables t;
	tdax_control_get(dev, &t);
	switch (i) {
	case 0: t.upgrade_pct = (uint32_t)v; break;
	case 1: t.downgrade_pct = (uint32_t)v; break;
	case 2: t.write_threshold = (uint32_t)v; break;
	case 3: t.gran_order = (uint32_t)v; break;
	case 4: t.wb_window_ns = v * 1000000u; break;
	default: t.wr_window_ns = v * 1000000u; break;
	}
	const char *bad = tdax_tunables_check(&t);
	if (bad)
		return tdax_errf(err, "%s=%s refused: %s; nothing was changed", name, value, bad);
	put(dev, &t);
	return 0;
}
