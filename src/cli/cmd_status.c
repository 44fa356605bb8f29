/*
 * cmd_status -- what tdax is doing on a device: status (per file and range),
 * top (status, refreshed), metrics (the same for Prometheus), and the
 * policy's tunables (get, set).
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "core/env.h"
#include "cli/cmd_status.h"
#include "cli/out.h"
#include "core/device.h"
#include "core/cachestat.h"
#include "core/control.h"
#include "core/files.h"
#include "core/log.h"
#include "policy/track.h"
#include "core/ranges.h"
#include "core/stats.h"

/* Per file: how many ranges it has in the table, how many are logged, and
 * how many an explicit mapping of a live process pins (tracking.h). */
struct file_ranges {
	uint32_t total, logged, pinned;
};

static struct file_ranges *count_ranges(const struct tdax_device *dev)
{
	struct file_ranges *fr = calloc(dev->sb->max_files, sizeof(*fr));
	for (uint32_t i = 0; fr && i < dev->sb->max_ranges; i++) {
		const struct tdax_range *r = tdax_range_at(dev, i);
		uint32_t f = tdax_range_file(r);
		if (!atomic_load(&r->key) || f >= dev->sb->max_files ||
		    tdax_file_at(dev, f)->gen != atomic_load(&r->fgen))
			continue;
		fr[f].total++;
		fr[f].logged += tdax_range_logged(atomic_load(&r->t.state));
		uint32_t pin = atomic_load(&r->pin_pid);
		fr[f].pinned += pin && tdax_pid_alive(pin);
	}
	return fr;
}

static void print_ranges(const struct tdax_device *dev, uint32_t f, bool json,
			 const struct tdax_tunables *t)
{
	uint64_t now = tdax_now_ns();
	const struct tdax_file *file = tdax_file_at(dev, f);
	uint32_t g = tdax_file_gran(&file->rt); /* bounded: it comes from the region */
	bool first = true;
	for (uint32_t i = 0; i < dev->sb->max_ranges; i++) {
		const struct tdax_range *r = tdax_range_at(dev, i);
		if (!atomic_load(&r->key) || tdax_range_file(r) != f || atomic_load(&r->fgen) != file->gen)
			continue;
		uint64_t wb = tdax_window_sum(&r->t.wb, t->wb_window_ns, now);
		uint64_t wr = tdax_window_sum(&r->t.wr, t->wr_window_ns, now);
		int m = tdax_track_metric(&r->t, t, now);
		uint64_t start = (uint64_t)tdax_range_number(r) << (g ? g - 1 : 0) << TDAX_PAGE_SHIFT;
		const char *st = tdax_range_state_name(atomic_load(&r->t.state));
		if (json)
			printf("%s{\"range\": %u, \"offset\": %llu, \"state\": \"%s\", \"writebacks\": %llu, "
			       "\"writes\": %llu, \"metric\": %d, \"transitions\": %u}", first ? "" : ", ",
			       tdax_range_number(r), (unsigned long long)start, st,
			       (unsigned long long)wb, (unsigned long long)wr, m,
			       atomic_load(&r->t.transitions));
		else {
			char mtxt[16] = "-"; /* no metric below F writes */
			if (m >= 0)
				snprintf(mtxt, sizeof(mtxt), "%d", m);
			printf("      range %-6u at %-12llu %-12s M=%-4s wb=%-6llu wr=%-6llu transitions=%u\n",
			       tdax_range_number(r), (unsigned long long)start, st, mtxt,
			       (unsigned long long)wb, (unsigned long long)wr,
			       atomic_load(&r->t.transitions));
		}
		first = false;
	}
}

/* ms on average of a reactivity sum, or "-" if nothing was timed. */
static const char *mean_ms(const _Atomic uint64_t *c, enum tdax_stat sum, enum tdax_stat n, char *buf,
			   size_t len)
{
	uint64_t k = atomic_load(&c[n]);
	if (!k)
		return "-";
	snprintf(buf, len, "%.1f ms", (double)atomic_load(&c[sum]) / (double)k / 1e6);
	return buf;
}

