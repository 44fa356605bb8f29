/*
 * cmd_run -- tdax run: run a command with libtdax.so preloaded on a device
 * (created on first use and brought up to date first), or without tdax when
 * the device cannot be used. It becomes the command, but in bypass mode,
 * where it stays its parent (supervise.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cmd_run.h"
#include "cli/config.h"
#include "cli/intercept.h"
#include "cli/out.h"
#include "cli/paths.h"
#include "core/program.h"
#include "cli/supervise.h"
#include "core/control.h"
#include "core/device.h"
#include "core/env.h"
#include "core/format.h"
#include "core/recover.h"
#include "core/trace.h"

static const char run_help[] =
	"usage: tdax run [--device PATH] [--mode coherent|bypass] [--policy adaptive|thesis|always|never]\n"
	"                [--intercept auto|libc|rewrite|syscall] [--quiet|--verbose] [--trace FILE]\n"
	"                [--allow-shared] -- CMD [ARGS...]\n"
	"\n"
	"Run CMD with libtdax.so preloaded: syncs of file ranges that are upgraded to the\n"
	"device are answered there; everything else goes to the kernel as usual.\n"
	"  --device PATH   device region (default $TDAX_DEVICE or " TDAX_DEFAULT_DEVICE_HELP ";\n"
	"                  the default one is created on first use, emulated on /dev/shm)\n"
	"  --mode M        coherent (default: every write goes to the kernel too) or bypass\n"
	"                  (docs/durability.md: a file synced lightweight while the process\n"
	"                  holds a write lease on its only open file is promoted, if it is\n"
	"                  among the busiest that fit bypass mode's share of the device:\n"
	"                  its writes go to the device alone until anything else could\n"
	"                  read it;\n"
	"                  tdax run stays the command's parent, and writes in what a process\n"
	"                  below it leaves in the device when it dies)\n"
	"  --policy P      adaptive (default: thesis, with thresholds that fall for a steady\n"
	"                  sync stream and rise as the device fills, and an upgraded append\n"
	"                  stream carries its state into the next range), thesis (upgrade the\n"
	"                  ranges the thesis' tracking policy picks, see 'tdax get'; under both\n"
	"                  a file made anew at a just removed file's name takes up its\n"
	"                  stream), always (log every write of a file from its first sync\n"
	"                  on), never (track, never upgrade)\n"
	"  --intercept I   how tdax sees CMD's file calls: libc (libtdax.so's hooks; a Go\n"
	"                  or statically linked CMD skips libc and is not seen, which one\n"
	"                  line on stderr says), rewrite (a dynamically linked Go CMD:\n"
	"                  libtdax.so rewrites its runtime's system-call function to call\n"
	"                  the hooks in CMD's own process), syscall (a seccomp filter traps\n"
	"                  opens for writing, renames, and the writes and syncs of the\n"
	"                  files it opened, and tdax run stays as a supervisor that makes\n"
	"                  them through the hooks; tens of microseconds per trapped call;\n"
	"                  coherent mode only) or auto (default, TDAX_INTERCEPT: rewrite\n"
	"                  for a Go CMD it can be made for, syscall for another Go or a\n"
	"                  statically linked CMD in coherent mode where the kernel can\n"
	"                  trap, libc otherwise; such a program that CMD starts goes\n"
	"                  through tdax run the same way)\n"
	"  --quiet         no fallback warnings on stderr (counters still count)\n"
	"  --verbose       also warn (once per reason) of the routine fallbacks: a change of\n"
	"                  names, a range not upgraded, a stdio stream on a file\n"
	"  --trace FILE    record every write and sync of managed files in FILE (a new file),\n"
	"                  for 'tdax trace' and 'tdax sim'\n"
	"  --allow-shared  accept a region another user owns or any user can write\n"
	"                  (TDAX_ALLOW_SHARED=1); such a region is refused otherwise\n"
	"If the region cannot be used, CMD runs without tdax (every sync goes to the\n"
	"kernel) and one line on stderr says why.\n"
	"Read here: TDAX_INTERCEPT. Environment passed on: TDAX_DEVICE, TDAX_MODE, TDAX_POLICY, TDAX_QUIET, TDAX_VERBOSE, LD_PRELOAD; tunables of\n"
	"the write-back: TDAX_WB_INTERVAL_MS (10), TDAX_WB_AGE_MS (1000), TDAX_WB_BYTES (32M),\n"
	"TDAX_WB_HIGH_PCT (90); the log's share left to explicit mappings (include/tdax.h):\n"
	"TDAX_EXPLICIT_RESERVE_PCT (10); the size-aware dual path: TDAX_BIG_WRITE (0: none);\n"
	"bypass mode's share of the device (its block cache, its selection's capacity):\n"
	"TDAX_BYPASS_SHARE_PCT, its blocks: TDAX_BYPASS_BLOCK, the selection's\n"
	"TDAX_BYPASS_FLOOR, TDAX_BYPASS_WINDOW_MS (each over the device's tunable, tdax get);\n"
	"the files managed: TDAX_INCLUDE, TDAX_EXCLUDE (':'-separated patterns). The\n"
	"configuration file (tdax config --help) gives what neither the command line nor\n"
	"the environment does, and its [tunables] are set on the device.\n"
	"Exit status: CMD's, or 1 if libtdax.so is missing.\n";

/* $TDAX_LIB, else the libtdax.so beside this tdax (cli/paths.h). */
static int find_library(char *out, size_t len)
{
	const char *env = secure_getenv("TDAX_LIB");
	if (env && *env) {
		snprintf(out, len, "%s", env);
		return access(out, R_OK);
	}
	char dir[PATH_MAX - 32];
	if (tdax_paths_libdir(dir, sizeof(dir)) != 0) {
		snprintf(out, len, "lib/libtdax.so or lib/tdax/libtdax.so beside this tdax's bin");
		return -1;
	}
	snprintf(out, len, "%s/libtdax.so", dir);
	return 0;
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
	if (tdax_device_open(path, tdax_env_open_flags(), &dev, e))
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
	/* The configuration file's tunables (config.h), for every process on
	 * the device from now on. */
	if (rc == 0 && tdax_conf.ntunables)
		rc = tdax_control_set(dev, tdax_conf.tunable_kv, tdax_conf.ntunables, e);
	tdax_device_close(dev);
	return rc;
}

