/*
 * cmd_device -- the commands on a device region itself: device create,
 * device info and device destroy.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "core/env.h"
#include "cli/cmd_device.h"
#include "cli/out.h"
#include "core/device.h"
#include "core/files.h"
#include "core/format.h"
#include "core/log.h"
#include "core/stats.h"

/* ---- tdax device create ---------------------------------------------- */

static const char create_help[] =
	"usage: tdax device create [--device PATH] [--backend emulated|fsdax|devdax]\n"
	"                          [--size SIZE] [--persistence adr|gpf] [--persist-cost NS]\n"
	"                          [--bandwidth MBPS] [--segment-size SIZE]\n"
	"                          [--owner USER[:GROUP]] [--mode OCTAL] [--force]\n"
	"\n"
	"Create and format a device region.\n"
	"  --device PATH        region path (default $TDAX_DEVICE or " TDAX_DEFAULT_DEVICE_HELP ")\n"
	"  --backend B          emulated (default: a file on tmpfs/hugetlbfs; persistence is\n"
	"                       simulated), fsdax (a file on a -o dax mount), devdax (/dev/daxX.Y)\n"
	"  --size SIZE          capacity, e.g. 256M, 1G (default 256M; devdax: whole device)\n"
	"  --persistence P      emulated: the memory to emulate. adr (default): a store persists\n"
	"                       once its cache line is written back and fenced (CXL memory,\n"
	"                       NVDIMMs); gpf: the CPU caches are in the persistence domain\n"
	"                       (CXL Global Persistent Flush, eADR), a fence and no write-back\n"
	"  --persist-cost NS    emulated: extra nanoseconds per persist barrier (CXL-like cost)\n"
	"  --bandwidth MBPS     emulated: cap on copy bandwidth into the region, MB/s (0 = none)\n"
	"  --segment-size SIZE  log segment size (default 1M; one writer thread per segment)\n"
	"  --owner USER[:GROUP] owner of the region file, so a database user can use it\n"
	"                       (names or numeric ids)\n"
	"  --mode OCTAL         permissions of the region file (default 0600; a mode that lets\n"
	"                       any user write it is refused)\n"
	"  --force              reformat an existing tdax region of yours that no process is\n"
	"                       using (its records are lost); never another file\n";

/* A whole decimal number that is a valid uid/gid (not -1). */
static bool parse_id(const char *s, unsigned *id)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || errno || s[0] == '-' || v >= UINT32_MAX)
		return false;
	*id = (unsigned)v;
	return true;
}

/* USER[:GROUP], each a name or a number; a numeric user with no passwd
 * entry keeps the file's group unless GROUP is given. */
static int parse_owner(const char *s, struct tdax_create_opts *o)
{
	char user[256];
	unsigned id;
	snprintf(user, sizeof(user), "%s", s);
	char *grp = strchr(user, ':');
	if (grp)
		*grp++ = '\0';
	struct passwd *pw = getpwnam(user);
	if (!pw && parse_id(user, &id))
		pw = getpwuid(id);
	if (pw) {
		o->owner = pw->pw_uid;
		o->group = pw->pw_gid;
	} else if (parse_id(user, &id)) {
		o->owner = id;
		o->group = (gid_t)-1;
	} else {
		return -1;
	}
	if (grp) {
		struct group *gr = getgrnam(grp);
		if (gr)
			o->group = gr->gr_gid;
		else if (parse_id(grp, &id))
			o->group = id;
		else
			return -1;
	}
	o->set_owner = true;
	return 0;
}

/* The pid of a live process using the region at path, or 0 (also when it
 * cannot be opened as a region: the caller's own checks say why). */
static uint32_t user_of(const char *path)
{
	struct tdax_err e;
	struct tdax_device *dev;
	if (tdax_device_open(path, tdax_env_open_flags() | TDAX_OPEN_ALLOW_SHARED | TDAX_OPEN_ANY_OWNER,
			     &dev, &e))
		return 0;
	uint32_t pid = tdax_log_live_owner(dev);
	tdax_device_close(dev);
	return pid;
}

