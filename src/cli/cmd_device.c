/*
 * cmd_device -- the commands on a device region: device create/info/destroy,
 * recover, and run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/files.h"
#include "core/log.h"
#include "core/recover.h"
#include "core/stats.h"
#include "core/trace.h"

/* ---- tdax device create ---------------------------------------------- */

static const char create_help[] =
	"usage: tdax device create [--device PATH] [--backend emulated|fsdax|devdax]\n"
	"                          [--size SIZE] [--persist-cost NS] [--bandwidth MBPS]\n"
	"                          [--segment-size SIZE] [--owner USER[:GROUP]] [--mode OCTAL]\n"
	"                          [--force]\n"
	"\n"
	"Create and format a device region.\n"
	"  --device PATH        region path (default $TDAX_DEVICE or " TDAX_DEFAULT_DEVICE_HELP ")\n"
	"  --backend B          emulated (default: a file on tmpfs/hugetlbfs; persistence is\n"
	"                       simulated), fsdax (a file on a -o dax mount), devdax (/dev/daxX.Y)\n"
	"  --size SIZE          capacity, e.g. 256M, 1G (default 256M; devdax: whole device)\n"
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
	if (tdax_device_open(path, open_flags() | TDAX_OPEN_ALLOW_SHARED | TDAX_OPEN_ANY_OWNER,
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
		{ "force", no_argument, 0, 'f' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	struct tdax_create_opts o = { .path = default_device(), .backend = TDAX_BACKEND_EMULATED };
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
	if (o.backend != TDAX_BACKEND_EMULATED && (o.persist_cost_ns || o.bandwidth_mbps))
		return usage_error("device create", "%s", "--persist-cost and --bandwidth are for the emulated backend");
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
	if (tdax_device_open(o.path, open_flags() | TDAX_OPEN_ALLOW_SHARED | TDAX_OPEN_ANY_OWNER,
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
	tdax_log_scan(dev, &(struct tdax_scan_cb){ count_live, NULL, &lc });
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
		       "\"log_capacity\": %llu, \"log_used\": %llu, \"live_records\": %llu, "
		       "\"live_bytes\": %llu, \"files_registered\": %u, \"max_files\": %u, "
		       "\"sequence\": %llu, \"state\": \"%s\", \"boot_id\": ",
		       tdax_backend_name(dev->backend), sb->version, uuid,
		       (unsigned long long)sb->capacity, (unsigned long long)sb->created_unix,
		       (unsigned long long)sb->persist_cost_ns, (unsigned long long)sb->bandwidth_mbps,
		       sb->seg_size, sb->nsegs, lu.segs_free, lu.segs_owned, lu.segs_sealed,
		       (unsigned long long)lu.capacity, (unsigned long long)lu.used,
		       (unsigned long long)lc.records, (unsigned long long)lc.bytes, files,
		       sb->max_files, (unsigned long long)atomic_load(dev->seq), state);
		json_str(stdout, dev->st->boot_id);
		printf(", \"boot_changed\": %s, \"persistence\": \"%s\", \"counters\": ",
		       changed ? "true" : "false", persistence);
		json_counters(dev);
		printf("}\n");
	} else {
		printf("device:      ");
		text_str(stdout, a.path, PATH_MAX);
		printf("\nbackend:     %s (%s)\nuuid:        %s\n", tdax_backend_name(dev->backend),
		       persistence, uuid);
		printf("capacity:    %llu MiB, %u segments of %u KiB (%u free, %u in use, %u sealed)\n",
		       (unsigned long long)(sb->capacity >> 20), sb->nsegs, sb->seg_size >> 10,
		       lu.segs_free, lu.segs_owned, lu.segs_sealed);
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
		tdax_log_scan(dev, &(struct tdax_scan_cb){ count_live, NULL, &lc });
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

/* ---- tdax recover ----------------------------------------------------- */

static const char recover_help[] =
	"usage: tdax recover [--device PATH] [--power-failure] [--discard-unmatched] [--json]\n"
	"\n"
	"Bring every file with records in the device up to date, then release them.\n"
	"If the machine rebooted since the device was last used (or --power-failure is\n"
	"given, for a simulated power cut), records are replayed onto their files in\n"
	"sequence order; otherwise the page cache has the data and each file is only\n"
	"fdatasync'ed. Files are opened only if they are still the registered file, and\n"
	"only with the privileges of the user who wrote them. Safe to interrupt and re-run.\n"
	"  --discard-unmatched  release records of files that no longer exist or were\n"
	"                       replaced (otherwise they are kept and reported)\n"
	"exit status: 0 all recovered, 1 error, 2 usage, 3 some files keep their records\n";

static void print_report_json(const char *path, const struct tdax_recover_report *r)
{
	printf("{\"device\": ");
	json_str(stdout, path);
	printf(", \"mode\": \"%s\", \"records\": %llu, \"applied\": %llu, \"bytes\": %llu, "
	       "\"corrupt\": %llu, \"torn\": %llu, \"segments_sealed\": %u, \"seconds\": %.6f, "
	       "\"files\": [", r->replay ? "replay" : "checkpoint", (unsigned long long)r->records,
	       (unsigned long long)r->applied, (unsigned long long)r->bytes,
	       (unsigned long long)r->corrupt, (unsigned long long)r->torn, r->sealed, r->seconds);
	for (uint32_t i = 0; i < r->nfiles; i++) {
		const struct tdax_recover_file *f = &r->files[i];
		printf("%s{\"path\": ", i ? ", " : "");
		json_str(stdout, f->path);
		printf(", \"records\": %llu, \"bytes\": %llu, \"outcome\": \"%s\", \"reason\": ",
		       (unsigned long long)f->records, (unsigned long long)f->bytes,
		       tdax_outcome_name(f->outcome));
		json_str(stdout, f->reason);
		printf("}");
	}
	printf("], \"damaged\": [");
	for (uint32_t i = 0; i < r->ndamage; i++) {
		const struct tdax_recover_damage *d = &r->damage[i];
		printf("%s{\"kind\": \"%s\", \"segment\": %u, \"position\": %llu", i ? ", " : "",
		       d->torn ? "torn" : "corrupt", d->seg, (unsigned long long)d->pos);
		if (d->readable)
			printf(", \"file\": %u, \"seq\": %llu, \"offset\": %llu, \"length\": %u",
			       d->file, (unsigned long long)d->seq, (unsigned long long)d->off, d->len);
		printf("}");
	}
	printf("]}\n");
}

static void print_report_text(const char *path, const struct tdax_recover_report *r)
{
	printf("tdax recover ");
	text_str(stdout, path, PATH_MAX);
	printf(": %s mode (%s)\n", r->replay ? "replay" : "checkpoint",
	       r->replay ? "page cache lost: records applied to files"
			 : "same boot: files synced, nothing replayed");
	printf("  %llu live records in %u files; %llu applied (%llu bytes); %u dead writers' "
	       "segments sealed; %.3f s\n", (unsigned long long)r->records, r->nfiles,
	       (unsigned long long)r->applied, (unsigned long long)r->bytes, r->sealed, r->seconds);
	for (uint32_t i = 0; i < r->nfiles; i++) {
		const struct tdax_recover_file *f = &r->files[i];
		printf("  %-13s ", tdax_outcome_name(f->outcome));
		text_str(stdout, f->path, sizeof(f->path));
		printf(": %llu records%s", (unsigned long long)f->records, f->reason[0] ? ": " : "");
		text_str(stdout, f->reason, sizeof(f->reason));
		printf("\n");
	}
	printf("  %llu corrupt records skipped, %llu torn tails (writes in flight)\n",
	       (unsigned long long)r->corrupt, (unsigned long long)r->torn);
	for (uint32_t i = 0; i < r->ndamage; i++) {
		const struct tdax_recover_damage *d = &r->damage[i];
		printf("  %s record at segment %u offset %llu", d->torn ? "torn" : "corrupt", d->seg,
		       (unsigned long long)d->pos);
		if (d->readable)
			printf(": file #%u seq %llu offset %llu length %u", d->file,
			       (unsigned long long)d->seq, (unsigned long long)d->off, d->len);
		printf("\n");
	}
}

int cmd_recover(int argc, char **argv)
{
	struct dev_args a = { 0 };
	struct tdax_device *dev;
	int rc = open_dev_args("recover", recover_help, argc, argv, "djpx", &a, &dev);
	if (rc >= 0)
		return rc;
	struct tdax_recover_opts o = { .power_failure = a.power_failure, .discard_unmatched = a.discard };
	struct tdax_recover_report r;
	struct tdax_err e;
	rc = tdax_recover(dev, &o, &r, &e);
	tdax_device_close(dev);
	if (rc < 0)
		return fail(&e);
	if (a.json)
		print_report_json(a.path, &r);
	else
		print_report_text(a.path, &r);
	tdax_recover_report_free(&r);
	return rc ? EXIT_INCOMPLETE : EXIT_OK;
}

/* ---- tdax run ---------------------------------------------------------- */

static const char run_help[] =
	"usage: tdax run [--device PATH] [--policy thesis|always|never] [--quiet] [--trace FILE]\n"
	"                [--allow-shared] -- CMD [ARGS...]\n"
	"\n"
	"Run CMD with libtdax.so preloaded: syncs of file ranges that are upgraded to the\n"
	"device are answered there; everything else goes to the kernel as usual.\n"
	"  --device PATH   device region (default $TDAX_DEVICE or " TDAX_DEFAULT_DEVICE_HELP ";\n"
	"                  the default one is created on first use, emulated on /dev/shm)\n"
	"  --policy P      thesis (default: upgrade the ranges the tracking policy picks, see\n"
	"                  'tdax get'), always (log every write), never (track, never upgrade)\n"
	"  --quiet         no fallback warnings on stderr (counters still count)\n"
	"  --trace FILE    record every write and sync of managed files in FILE (a new file),\n"
	"                  for 'tdax trace' and 'tdax sim'\n"
	"  --allow-shared  accept a region another user owns or any user can write\n"
	"                  (TDAX_ALLOW_SHARED=1); such a region is refused otherwise\n"
	"If the region cannot be used, CMD runs without tdax (every sync goes to the\n"
	"kernel) and one line on stderr says why.\n"
	"Environment passed on: TDAX_DEVICE, TDAX_POLICY, TDAX_QUIET, LD_PRELOAD; tunables of\n"
	"the write-back: TDAX_WB_INTERVAL_MS (10), TDAX_WB_AGE_MS (1000), TDAX_WB_BYTES (32M),\n"
	"TDAX_WB_HIGH_PCT (90). Exit status: CMD's, or 1 if libtdax.so is missing.\n";

/* build/bin/tdax -> build/lib/libtdax.so (or $TDAX_LIB). */
static int find_library(char *out, size_t len)
{
	const char *env = secure_getenv("TDAX_LIB");
	if (env && *env) {
		snprintf(out, len, "%s", env);
		return access(out, R_OK);
	}
	char exe[PATH_MAX - 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	*slash = '\0';
	snprintf(out, len, "%s/../lib/libtdax.so", exe);
	return access(out, R_OK);
}

/* Open (creating the default device on first use) and bring it up to date,
 * so that problems are reported here, before the application starts. 0, or
 * -1 with err: the application then runs without tdax. */
static int prepare_device(const char *path, bool explicit_path, struct tdax_err *e)
{
	struct stat st;
	if (!explicit_path && lstat(path, &st) != 0 && errno == ENOENT) {
		struct tdax_create_opts o = { .path = path, .backend = TDAX_BACKEND_EMULATED };
		if (tdax_device_create(&o, e))
			return -1;
		fprintf(stderr, "tdax: created the default device %s (emulated on /dev/shm: it "
			"survives process crashes and simulated power failures, not real power loss)\n",
			path);
	}
	struct tdax_device *dev;
	if (tdax_device_open(path, open_flags(), &dev, e))
		return -1;
	int rc = 0;
	if (tdax_device_boot_changed(dev)) {
		struct tdax_recover_report r;
		rc = tdax_recover(dev, &(struct tdax_recover_opts){ 0 }, &r, e);
		if (rc >= 0) {
			fprintf(stderr, "tdax: the machine restarted since %s was last used: replayed %llu "
				"records onto %u files\n", path, (unsigned long long)r.applied, r.nfiles);
			if (rc > 0)
				fprintf(stderr, "tdax: some files keep their records; see 'tdax recover "
					"--device %s'\n", path);
			rc = 0;
			tdax_recover_report_free(&r);
		}
	}
	tdax_device_close(dev);
	return rc;
}

/* The environment that preloads libtdax.so on the region at path. */
static int start_with_tdax(const char *path, const char *libabs, const char *policy, bool quiet,
			   const char *trace, struct tdax_err *e)
{
	char abs[PATH_MAX];
	if (!realpath(path, abs))
		return tdax_errf(e, "%s: cannot resolve the device path: %s", path, strerror(errno));
	const char *pre = secure_getenv("LD_PRELOAD");
	char preload[2 * PATH_MAX];
	snprintf(preload, sizeof(preload), "%s%s%s", libabs, pre && *pre ? " " : "", pre ? pre : "");
	setenv("LD_PRELOAD", preload, 1);
	setenv("TDAX_DEVICE", abs, 1);
	if (policy)
		setenv("TDAX_POLICY", policy, 1);
	if (quiet)
		setenv("TDAX_QUIET", "1", 1);
	if (trace) {
		struct tdax_device *dev;
		char tabs[PATH_MAX];
		if (tdax_device_open(abs, open_flags(), &dev, e))
			return -1;
		int rc = tdax_trace_create(trace, dev, e);
		tdax_device_close(dev);
		if (rc)
			return -1;
		if (!realpath(trace, tabs))
			return tdax_errf(e, "%s: cannot resolve the trace path: %s", trace,
					 strerror(errno));
		setenv("TDAX_TRACE", tabs, 1);
	}
	return 0;
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, 0, 'd' }, { "policy", required_argument, 0, 'p' },
		{ "quiet", no_argument, 0, 'q' }, { "trace", required_argument, 0, 't' },
		{ "allow-shared", no_argument, 0, 'a' }, { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *device = NULL, *policy = NULL, *trace = NULL;
	bool quiet = false;
	int c;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (c) {
		case 'd': device = optarg; break;
		case 'p':
			if (strcmp(optarg, "thesis") && strcmp(optarg, "always") && strcmp(optarg, "never"))
				return usage_error("run", "unknown policy '%s' (thesis, always, never)", optarg);
			policy = optarg;
			break;
		case 'q': quiet = true; break;
		case 't': trace = optarg; break;
		case 'a': setenv("TDAX_ALLOW_SHARED", "1", 1); break;
		case 'h': fputs(run_help, stdout); return EXIT_OK;
		default: return usage_error("run", "%s", "bad option");
		}
	}
	if (optind >= argc)
		return usage_error("run", "%s", "no command given (tdax run -- CMD ARGS...)");
	const char *path = device ? device : default_device();
	char lib[PATH_MAX + 32], libabs[PATH_MAX];
	if (find_library(lib, sizeof(lib)) != 0 || !realpath(lib, libabs)) {
		fprintf(stderr, "tdax: cannot find libtdax.so next to this tdax (%s); run 'make' or set "
			"TDAX_LIB\n", lib);
		return EXIT_FAIL;
	}
	struct tdax_err e;
	if (prepare_device(path, device != NULL || secure_getenv("TDAX_DEVICE"), &e) != 0) {
		fputs("tdax: ", stderr);
		text_str(stderr, e.msg, sizeof(e.msg));
		fputs("; starting ", stderr);
		text_str(stderr, argv[optind], PATH_MAX);
		fputs(" without tdax (every sync goes to the kernel)\n", stderr);
	} else if (start_with_tdax(path, libabs, policy, quiet, trace, &e) != 0) {
		return fail(&e);
	}
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "tdax: cannot run %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