/* Would execvp find cmd (a '/' in it: that file; else the first entry of
 * PATH that has it)? 0, or the error it would fail with: ENOENT, or
 * EACCES for a file found that may not be run. Asked before the device is
 * touched, so that a mistyped command makes no default device. */
static int runnable(const char *cmd)
{
	if (strchr(cmd, '/'))
		return access(cmd, X_OK) == 0 ? 0 : errno;
	const char *path = getenv("PATH");
	int err = ENOENT;
	for (const char *p = path ? path : "/bin:/usr/bin";;) {
		const char *colon = strchrnul(p, ':');
		char full[PATH_MAX];
		struct stat st;
		int n = snprintf(full, sizeof(full), "%.*s%s%s", (int)(colon - p), p, colon == p ? "" : "/", cmd);
		if (*cmd && n > 0 && n < (int)sizeof(full) && stat(full, &st) == 0 && !S_ISDIR(st.st_mode)) {
			if (access(full, X_OK) == 0)
				return 0;
			err = EACCES;
		}
		if (!*colon)
			return err;
		p = colon + 1;
	}
}

/* The command could not be run: exec's error, and the shell's status. */
static int cannot_run(const char *cmd, int err)
{
	fputs("tdax: cannot run ", stderr);
	text_str(stderr, cmd, PATH_MAX);
	fprintf(stderr, ": %s\n", strerror(err));
	return err == ENOENT ? 127 : 126;
}

/* Never a silent no-op: say so at start when CMD's file calls cannot reach
 * libtdax.so (program.h) and nothing else sees them; why_not says why
 * --intercept syscall does not. */
static void warn_unseen(const char *path, enum tdax_program_kind kind, const char *why_not)
{
	fputs("tdax: ", stderr);
	text_str(stderr, path, PATH_MAX);
	fprintf(stderr, " %s, so libtdax.so sees none of its writes and syncs: they go to the kernel "
		"as without tdax (%s)\n",
		kind == TDAX_PROGRAM_GO ? "is a Go program: its runtime makes its system calls without libc"
					: "is statically linked: libtdax.so cannot be loaded into it",
		why_not);
}

