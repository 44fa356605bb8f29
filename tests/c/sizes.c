/*
 * sizes -- the layouts of the C structs and the values of the constants the
 * Python simulator re-declares (bench/tdaxsim/ctrack.py with ctypes,
 * bench/tdaxsim/trace.py with struct formats), printed as one JSON object:
 * {"structs": {NAME: {"size": N, "fields": [[FIELD, OFFSET, SIZE], ...]}},
 *  "consts": {NAME: VALUE}}. tests/py/test_sim.py compares them.
 */
#include <stddef.h>
#include <stdio.h>

#include "core/log.h"
#include "core/stats.h"
#include "core/trace.h"
#include "policy/select.h"
#include "policy/track.h"

#define FIELD(type, f) { #f, offsetof(struct type, f), sizeof(((struct type *)0)->f) }

struct field {
	const char *name;
	size_t offset, size;
};

static void print_struct(const char *name, size_t size, const struct field *f, size_t n, int last)
{
	printf("    \"%s\": {\"size\": %zu, \"fields\": [", name, size);
	for (size_t i = 0; i < n; i++)
		printf("%s[\"%s\", %zu, %zu]", i ? ", " : "", f[i].name, f[i].offset, f[i].size);
	printf("]}%s\n", last ? "" : ",");
}

#define STRUCT(type, last, ...)                                                              \
	do {                                                                                 \
		static const struct field f[] = { __VA_ARGS__ };                             \
		print_struct(#type, sizeof(struct type), f, sizeof(f) / sizeof(f[0]), last); \
	} while (0)

int main(void)
{
	printf("{\"structs\": {\n");
	STRUCT(tdax_tunables, 0, FIELD(tdax_tunables, upgrade_pct), FIELD(tdax_tunables, downgrade_pct),
	       FIELD(tdax_tunables, write_threshold), FIELD(tdax_tunables, gran_order),
	       FIELD(tdax_tunables, wb_window_ns), FIELD(tdax_tunables, wr_window_ns),
	       FIELD(tdax_tunables, bypass_share_pct), FIELD(tdax_tunables, bypass_block),
	       FIELD(tdax_tunables, bypass_floor), FIELD(tdax_tunables, bypass_window_ns));
	STRUCT(tdax_range_track, 0, FIELD(tdax_range_track, state), FIELD(tdax_range_track, dirty),
	       FIELD(tdax_range_track, last_page), FIELD(tdax_range_track, transitions),
	       FIELD(tdax_range_track, wr), FIELD(tdax_range_track, wb), FIELD(tdax_range_track, sy),
	       FIELD(tdax_range_track, stream_ns), FIELD(tdax_range_track, synced_ns));
	STRUCT(tdax_track_legacy, 0, FIELD(tdax_track_legacy, writes), FIELD(tdax_track_legacy, writebacks),
	       FIELD(tdax_track_legacy, syncs), FIELD(tdax_track_legacy, upgraded));
	STRUCT(tdax_profile, 0, FIELD(tdax_profile, rd), FIELD(tdax_profile, wr), FIELD(tdax_profile, ap),
	       FIELD(tdax_profile, ops), FIELD(tdax_profile, sy));
	STRUCT(tdax_rates, 0, FIELD(tdax_rates, read), FIELD(tdax_rates, write), FIELD(tdax_rates, append),
	       FIELD(tdax_rates, ops), FIELD(tdax_rates, syncs));
	STRUCT(tdax_select_params, 0, FIELD(tdax_select_params, capacity), FIELD(tdax_select_params, floor),
	       FIELD(tdax_select_params, hold_ns), FIELD(tdax_select_params, append_hold_ns),
	       FIELD(tdax_select_params, keep_pct));
	STRUCT(tdax_candidate, 0, FIELD(tdax_candidate, rates), FIELD(tdax_candidate, score),
	       FIELD(tdax_candidate, footprint), FIELD(tdax_candidate, promoted),
	       FIELD(tdax_candidate, selected));
	STRUCT(tdax_trace_header, 0, FIELD(tdax_trace_header, magic), FIELD(tdax_trace_header, version),
	       FIELD(tdax_trace_header, record_size), FIELD(tdax_trace_header, upgrade_pct),
	       FIELD(tdax_trace_header, downgrade_pct), FIELD(tdax_trace_header, write_threshold),
	       FIELD(tdax_trace_header, gran_order), FIELD(tdax_trace_header, wb_window_ns),
	       FIELD(tdax_trace_header, wr_window_ns), FIELD(tdax_trace_header, log_capacity),
	       FIELD(tdax_trace_header, start_ns));
	STRUCT(tdax_trace_rec, 1, FIELD(tdax_trace_rec, t_ns), FIELD(tdax_trace_rec, pid),
	       FIELD(tdax_trace_rec, file), FIELD(tdax_trace_rec, off), FIELD(tdax_trace_rec, len),
	       FIELD(tdax_trace_rec, kind), FIELD(tdax_trace_rec, flags));
	printf("  },\n  \"consts\": {\n");
	static const struct {
		const char *name;
		long long value;
	} c[] = {
		{ "TDAX_KEEP", TDAX_KEEP }, { "TDAX_UPGRADE", TDAX_UPGRADE },
		{ "TDAX_DOWNGRADE", TDAX_DOWNGRADE }, { "TDAX_R_NONE", TDAX_R_NONE },
		{ "TDAX_R_TO_UPGRADE", TDAX_R_TO_UPGRADE }, { "TDAX_R_UPGRADING", TDAX_R_UPGRADING },
		{ "TDAX_R_UPGRADED", TDAX_R_UPGRADED }, { "TDAX_R_TO_DOWNGRADE", TDAX_R_TO_DOWNGRADE },
		{ "TDAX_R_DOWNGRADING", TDAX_R_DOWNGRADING }, { "TDAX_WIN_BUCKETS", TDAX_WIN_BUCKETS },
		{ "TDAX_TRACE_VERSION", TDAX_TRACE_VERSION }, { "TDAX_TR_WRITE", TDAX_TR_WRITE },
		{ "TDAX_TR_SYNC", TDAX_TR_SYNC }, { "TDAX_TR_OPEN", TDAX_TR_OPEN },
		{ "TDAX_TR_META", TDAX_TR_META }, { "TDAX_TR_NAME", TDAX_TR_NAME },
		{ "TDAX_TRF_CREATE", TDAX_TRF_CREATE }, { "TDAX_TRF_REAL", TDAX_TRF_REAL },
		{ "TDAX_FB_MMAP", TDAX_FB_MMAP }, { "TDAX_FB_STDIO", TDAX_FB_STDIO },
		{ "TDAX_FB_METADATA", TDAX_FB_METADATA }, { "TDAX_SELECT_KEEP_PCT", TDAX_SELECT_KEEP_PCT },
		{ "TDAX_SELECT_APPEND_HOLD_NS", (long long)TDAX_SELECT_APPEND_HOLD_NS },
		{ "TDAX_REC_HEADER_BYTES", (long long)sizeof(struct tdax_rec) },
		{ "TDAX_PROFILE_UNIT_SHIFT", TDAX_PROFILE_UNIT_SHIFT },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		printf("    \"%s\": %lld%s\n", c[i].name, c[i].value, i + 1 < sizeof(c) / sizeof(c[0]) ? "," : "");
	printf("  },\n  \"trace_magic\": \"%s\"\n}\n", TDAX_TRACE_MAGIC);
	return 0;
}
