/*
 * control -- the policy's tunables, kept in the device so that a change
 * (`tdax set KEY=VALUE`) reaches every process using it at once. Readers
 * take a snapshot with relaxed loads; a writer validates the whole set
 * before storing it.
 */
#ifndef TDAX_CONTROL_H
#define TDAX_CONTROL_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/device.h"
#include "core/layout.h"
#include "core/tunables.h"

struct tdax_control {
	_Atomic uint32_t upgrade_pct;
	_Atomic uint32_t downgrade_pct;
	_Atomic uint32_t write_threshold;
	_Atomic uint32_t gran_order;
	_Atomic uint64_t wb_window_ns;
	_Atomic uint64_t wr_window_ns;
	/* (0 in a region made before them: their defaults) */
	_Atomic uint32_t bypass_share_pct;
	_Atomic uint32_t bypass_block;
	_Atomic uint64_t bypass_floor;
	_Atomic uint64_t bypass_window_ns;
};

static inline struct tdax_control *tdax_control(const struct tdax_device *dev)
{
	return (struct tdax_control *)(dev->base + TDAX_TUNABLES_OFF);
}

/* Write the defaults (at format). */
void tdax_control_format(struct tdax_device *dev);

/* A snapshot of the tunables. A set that fails tdax_tunables_check() (the
 * region was damaged or written by someone else) reads as the defaults. */
void tdax_control_get(const struct tdax_device *dev, struct tdax_tunables *t);

/* The tunables by name, as `tdax get/set` shows them. */
struct tdax_tunable_info {
	const char *name;
	const char *unit;
	const char *help;
};
extern const struct tdax_tunable_info tdax_tunable_names[TDAX_TUNABLES_N];
uint64_t tdax_tunable_value(const struct tdax_tunables *t, int i);

/* Set every KEY=VALUE of kv[0..n) in the device, or none: all are parsed and
 * the resulting set validated before anything is stored. 0, or -1 with err
 * (unknown key, bad value, or a set that fails validation). */
int tdax_control_set(struct tdax_device *dev, char *const *kv, int n, struct tdax_err *err);

/* tdax_control_set's parsing and validation alone: every KEY=VALUE of
 * kv[0..n) into *t, then the set checked. 0, or -1 with err. */
int tdax_control_parse(struct tdax_tunables *t, char *const *kv, int n, struct tdax_err *err);

#endif