/* Whether CMD's calls are trapped (--intercept syscall), as intercept (auto,
 * libc, syscall) asks for a program of this kind; if it is not seen at
 * all, why not into why_not. */
static bool trap_calls(const char *intercept, enum tdax_program_kind kind, bool bypass, char *why_not,
		       size_t len)
{
	if (!strcmp(intercept, "syscall"))
		return true;
	if (!tdax_program_skips_libc(kind))
		return false; /* libtdax.so sees it */
	if (!strcmp(intercept, "libc")) {
		snprintf(why_not, len, "--intercept libc; --intercept syscall or auto lets tdax see them");
		return false;
	}
	if (bypass) {
		snprintf(why_not, len, "--intercept syscall, which would let tdax see them, works in "
				       "coherent mode only");
		return false;
	}
	int why = tdax_intercept_probe();
	if (why)
		snprintf(why_not, len, "the kernel cannot trap its calls: seccomp: %s; --intercept syscall "
				       "needs Linux 5.19 or later", strerror(why));
	return why == 0;
}

/* Whether libtdax.so is to see CMD's calls by rewriting its Go runtime's
 * system-call function (--intercept rewrite, or auto for a Go program where
 * it can: one trap-free jump a call, in CMD's own process). */
static bool rewrite_calls(const char *intercept, enum tdax_program_kind kind, const char *prog)
{
	return kind == TDAX_PROGRAM_GO && (!strcmp(intercept, "rewrite") || !strcmp(intercept, "auto")) &&
	       tdax_program_go_rewritable(prog);
}

