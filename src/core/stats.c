/*
 * stats -- names of the device-wide counters (for status and info output).
 */
#include "core/stats.h"

_Static_assert(TDAX_STATS_OFF + TDAX_ST_COUNT * 8 <= TDAX_TUNABLES_OFF, "stats fit their place");

const char *tdax_fallback_name(enum tdax_fallback f)
{
	static const char *const names[TDAX_FB_COUNT] = {
		"none", "log_full", "not_upgraded", "metadata", "unseen_write", "mmap", "stdio",
		"copy", "direct_io", "writeback_error", "unregistered", "passthrough", "async_io",
		"big_write",
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
		"demoted_opened", "demoted_writeback", "demoted_full", "demoted_kernel", "demoted_unselected",
		"persists", "persists_real", "upgrades_reserved",
	};
	static const char *const lat[2 * (TDAX_LAT_BUCKETS + 1)] = {
		"light_sync_ns_le_256", "light_sync_ns_le_1024", "light_sync_ns_le_4096",
		"light_sync_ns_le_16384", "light_sync_ns_le_65536", "light_sync_ns_le_262144",
		"light_sync_ns_le_1048576", "light_sync_ns_le_4194304", "light_sync_ns_le_16777216",
		"light_sync_ns_le_inf", "light_sync_ns_sum",
		"real_sync_ns_le_256", "real_sync_ns_le_1024", "real_sync_ns_le_4096",
		"real_sync_ns_le_16384", "real_sync_ns_le_65536", "real_sync_ns_le_262144",
		"real_sync_ns_le_1048576", "real_sync_ns_le_4194304", "real_sync_ns_le_16777216",
		"real_sync_ns_le_inf", "real_sync_ns_sum",
	};
	static const char *const after[TDAX_ST_COUNT - TDAX_ST_MAP_FAULTS] = {
		"map_faults", "map_bytes", "cache_hits", "cache_misses", "cache_fills", "cache_evictions",
		"cache_writebacks", "cache_noblock", "known_landings",
	};
	if (s >= TDAX_ST_MAP_FAULTS)
		return s < TDAX_ST_COUNT ? after[s - TDAX_ST_MAP_FAULTS] : "unknown";
	if (s >= TDAX_ST_LAT0)
		return lat[s - TDAX_ST_LAT0];
	return s < TDAX_ST_FALLBACK0 ? names[s] : tdax_fallback_name((enum tdax_fallback)(s - TDAX_ST_FALLBACK0));
}