/* Reactivity (thesis section 7.3): how soon the policy takes a stream up
 * and lets it go. */
/* The bound of the bucket holding the q-quantile of light or real syncs'
 * timed latencies, as text ("<= 1.0 us"); "none" if none was timed. */
static const char *quantile(const _Atomic uint64_t *c, bool light, double q, char *buf, size_t len)
{
	uint64_t total = 0, seen = 0;
	for (int i = 0; i < TDAX_LAT_BUCKETS; i++)
		total += atomic_load(&c[tdax_lat_stat(light, i)]);
	if (!total)
		return "none";
	for (int i = 0; i < TDAX_LAT_BUCKETS; i++) {
		seen += atomic_load(&c[tdax_lat_stat(light, i)]);
		if ((double)seen >= q * (double)total) {
			uint64_t b = tdax_lat_bound(i);
			if (b == UINT64_MAX)
				snprintf(buf, len, "> %.1f ms", (double)tdax_lat_bound(i - 1) / 1e6);
			else if (b < 1000000)
				snprintf(buf, len, "<= %.2f us", (double)b / 1e3);
			else
				snprintf(buf, len, "<= %.1f ms", (double)b / 1e6);
			return buf;
		}
	}
	return "none";
}

/* The sync latency line: median and 99th percentile, light and real. */
static void latency(const _Atomic uint64_t *c)
{
	char a[32], b[32], d[32], e[32];
	printf("sync latency (one sync in %d timed): lightweight median %s, p99 %s; real median %s, "
	       "p99 %s\n", TDAX_LAT_EVERY, quantile(c, true, 0.5, a, sizeof(a)),
	       quantile(c, true, 0.99, b, sizeof(b)), quantile(c, false, 0.5, d, sizeof(d)),
	       quantile(c, false, 0.99, e, sizeof(e)));
}

static void reactivity(const _Atomic uint64_t *c)
{
	char up[32], down[32];
	printf("reactivity: upgraded %s after the first sync of its stream (%llu timed), downgraded %s "
	       "after its last sync (%llu timed)\n",
	       mean_ms(c, TDAX_ST_UPGRADE_WAIT_NS, TDAX_ST_UPGRADES_TIMED, up, sizeof(up)),
	       (unsigned long long)atomic_load(&c[TDAX_ST_UPGRADES_TIMED]),
	       mean_ms(c, TDAX_ST_DOWNGRADE_WAIT_NS, TDAX_ST_DOWNGRADES_TIMED, down, sizeof(down)),
	       (unsigned long long)atomic_load(&c[TDAX_ST_DOWNGRADES_TIMED]));
}

/* How device memory is mapped (tdax_device_pages), and what mapping it in
 * has cost the processes that used it: faults per byte show the pages they
 * really got. */
static void mapping(const struct tdax_device *dev, const _Atomic uint64_t *c)
{
	struct tdax_pages pg;
	tdax_device_pages(dev, &pg);
	uint64_t faults = atomic_load(&c[TDAX_ST_MAP_FAULTS]), bytes = atomic_load(&c[TDAX_ST_MAP_BYTES]);
	if (pg.size)
		printf("mapping: %llu KiB pages (%s); ", (unsigned long long)(pg.size / 1024), pg.how);
	else
		printf("mapping: %s; ", pg.how);
	printf("%llu page faults mapped %.1f MiB in ahead of use", (unsigned long long)faults,
	       (double)bytes / 1048576.0);
	if (faults)
		printf(" (one per %.0f KiB)", (double)bytes / (double)faults / 1024.0);
	printf("\n");
}