int cmd_device_create(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, 0, 'd' }, { "backend", required_argument, 0, 'b' },
		{ "size", required_argument, 0, 's' }, { "persist-cost", required_argument, 0, 'c' },
		{ "bandwidth", required_argument, 0, 'w' }, { "segment-size", required_argument, 0, 'g' },
		{ "owner", required_argument, 0, 'o' }, { "mode", required_argument, 0, 'm' },
		{ "persistence", required_argument, 0, 'p' }, { "force", no_argument, 0, 'f' },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	struct tdax_create_opts o = { .path = tdax_env_device(), .backend = TDAX_BACKEND_EMULATED };
	uint64_t v;
	char *end;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': o.path = optarg; break;
		case 'b':
			if (tdax_backend_parse(optarg, &o.backend))
				return usage_error("device create", "unknown backend '%s' (emulated, fsdax, devdax)", optarg);
			break;
		case 's':
			if (tdax_parse_size(optarg, &o.capacity))
				return usage_error("device create", "bad size '%s' (e.g. 256M)", optarg);
			break;
		case 'c':
			if (tdax_parse_size(optarg, &o.persist_cost_ns) ||
			    o.persist_cost_ns > TDAX_MAX_PERSIST_COST_NS)
				return usage_error("device create", "bad --persist-cost '%s' (nanoseconds, "
						   "at most 1000000)", optarg);
			break;
		case 'p':
			if (tdax_persistence_parse(optarg, &o.persistence))
				return usage_error("device create", "unknown --persistence '%s' (adr, gpf)", optarg);
			break;
		case 'w':
			if (tdax_parse_size(optarg, &o.bandwidth_mbps))
				return usage_error("device create", "bad --bandwidth '%s' (MB/s)", optarg);
			break;
		case 'g':
			if (tdax_parse_size(optarg, &v) || v > (1u << 30))
				return usage_error("device create", "bad --segment-size '%s'", optarg);
			o.seg_size = (uint32_t)v;
			break;
		case 'o':
			if (parse_owner(optarg, &o))
				return usage_error("device create", "unknown user or group in '%s'", optarg);
			break;
		case 'm':
			v = strtoull(optarg, &end, 8);
			if (!*optarg || *end || v > 07777 || (v & 0777) == 0)
				return usage_error("device create", "bad --mode '%s' (octal, e.g. 0660)", optarg);
			o.mode = (mode_t)v & 0777;
			if (o.mode & S_IWOTH)
				return usage_error("device create", "--mode %s lets any user write the region "
					"and forge records in it; use 0600, or 0660 with --owner USER:GROUP "
					"to share it with a group", optarg);
			break;
		case 'f': o.force = true; break;
		case 'h': fputs(create_help, stdout); return EXIT_OK;
		default: return usage_error("device create", "%s", "bad option");
		}
	}
	if (optind < argc)
		return usage_error("device create", "unexpected argument '%s'", argv[optind]);
	if (o.backend != TDAX_BACKEND_EMULATED && (o.persist_cost_ns || o.bandwidth_mbps || o.persistence))
		return usage_error("device create", "%s", "--persistence, --persist-cost and --bandwidth are "
				   "for the emulated backend (libpmem2 finds out how real memory persists)");
	if (o.mode & S_IWGRP)
		fprintf(stderr, "tdax: warning: --mode %04o lets the file's group write the region: its "
			"members can forge or erase records; use 0600 unless you trust them all\n",
			(unsigned)o.mode);
	if (o.mode & S_IROTH)
		fprintf(stderr, "tdax: warning: --mode %04o lets any user read the region, that is "
			"what is written through it; use 0600 or 0660\n", (unsigned)o.mode);
	uint32_t pid = o.force ? user_of(o.path) : 0;
	if (pid) {
		fputs("tdax: ", stderr);
		text_str(stderr, o.path, PATH_MAX);
		fprintf(stderr, ": process %u is using this region; refusing to reformat it under "
			"a running application. Stop it first (--force never touches a region in "
			"use)\n", pid);
		return EXIT_FAIL;
	}
	struct tdax_err e;
	if (tdax_device_create(&o, &e))
		return fail(&e);
	struct tdax_device *dev;
	if (tdax_device_open(o.path, tdax_env_open_flags() | TDAX_OPEN_ALLOW_SHARED | TDAX_OPEN_ANY_OWNER,
			     &dev, &e))
		return fail(&e);
	printf("created %s device at ", tdax_backend_name(dev->backend));
	text_str(stdout, o.path, PATH_MAX);
	printf(": %llu MiB, %u log segments of %u KiB\n",
	       (unsigned long long)(dev->sb->capacity >> 20), dev->sb->nsegs, dev->sb->seg_size >> 10);
	if (dev->backend == TDAX_BACKEND_EMULATED)
		printf("note: emulated persistence survives process crashes and simulated power "
		       "failures, not real power loss\n");
	tdax_device_close(dev);
	return EXIT_OK;
}