/* The environment that preloads libtdax.so on the region at path. */
static int start_with_tdax(const char *path, const char *libabs, const char *app_preload, const char *policy,
			   const char *talk, const char *trace, const char *intercept, struct tdax_err *e)
{
	char abs[PATH_MAX];
	if (!realpath(path, abs))
		return tdax_errf(e, "%s: cannot resolve the device path: %s", path, strerror(errno));
	char preload[3 * PATH_MAX], self[PATH_MAX];
	snprintf(preload, sizeof(preload), "%s%s%s", libabs, *app_preload ? " " : "", app_preload);
	setenv("LD_PRELOAD", preload, 1);
	setenv("TDAX_DEVICE", abs, 1);
	/* For libtdax.so's exec hooks: how to start a program that skips
	 * libc (launch.c) */
	if (realpath("/proc/self/exe", self))
		setenv("TDAX_BIN", self, 1);
	setenv("TDAX_INTERCEPT", intercept, 1);
	if (policy)
		setenv("TDAX_POLICY", policy, 1);
	if (talk)
		setenv(talk, "1", 1);
	if (trace) {
		struct tdax_device *dev;
		char tabs[PATH_MAX];
		if (tdax_device_open(abs, tdax_env_open_flags(), &dev, e))
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
		{ "verbose", no_argument, 0, 'v' }, { "mode", required_argument, 0, 'm' },
		{ "intercept", required_argument, 0, 'i' }, { 0, 0, 0, 0 },
	};
	const char *device = NULL, *policy = NULL, *trace = NULL;
	const char *intercept = getenv("TDAX_INTERCEPT");
	if (!intercept || !*intercept)
		intercept = "auto";
	const char *talk = NULL; /* TDAX_QUIET or TDAX_VERBOSE */
	int c;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (c) {
		case 'd': device = optarg; break;
		case 'p':
			if (strcmp(optarg, "thesis") && strcmp(optarg, "adaptive") && strcmp(optarg, "always") &&
			    strcmp(optarg, "never"))
				return usage_error("run", "unknown policy '%s' (thesis, adaptive, always, never)",
						   optarg);
			policy = optarg;
			break;
		case 'm':
			if (strcmp(optarg, "coherent") && strcmp(optarg, "bypass"))
				return usage_error("run", "unknown mode '%s' (coherent, bypass)", optarg);
			setenv("TDAX_MODE", optarg, 1);
			break;
		case 'i': intercept = optarg; break;
		case 'q': talk = "TDAX_QUIET"; break;
		case 'v': talk = "TDAX_VERBOSE"; break;
		case 't': trace = optarg; break;
		case 'a': setenv("TDAX_ALLOW_SHARED", "1", 1); break;
		case 'h': fputs(run_help, stdout); return EXIT_OK;
		default: return usage_error("run", "%s", "bad option");
		}
	}
	if (optind >= argc)
		return usage_error("run", "%s", "no command given (tdax run -- CMD ARGS...)");
	if (strcmp(intercept, "auto") && strcmp(intercept, "libc") && strcmp(intercept, "syscall") &&
	    strcmp(intercept, "rewrite"))
		return usage_error("run", "unknown --intercept (or TDAX_INTERCEPT) '%s' (auto, libc, rewrite, syscall)",
				   intercept);
	const char *path = device ? device : tdax_env_device();
	char lib[PATH_MAX + 32], libabs[PATH_MAX];
	if (find_library(lib, sizeof(lib)) != 0 || !realpath(lib, libabs)) {
		fprintf(stderr, "tdax: cannot find libtdax.so next to this tdax (%s); run 'make' or set "
			"TDAX_LIB\n", lib);
		return EXIT_FAIL;
	}
	/* The command's own preloads: a tdax run started by libtdax.so's exec
	 * hook (launch.c) or inside another finds libtdax.so among them. */
	char app_preload[2 * PATH_MAX];
	if (!tdax_preload_without_tdax(secure_getenv("LD_PRELOAD"), app_preload, sizeof(app_preload))) {
		fprintf(stderr, "tdax: LD_PRELOAD is longer than %zu bytes\n", sizeof(app_preload) - 1);
		return EXIT_FAIL;
	}
	bool bypass = getenv("TDAX_MODE") && !strcmp(getenv("TDAX_MODE"), "bypass");
	char prog[PATH_MAX];
	enum tdax_program_kind kind = tdax_program_kind(argv[optind], true, prog, sizeof(prog));
	if (!strcmp(intercept, "syscall") && bypass)
		return usage_error("run", "%s", "--intercept syscall works in coherent mode only");
	if (rewrite_calls(intercept, kind, prog))
		intercept = "rewrite"; /* what libtdax.so reads in CMD (interpose_go.c) */
	else if (!strcmp(intercept, "rewrite") && tdax_program_skips_libc(kind))
		return usage_error("run", "--intercept rewrite: %s is not a dynamically linked Go program (Go 1.19 "
					  "or later) whose system-call function tdax knows; --intercept syscall or auto",
				   prog);
	char why_not[256] = "";
	bool trap = strcmp(intercept, "rewrite") && trap_calls(intercept, kind, bypass, why_not, sizeof(why_not));
	int nope = runnable(argv[optind]);
	if (nope)
		return cannot_run(argv[optind], nope);
	struct tdax_err e;
	if (prepare_device(path, device != NULL || tdax_env_device_named(), &e) != 0) {
		fputs("tdax: ", stderr);
		text_str(stderr, e.msg, sizeof(e.msg));
		fputs("; starting ", stderr);
		text_str(stderr, argv[optind], PATH_MAX);
		fputs(" without tdax (every sync goes to the kernel)\n", stderr);
	} else if (start_with_tdax(path, libabs, app_preload, policy, talk, trace, intercept, &e) != 0) {
		return fail(&e);
	} else if (trap) {
		if (strcmp(intercept, "syscall") && talk && !strcmp(talk, "TDAX_VERBOSE")) {
			fputs("tdax: ", stderr);
			text_str(stderr, prog, PATH_MAX);
			fputs(" skips libc: its file calls are trapped (--intercept syscall)\n", stderr);
		}
		return tdax_intercept_start(argv + optind, app_preload);
	} else {
		if (why_not[0] && (!talk || strcmp(talk, "TDAX_QUIET")))
			warn_unseen(prog, kind, why_not);
		if (!strcmp(intercept, "rewrite") && kind == TDAX_PROGRAM_GO && talk && !strcmp(talk, "TDAX_VERBOSE")) {
			fputs("tdax: ", stderr);
			text_str(stderr, prog, PATH_MAX);
			fputs(" is a Go program: its runtime's system-call function is rewritten to call tdax "
			      "(--intercept rewrite)\n", stderr);
		}
		if (bypass)
			return tdax_supervise(getenv("TDAX_DEVICE"), argv + optind);
	}
	execvp(argv[optind], argv + optind);
	return cannot_run(argv[optind], errno);
}