static void status_text(const struct tdax_device *dev, bool verbose)
{
	const _Atomic uint64_t *c = tdax_stats(dev);
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	struct tdax_tunables t;
	tdax_control_get(dev, &t);
	uint64_t light = atomic_load(&c[TDAX_ST_LIGHT_SYNCS]), real = atomic_load(&c[TDAX_ST_REAL_SYNCS]);
	printf("device ");
	text_str(stdout, dev->path, sizeof(dev->path));
	printf(" (%s): log %.1f of %.1f MiB used (%.1f%%)\n",
	       tdax_backend_name(dev->backend), (double)u.used / 1048576.0,
	       (double)u.capacity / 1048576.0, u.capacity ? 100.0 * (double)u.used / (double)u.capacity : 0.0);
	mapping(dev, c);
	printf("syncs: %llu lightweight, %llu real (%.1f%% lightweight)\n", (unsigned long long)light,
	       (unsigned long long)real, light + real ? 100.0 * (double)light / (double)(light + real) : 0.0);
	printf("writes: %llu logged (%.1f MiB; %llu at the file position where tdax knew they land), "
	       "%llu to the kernel only; %llu checkpoints, %llu sync errors\n",
	       (unsigned long long)atomic_load(&c[TDAX_ST_LOGGED_WRITES]),
	       (double)atomic_load(&c[TDAX_ST_LOGGED_BYTES]) / 1048576.0,
	       (unsigned long long)atomic_load(&c[TDAX_ST_KNOWN_LANDINGS]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_UNLOGGED_WRITES]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_CHECKPOINTS]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_SYNC_ERRORS]));
	printf("metadata: %llu creates, %llu truncates, %llu fallocates and %llu renames logged, %llu "
	       "directory syncs before releasing names, %llu directory syncs lightweight\n",
	       (unsigned long long)atomic_load(&c[TDAX_ST_LOGGED_CREATES]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_LOGGED_TRUNCATES]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_LOGGED_FALLOCATES]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_LOGGED_RENAMES]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_DIR_SYNCS]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_LIGHT_DIR_SYNCS]));
	printf("leases: %llu taken (syncs then need no look at the file), %llu broken by another "
	       "open\n", (unsigned long long)atomic_load(&c[TDAX_ST_LEASES]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_LEASE_BREAKS]));
	printf("bypass: %llu promotions, %llu demotions (%llu seen in the process, %llu opened "
	       "elsewhere, %llu write-back, %llu full, %llu kernel calls, %llu unselected), %llu "
	       "writes to the device alone; share %u%% of the log, floor %llu B/s, window %llu ms, "
	       "blocks of %u B for new caches\n",
	       (unsigned long long)atomic_load(&c[TDAX_ST_PROMOTIONS]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_DEMOTIONS]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_DEMOTED_SEEN]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_DEMOTED_OPENED]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_DEMOTED_WRITEBACK]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_DEMOTED_FULL]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_DEMOTED_KERNEL]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_DEMOTED_UNSELECTED]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_DEFERRED_WRITES]), t.bypass_share_pct,
	       (unsigned long long)t.bypass_floor, (unsigned long long)(t.bypass_window_ns / 1000000u),
	       t.bypass_block);
	uint64_t hits = atomic_load(&c[TDAX_ST_CACHE_HITS]), misses = atomic_load(&c[TDAX_ST_CACHE_MISSES]);
	printf("block cache: %llu hits, %llu misses (%.1f%% hits), %llu filled from the file, %llu "
	       "evicted, %llu dirty written back, %llu with no free block (into the file at once)\n",
	       (unsigned long long)hits, (unsigned long long)misses,
	       hits + misses ? 100.0 * (double)hits / (double)(hits + misses) : 0.0,
	       (unsigned long long)atomic_load(&c[TDAX_ST_CACHE_FILLS]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_CACHE_EVICTIONS]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_CACHE_WRITEBACKS]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_CACHE_NOBLOCK]));
	printf("explicit mappings: %llu persists answered from the log, %llu by the kernel\n",
	       (unsigned long long)atomic_load(&c[TDAX_ST_PERSISTS]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_PERSISTS_REAL]));
	printf("ranges: %llu upgrades, %llu downgrades, %llu upgrades left to the reserve for explicit "
	       "mappings; policy U=%u D=%u F=%u G=%u windows %llu/%llu ms\n",
	       (unsigned long long)atomic_load(&c[TDAX_ST_UPGRADES]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_DOWNGRADES]),
	       (unsigned long long)atomic_load(&c[TDAX_ST_UPGRADES_RESERVED]), t.upgrade_pct, t.downgrade_pct,
	       t.write_threshold, t.gran_order, (unsigned long long)(t.wb_window_ns / 1000000u),
	       (unsigned long long)(t.wr_window_ns / 1000000u));
	reactivity(c);
	latency(c);
	printf("fallbacks:");
	int any = 0;
	for (int i = 1; i < TDAX_FB_COUNT; i++) {
		uint64_t v = atomic_load(&c[TDAX_ST_FALLBACK0 + i]);
		if (v)
			printf("%s %s %llu", any++ ? "," : "", tdax_fallback_name((enum tdax_fallback)i),
			       (unsigned long long)v);
	}
	printf("%s\nfiles (upgraded/tracked ranges):\n", any ? "" : " none");
	struct file_ranges *fr = count_ranges(dev);
	for (uint32_t f = 0; fr && f < dev->sb->max_files; f++) {
		const struct tdax_file *file = tdax_file_at(dev, f);
		if (!tdax_file_valid(file))
			continue;
		printf("  %4u/%-4u ", fr[f].logged, fr[f].total);
		text_str(stdout, file->path, sizeof(file->path));
		uint32_t by = atomic_load(&file->rt.deferred), pid;
		struct tdax_cachestat cs;
		if (by)
			printf("  [bypass: promoted by pid %u, %llu bytes logged", by,
			       (unsigned long long)atomic_load(&file->rt.logged_bytes));
		if (by && tdax_cachestat_get(dev, f, file->gen, &cs, &pid))
			printf(", %u blocks of %u KiB cached, %.1f%% hits, %.2f MB/s (%.2f appended)", cs.blocks,
			       cs.block_size >> 10,
			       cs.hits + cs.misses ? 100.0 * (double)cs.hits / (double)(cs.hits + cs.misses) : 0.0,
			       (double)(cs.read + cs.write + cs.append) / 1e6, (double)cs.append / 1e6);
		if (by)
			printf("]");
		if (fr[f].pinned)
			printf("  [pinned: %u ranges (explicit mappings, tdax pin)]", fr[f].pinned);
		printf("\n");
		if (verbose)
			print_ranges(dev, f, false, &t);
	}
	free(fr);
}

