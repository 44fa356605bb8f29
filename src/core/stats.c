/*
 * stats -- names of the device-wide counters (for status and info output).
 */
#include "core/stats.h"

_Static_assert(TDAX_STATS_OFF + TDAX_ST_COUNT * 8 <= TDAX_HEADER_SIZE, "stats fit the header");

const char *tdax_fallback_name(enum tdax_fallback f)
{
	static const char *const names[TDAX_FB_COUNT] = {
		"none", "log_full", "not_upgraded", "metadata", "unseen_write", "mmap", "stdio",
		"copy", "direct_io", "writeback_error", "unregistered", "passthrough", "async_io",
	};
	return f < TDAX_FB_COUNT ? names[f] : "unknown";
}

const char *tdax_stat_name(enum tdax_stat s)
{
	static const char *const names[TDAX_ST_FALLBACK0] = {
		"light_syncs", "real_syncs", "logged_writes", "logged_bytes", "unlogged_writes",
		"checkpoints", "sync_errors", "upgrades", "downgrades", "logged_truncates", "logged_renames",
		"logged_creates", "logged_fallocates", "dir_syncs", "light_dir_syncs", "leases",
		"lease_breaks", "upgrade_wait_ns", "upgrades_timed", "downgrade_wait_ns",
		"downgrades_timed", "promotions", "demotions", "deferred_writes", "demoted_seen",
		"demoted_opened", "demoted_writeback", "demoted_full", "demoted_kernel",
	};
	return s < TDAX_ST_FALLBACK0 ? names[s] : tdax_fallback_name((enum tdax_fallback)(s - TDAX_ST_FALLBACK0));
}