/* ---- tdax device info / destroy -------------------------------------- */

struct live_count {
	struct tdax_device *dev;
	uint64_t records, bytes;
};

static int count_live(void *ctx, const struct tdax_rec *r)
{
	struct live_count *lc = ctx;
	if (tdax_rec_live(lc->dev, r)) {
		lc->records++;
		lc->bytes += r->len;
	}
	return 0;
}

static const char info_help[] =
	"usage: tdax device info [--device PATH] [--json]\n"
	"\n"
	"Show a device region's header, state and log usage.\n";

int cmd_device_info(int argc, char **argv)
{
	struct dev_args a = { 0 };
	struct tdax_device *dev;
	int rc = open_dev_args("device info", info_help, argc, argv, "dj", &a, &dev);
	if (rc >= 0)
		return rc;
	const struct tdax_super *sb = dev->sb;
	char uuid[37];
	const uint8_t *u = sb->uuid;
	snprintf(uuid, sizeof(uuid), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
	struct tdax_log_usage lu;
	tdax_log_usage(dev, &lu);
	struct live_count lc = { dev, 0, 0 };
	tdax_log_scan(dev, &(struct tdax_scan_cb){ count_live, NULL, &lc, false });
	uint32_t files = 0;
	for (uint32_t i = 0; i < sb->max_files; i++)
		files += tdax_file_valid(tdax_file_at(dev, i));
	bool changed = tdax_device_boot_changed(dev);
	const char *state = dev->st->clean == TDAX_STATE_CLEAN ? "clean" : "unclean";
	const char *persistence = tdax_device_persistence(dev);

	if (a.json) {
		printf("{\"path\": ");
		json_str(stdout, a.path);
		printf(", \"backend\": \"%s\", \"layout_version\": %u, \"uuid\": \"%s\", "
		       "\"capacity\": %llu, \"created_unix\": %llu, \"persist_cost_ns\": %llu, "
		       "\"bandwidth_mbps\": %llu, \"segment_size\": %u, \"segments\": %u, "
		       "\"segments_free\": %u, \"segments_owned\": %u, \"segments_sealed\": %u, "
		       "\"segments_arena\": %u, "
		       "\"log_capacity\": %llu, \"log_used\": %llu, \"live_records\": %llu, "
		       "\"live_bytes\": %llu, \"files_registered\": %u, \"max_files\": %u, "
		       "\"sequence\": %llu, \"state\": \"%s\", \"boot_id\": ",
		       tdax_backend_name(dev->backend), sb->version, uuid,
		       (unsigned long long)sb->capacity, (unsigned long long)sb->created_unix,
		       (unsigned long long)sb->persist_cost_ns, (unsigned long long)sb->bandwidth_mbps,
		       sb->seg_size, sb->nsegs, lu.segs_free, lu.segs_owned, lu.segs_sealed, lu.segs_arena,
		       (unsigned long long)lu.capacity, (unsigned long long)lu.used,
		       (unsigned long long)lc.records, (unsigned long long)lc.bytes, files,
		       sb->max_files, (unsigned long long)atomic_load(dev->seq), state);
		json_str(stdout, dev->st->boot_id);
		printf(", \"boot_changed\": %s, \"persistence\": \"%s\", \"emulated_persistence\": ",
		       changed ? "true" : "false", persistence);
		if (dev->backend == TDAX_BACKEND_EMULATED)
			printf("\"%s\"", tdax_persistence_name(dev->persistence));
		else
			printf("null");
		printf(", \"counters\": ");
		json_counters(dev);
		printf("}\n");
	} else {
		printf("device:      ");
		text_str(stdout, a.path, PATH_MAX);
		printf("\nbackend:     %s (%s)\nuuid:        %s\n", tdax_backend_name(dev->backend),
		       persistence, uuid);
		printf("capacity:    %llu MiB, %u segments of %u KiB (%u free, %u in use -- %u of them "
		       "block arenas --, %u sealed)\n",
		       (unsigned long long)(sb->capacity >> 20), sb->nsegs, sb->seg_size >> 10,
		       lu.segs_free, lu.segs_owned, lu.segs_arena, lu.segs_sealed);
		printf("log:         %llu of %llu KiB used; %llu live records (%llu bytes) not yet "
		       "on flash\n", (unsigned long long)(lu.used >> 10),
		       (unsigned long long)(lu.capacity >> 10), (unsigned long long)lc.records,
		       (unsigned long long)lc.bytes);
		printf("files:       %u registered (of %u)\n", files, sb->max_files);
		printf("state:       %s; last used in boot ", state);
		text_str(stdout, dev->st->boot_id, sizeof(dev->st->boot_id));
		printf("%s\n", changed ? " (not this boot: run 'tdax recover' to replay)" : " (this boot)");
		printf("syncs:       %llu answered in the device, %llu by the kernel\n",
		       (unsigned long long)atomic_load(&tdax_stats(dev)[TDAX_ST_LIGHT_SYNCS]),
		       (unsigned long long)atomic_load(&tdax_stats(dev)[TDAX_ST_REAL_SYNCS]));
		if (sb->persist_cost_ns || sb->bandwidth_mbps)
			printf("emulation:   +%llu ns per persist barrier, bandwidth cap %llu MB/s\n",
			       (unsigned long long)sb->persist_cost_ns,
			       (unsigned long long)sb->bandwidth_mbps);
	}
	tdax_device_close(dev);
	return EXIT_OK;
}

static const char destroy_help[] =
	"usage: tdax device destroy [--device PATH] [--force]\n"
	"\n"
	"Remove a device region (a devdax device has its header wiped). Refuses while\n"
	"the log holds records that are not on flash yet: run 'tdax recover' first,\n"
	"or pass --force to throw them away. Never removes a region a process is using,\n"
	"nor a file that is not a tdax region (not even with --force).\n";

int cmd_device_destroy(int argc, char **argv)
{
	struct dev_args a = { 0 };
	int rc = parse_dev_args("device destroy", destroy_help, argc, argv, "df", &a);
	if (rc >= 0)
		return rc;
	struct tdax_err e;
	struct tdax_device *dev;
	if (tdax_device_open(a.path, admin_flags(a.path) | TDAX_OPEN_ALLOW_SHARED, &dev, &e)) {
		if (!a.force)
			return fail(&e);
	} else {
		struct live_count lc = { dev, 0, 0 };
		tdax_log_scan(dev, &(struct tdax_scan_cb){ count_live, NULL, &lc, false });
		uint32_t pid = tdax_log_live_owner(dev);
		tdax_device_close(dev);
		if (pid || (!a.force && lc.records)) {
			fputs("tdax: ", stderr);
			text_str(stderr, a.path, PATH_MAX);
			if (pid)
				fprintf(stderr, ": process %u is using this region; stop it first (not even "
					"--force removes a region in use)\n", pid);
			else
				fprintf(stderr, ": %llu records are not on flash yet; run 'tdax recover "
					"--device PATH' first, or pass --force to lose them\n",
					(unsigned long long)lc.records);
			return EXIT_FAIL;
		}
	}
	if (tdax_device_destroy(a.path, &e))
		return fail(&e);
	printf("destroyed ");
	text_str(stdout, a.path, PATH_MAX);
	printf("\n");
	return EXIT_OK;
}