static void status_json(const struct tdax_device *dev, bool verbose)
{
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	struct tdax_tunables t;
	tdax_control_get(dev, &t);
	printf("{\"device\": ");
	json_str(stdout, dev->path);
	struct tdax_pages pg;
	tdax_device_pages(dev, &pg);
	printf(", \"log_capacity\": %llu, \"log_used\": %llu, \"page_size\": %llu, \"pages\": ",
	       (unsigned long long)u.capacity, (unsigned long long)u.used, (unsigned long long)pg.size);
	json_str(stdout, pg.how);
	printf(", \"counters\": ");
	json_counters(dev);
	printf(", \"tunables\": {");
	for (int i = 0; i < TDAX_TUNABLES_N; i++)
		printf("%s\"%s\": %llu", i ? ", " : "", tdax_tunable_names[i].name,
		       (unsigned long long)tdax_tunable_value(&t, i));
	printf("}, \"files\": [");
	struct file_ranges *fr = count_ranges(dev);
	bool first = true;
	for (uint32_t f = 0; fr && f < dev->sb->max_files; f++) {
		const struct tdax_file *file = tdax_file_at(dev, f);
		if (!tdax_file_valid(file))
			continue;
		printf("%s{\"path\": ", first ? "" : ", ");
		json_str(stdout, file->path);
		uint32_t by = atomic_load(&file->rt.deferred), off = atomic_load(&file->rt.unmanaged);
		printf(", \"ranges\": %u, \"upgraded\": %u, \"pinned\": %u, \"mode\": \"%s\", "
		       "\"promoted_by\": %u, \"logged_bytes\": %llu", fr[f].total, fr[f].logged, fr[f].pinned,
		       by ? "bypass" : off ? "kernel" : "coherent", by,
		       (unsigned long long)atomic_load(&file->rt.logged_bytes));
		if (off)
			printf(", \"kernel_because\": \"%s\"", tdax_fallback_name((enum tdax_fallback)off));
		struct tdax_cachestat cs;
		uint32_t pid;
		if (by && tdax_cachestat_get(dev, f, file->gen, &cs, &pid))
			printf(", \"cache\": {\"blocks\": %u, \"block_size\": %u, \"hits\": %llu, \"misses\": %llu, "
			       "\"bandwidth\": %llu, \"append_bandwidth\": %llu}", cs.blocks, cs.block_size,
			       (unsigned long long)cs.hits, (unsigned long long)cs.misses,
			       (unsigned long long)(cs.read + cs.write + cs.append), (unsigned long long)cs.append);
		if (verbose) {
			printf(", \"range_detail\": [");
			print_ranges(dev, f, true, &t);
			printf("]");
		}
		printf("}");
		first = false;
	}
	free(fr);
	printf("]}\n");
}

static const char status_help[] =
	"usage: tdax status [--device PATH] [--json] [-v|--verbose]\n"
	"\n"
	"Device use; per file its path, upgraded/tracked ranges (with -v each range's\n"
	"writebacks, writes, metric M and state) and, if promoted (--mode bypass), by which\n"
	"process; lightweight vs real syncs, fallbacks by reason, bytes logged,\n"
	"checkpoints, upgrades and downgrades, promotions and demotions, how soon the\n"
	"policy upgrades a sync stream and downgrades it once it stops (on average), and the\n"
	"pages device memory is mapped with and the page faults mapping it in cost.\n";

/* A command that shows the device its arguments name: open, show, close. */
static int show_device(const char *cmd, const char *help, const char *allowed, int argc, char **argv,
		       void (*show)(const struct tdax_device *dev, const struct dev_args *a))
{
	struct dev_args a = { 0 };
	struct tdax_device *dev;
	int rc = open_dev_args(cmd, help, argc, argv, allowed, &a, &dev);
	if (rc >= 0)
		return rc;
	show(dev, &a);
	tdax_device_close(dev);
	return EXIT_OK;
}

static void status_show(const struct tdax_device *dev, const struct dev_args *a)
{
	if (a->json)
		status_json(dev, a->verbose);
	else
		status_text(dev, a->verbose);
}

int cmd_status(int argc, char **argv)
{
	return show_device("status", status_help, "djv", argc, argv, status_show);
}

/*
 * tdax metrics: the Prometheus text format (exposition format 0.0.4). In a
 * label value a backslash, a double quote and a newline are escaped as the
 * format says; any other byte outside printable ASCII is written as an
 * escaped backslash and xNN, so a file name never breaks a line or the
 * UTF-8 the format requires.
 */
#define METRICS_TOP_FILES 10

static void prom_label(FILE *out, const char *s, size_t max)
{
	for (size_t i = 0; i < max && s[i]; i++) {
		unsigned char b = (unsigned char)s[i];
		if (b == '\\' || b == '"')
			fprintf(out, "\\%c", b);
		else if (b == '\n')
			fputs("\\n", out);
		else if (b < 0x20 || b >= 0x7f)
			fprintf(out, "\\\\x%02x", b);
		else
			fputc(b, out);
	}
}

/* A family's HELP and TYPE lines. */
static void prom_family(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void prom_sample(FILE *out, const struct tdax_device *dev, const char *name, const char *label,
			const char *value, uint64_t n)
{
	fprintf(out, "%s{device=\"", name);
	prom_label(out, dev->path, sizeof(dev->path));
	if (label) {
		fprintf(out, "\",%s=\"", label);
		prom_label(out, value, TDAX_FILE_PATH_MAX);
	}
	fprintf(out, "\"} %llu\n", (unsigned long long)n);
}

static void prom_gauge(FILE *out, const struct tdax_device *dev, const char *name, const char *help,
		       uint64_t n)
{
	prom_family(out, name, "gauge", help);
	prom_sample(out, dev, name, NULL, NULL, n);
}

/* qsort_r: file indices by their upgraded ranges, then tracked ones, most first. */
static int by_upgraded(const void *a, const void *b, void *ranges)
{
	const struct file_ranges *fr = ranges;
	const struct file_ranges *x = &fr[*(const uint32_t *)a], *y = &fr[*(const uint32_t *)b];
	return x->logged != y->logged ? (x->logged < y->logged) - (x->logged > y->logged)
				      : (x->total < y->total) - (x->total > y->total);
}

void tdax_metrics_write(FILE *out, const struct tdax_device *dev)
{
	const _Atomic uint64_t *c = tdax_stats(dev);
	char name[96], help[160];
	for (int i = 0; i < TDAX_ST_FALLBACK0; i++) {
		const char *s = tdax_stat_name((enum tdax_stat)i);
		snprintf(name, sizeof(name), "tdax_%s_total", s);
		snprintf(help, sizeof(help), "The device's counter %s (docs/cli.md, tdax status).", s);
		prom_family(out, name, "counter", help);
		prom_sample(out, dev, name, NULL, NULL, atomic_load(&c[i]));
	}
	static const char *const later[TDAX_ST_COUNT - TDAX_ST_MAP_FAULTS] = {
		"Page faults taken mapping device memory in ahead of use.",
		"Bytes of device memory mapped in ahead of use.",
		"Blocks a read or write of a promoted file found in the block cache (bypass mode).",
		"Blocks a read or write of a promoted file did not find in the block cache.",
		"Blocks read in from the kernel before a write to a part of them (bypass mode).",
		"Blocks the block cache let go (S3-FIFO) to keep free blocks at hand.",
		"Dirty blocks of the block cache written into their files.",
		"Blocks a write of a promoted file found no free block for (written into the file).",
	};
	for (int i = TDAX_ST_MAP_FAULTS; i < TDAX_ST_COUNT; i++) {
		snprintf(name, sizeof(name), "tdax_%s_total", tdax_stat_name((enum tdax_stat)i));
		prom_family(out, name, "counter", later[i - TDAX_ST_MAP_FAULTS]);
		prom_sample(out, dev, name, NULL, NULL, atomic_load(&c[i]));
	}
	struct tdax_pages pg;
	tdax_device_pages(dev, &pg);
	prom_gauge(out, dev, "tdax_device_page_size_bytes",
		   "Size of the pages device memory is mapped with (0: the file system decides).", pg.size);
	prom_family(out, "tdax_fallbacks_total", "counter",
		    "Writes not logged or syncs sent to the kernel, by reason (docs/cli.md).");
	for (int i = 1; i < TDAX_FB_COUNT; i++)
		prom_sample(out, dev, "tdax_fallbacks_total", "reason", tdax_fallback_name((enum tdax_fallback)i),
			    atomic_load(&c[TDAX_ST_FALLBACK0 + i]));
	prom_family(out, "tdax_sync_duration_seconds", "histogram",
		    "Time an application's fsync or fdatasync of a managed file took, by how it was "
		    "answered (one sync in 16 per thread timed).");
	for (int light = 1; light >= 0; light--) {
		const char *kind = light ? "light" : "real";
		uint64_t cum = 0;
		for (int i = 0; i < TDAX_LAT_BUCKETS; i++) {
			cum += atomic_load(&c[tdax_lat_stat(light, i)]);
			fprintf(out, "tdax_sync_duration_seconds_bucket{device=\"");
			prom_label(out, dev->path, sizeof(dev->path));
			if (i < TDAX_LAT_BUCKETS - 1)
				fprintf(out, "\",kind=\"%s\",le=\"%.9g\"} %llu\n", kind,
					(double)tdax_lat_bound(i) / 1e9, (unsigned long long)cum);
			else
				fprintf(out, "\",kind=\"%s\",le=\"+Inf\"} %llu\n", kind, (unsigned long long)cum);
		}
		fprintf(out, "tdax_sync_duration_seconds_sum{device=\"");
		prom_label(out, dev->path, sizeof(dev->path));
		fprintf(out, "\",kind=\"%s\"} %.9f\n", kind,
			(double)atomic_load(&c[tdax_lat_stat(light, TDAX_LAT_BUCKETS)]) / 1e9);
		fprintf(out, "tdax_sync_duration_seconds_count{device=\"");
		prom_label(out, dev->path, sizeof(dev->path));
		fprintf(out, "\",kind=\"%s\"} %llu\n", kind, (unsigned long long)cum);
	}
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	prom_gauge(out, dev, "tdax_log_capacity_bytes", "Size of the device's log.", u.capacity);
	prom_gauge(out, dev, "tdax_log_used_bytes", "Bytes of the log in use (records not yet released).", u.used);
	struct file_ranges *fr = count_ranges(dev);
	uint32_t *files = calloc(dev->sb->max_files, sizeof(*files)), n = 0;
	uint64_t tracked = 0, upgraded = 0;
	for (uint32_t f = 0; fr && files && f < dev->sb->max_files; f++)
		if (tdax_file_valid(tdax_file_at(dev, f))) {
			files[n++] = f;
			tracked += fr[f].total;
			upgraded += fr[f].logged;
		}
	prom_gauge(out, dev, "tdax_files_registered", "Files with an entry in the device.", n);
	prom_gauge(out, dev, "tdax_ranges_tracked", "Ranges the policy tracks.", tracked);
	prom_gauge(out, dev, "tdax_ranges_upgraded", "Ranges upgraded: their writes are logged.", upgraded);
	if (n)
		qsort_r(files, n, sizeof(*files), by_upgraded, fr);
	prom_family(out, "tdax_file_upgraded_ranges", "gauge",
		    "Upgraded ranges of the files with the most (at most 10 files).");
	for (uint32_t i = 0; i < n && i < METRICS_TOP_FILES; i++)
		prom_sample(out, dev, "tdax_file_upgraded_ranges", "path", tdax_file_at(dev, files[i])->path,
			    fr[files[i]].logged);
	free(files);
	free(fr);
}

static void metrics_text(const struct tdax_device *dev, const struct dev_args *a)
{
	(void)a; /* no options but the device */
	tdax_metrics_write(stdout, dev);
}

static const char metrics_help[] =
	"usage: tdax metrics [--device PATH]\n"
	"\n"
	"The device's counters and gauges in the Prometheus text format: every counter of\n"
	"tdax status as tdax_NAME_total, fallbacks by reason, sync latency histograms,\n"
	"log use, files and ranges, and the upgraded ranges of the top 10 files. For a node exporter's textfile collector:\n"
	"tdax metrics > /var/lib/prometheus/node-exporter/tdax.prom.$$ && mv ... tdax.prom\n";

int cmd_metrics(int argc, char **argv)
{
	return show_device("metrics", metrics_help, "d", argc, argv, metrics_text);
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char top_help[] =
	"usage: tdax top [--device PATH] [--interval MS] [--count N] [-v]\n"
	"\n"
	"tdax status, refreshed every interval (default 1000 ms) until Ctrl-C or N refreshes.\n";

int cmd_top(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, 0, 'd' }, { "interval", required_argument, 0, 'i' },
		{ "count", required_argument, 0, 'n' }, { "verbose", no_argument, 0, 'v' },
		{ "allow-shared", no_argument, 0, 'a' }, { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *path = tdax_env_device();
	uint64_t interval = 1000, count = 0;
	bool verbose = false;
	int c;
	while ((c = getopt_long(argc, argv, "v", opts, NULL)) != -1) {
		switch (c) {
		case 'd': path = optarg; break;
		case 'i':
			if (tdax_parse_size(optarg, &interval) || interval == 0)
				return usage_error("top", "bad --interval '%s' (milliseconds)", optarg);
			break;
		case 'n':
			if (tdax_parse_size(optarg, &count))
				return usage_error("top", "bad --count '%s'", optarg);
			break;
		case 'v': verbose = true; break;
		case 'a': setenv("TDAX_ALLOW_SHARED", "1", 1); break;
		case 'h': fputs(top_help, stdout); return EXIT_OK;
		default: return usage_error("top", "%s", "bad option");
		}
	}
	struct tdax_err e;
	struct tdax_device *dev;
	if (tdax_device_open(path, admin_flags(path), &dev, &e))
		return fail(&e);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	bool tty = isatty(STDOUT_FILENO);
	for (uint64_t n = 0; !stop && (count == 0 || n < count); n++) {
		if (tty)
			printf("\033[H\033[2J");
		time_t now = time(NULL);
		printf("tdax top -- %s", ctime(&now));
		status_text(dev, verbose);
		fflush(stdout);
		if (count == 0 || n + 1 < count)
			nanosleep(&(struct timespec){ (time_t)(interval / 1000), (long)(interval % 1000) * 1000000 }, NULL);
	}
	tdax_device_close(dev);
	return EXIT_OK;
}

static const char get_help[] =
	"usage: tdax get [--device PATH] [KEY]\n"
	"\n"
	"Show the policy's tunables (all, or KEY), as every process on the device sees them.\n";

int cmd_get(int argc, char **argv)
{
	struct dev_args a = { 0 };
	int rc = parse_dev_args("get", get_help, argc, argv, "d+", &a);
	if (rc >= 0)
		return rc;
	const char *key = optind < argc ? argv[optind] : NULL;
	int want = -1;
	for (int i = 0; key && i < TDAX_TUNABLES_N; i++)
		if (strcmp(tdax_tunable_names[i].name, key) == 0)
			want = i;
	if (key && want < 0)
		return usage_error("get", "unknown tunable '%s'", key);
	struct tdax_err e;
	struct tdax_device *dev;
	if (tdax_device_open(a.path, admin_flags(a.path), &dev, &e))
		return fail(&e);
	struct tdax_tunables t;
	tdax_control_get(dev, &t);
	for (int i = 0; i < TDAX_TUNABLES_N; i++) {
		if (want >= 0 && i != want)
			continue;
		if (key)
			printf("%llu\n", (unsigned long long)tdax_tunable_value(&t, i));
		else
			printf("%-20s %8llu %-6s %s\n", tdax_tunable_names[i].name,
			       (unsigned long long)tdax_tunable_value(&t, i), tdax_tunable_names[i].unit,
			       tdax_tunable_names[i].help);
	}
	tdax_device_close(dev);
	return EXIT_OK;
}

static const char set_help[] =
	"usage: tdax set [--device PATH] KEY=VALUE...\n"
	"\n"
	"Change tunables of the policy, at once for every process using the device. Values\n"
	"are checked: upgrade/downgrade_threshold in 0..100 with downgrade <= upgrade,\n"
	"granularity_order in 0..20, windows > 0 ms. Keys: see 'tdax get'.\n";

int cmd_set(int argc, char **argv)
{
	struct dev_args a = { 0 };
	int rc = parse_dev_args("set", set_help, argc, argv, "d+", &a);
	if (rc >= 0)
		return rc;
	if (optind >= argc)
		return usage_error("set", "%s", "nothing to set (KEY=VALUE)");
	for (int i = optind; i < argc; i++)
		if (!strchr(argv[i], '='))
			return usage_error("set", "'%s' is not KEY=VALUE", argv[i]);
	struct tdax_err e;
	struct tdax_device *dev;
	if (tdax_device_open(a.path, admin_flags(a.path), &dev, &e))
		return fail(&e);
	rc = tdax_control_set(dev, argv + optind, argc - optind, &e) ? fail(&e) : EXIT_OK;
	tdax_device_close(dev);
	return rc;
}
