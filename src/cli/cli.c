/*
 * cli -- the tdax command: helpers shared by its commands, and dispatch.
 * Written in C so that recovery works on a minimal system with no Python.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/device.h"
#include "core/stats.h"

const char *default_device(void)
{
	const char *d = secure_getenv("TDAX_DEVICE");
	return d && *d ? d : tdax_default_device();
}

int open_flags(void)
{
	const char *s = secure_getenv("TDAX_ALLOW_SHARED");
	return TDAX_OPEN_NO_PREFAULT | (s && strcmp(s, "1") == 0 ? TDAX_OPEN_ALLOW_SHARED : 0);
}

int admin_flags(const char *path)
{
	bool named = strcmp(path, tdax_default_device()) != 0;
	return open_flags() | (geteuid() == 0 && named ? TDAX_OPEN_ANY_OWNER : 0);
}

void text_str(FILE *f, const char *s, size_t max)
{
	for (size_t i = 0; i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\\')
			fputs("\\\\", f);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
}

int fail(const struct tdax_err *e)
{
	fputs("tdax: ", stderr);
	text_str(stderr, e->msg, sizeof(e->msg));
	fputc('\n', stderr);
	return EXIT_FAIL;
}

int usage_error(const char *cmd, const char *fmt, const char *arg)
{
	fprintf(stderr, "tdax %s: ", cmd);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nRun 'tdax %s --help' for usage.\n", cmd);
	return EXIT_USAGE;
}

/* Print s as a JSON string. */
void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* Options shared by the commands that only name a device. parse_dev_args
 * returns -1 to go on, or the exit status (after --help or bad usage). */
int parse_dev_args(const char *cmd, const char *help, int argc, char **argv,
			  const char *allowed, struct dev_args *a)
{
	static const struct option opts[] = {
		{ "device", required_argument, 0, 'd' }, { "json", no_argument, 0, 'j' },
		{ "force", no_argument, 0, 'f' }, { "power-failure", no_argument, 0, 'p' },
		{ "discard-unmatched", no_argument, 0, 'x' }, { "verbose", no_argument, 0, 'v' },
		{ "allow-shared", no_argument, 0, 'a' }, { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;
	a->path = default_device();
	while ((c = getopt_long(argc, argv, "v", opts, NULL)) != -1) {
		if (c == 'h') {
			fputs(help, stdout);
			return EXIT_OK;
		}
		if (c == 'a') {
			setenv("TDAX_ALLOW_SHARED", "1", 1); /* the same as the variable, for every open */
			continue;
		}
		if (c == '?' || !strchr(allowed, c))
			return usage_error(cmd, "%s", "unknown or misplaced option");
		switch (c) {
		case 'd': a->path = optarg; break;
		case 'j': a->json = true; break;
		case 'f': a->force = true; break;
		case 'p': a->power_failure = true; break;
		case 'x': a->discard = true; break;
		case 'v': a->verbose = true; break;
		}
	}
	if (optind < argc && !strchr(allowed, '+'))
		return usage_error(cmd, "unexpected argument '%s'", argv[optind]);
	return -1;
}

int open_dev_args(const char *cmd, const char *help, int argc, char **argv, const char *allowed,
		  struct dev_args *a, struct tdax_device **dev)
{
	int rc = parse_dev_args(cmd, help, argc, argv, allowed, a);
	if (rc >= 0)
		return rc;
	struct tdax_err e;
	if (tdax_device_open(a->path, admin_flags(a->path), dev, &e))
		return fail(&e);
	return -1;
}

void json_counters(const struct tdax_device *dev)
{
	const _Atomic uint64_t *c = tdax_stats(dev);
	printf("{");
	for (int i = 0; i < TDAX_ST_COUNT; i++)
		if (i != TDAX_ST_FALLBACK0 + TDAX_FB_NONE)
			printf("%s\"%s%s\": %llu", i ? ", " : "", i >= TDAX_ST_FALLBACK0 ? "fallback_" : "",
			       tdax_stat_name((enum tdax_stat)i), (unsigned long long)atomic_load(&c[i]));
	printf("}");
}

/*
 * Benchmarks, the simulator and plots are Python's: hand over to the
 * project's virtual environment (build/bin/tdax -> build/venv/bin/python
 * -m MODULE, with bench/ on the path).
 */
static int handover(const char *module, int first, int argc, char **argv)
{
	char exe[PATH_MAX - 64], py[PATH_MAX], path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return fail(&(struct tdax_err){ "cannot find where tdax is installed" });
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(py, sizeof(py), "%s/../venv/bin/python", exe);
	snprintf(path, sizeof(path), "%s/../../bench", exe);
	if (access(py, X_OK) != 0) {
		fprintf(stderr, "tdax %s: no Python environment at %s; run 'make deps' first\n", argv[0], py);
		return EXIT_FAIL;
	}
	setenv("PYTHONPATH", path, 1);
	char **args = calloc((size_t)argc + 4, sizeof(char *));
	args[0] = py;
	args[1] = "-m";
	args[2] = (char *)module;
	for (int i = first; i < argc; i++)
		args[i - first + 3] = argv[i];
	execv(py, args);
	fprintf(stderr, "tdax %s: cannot run %s: %s\n", argv[0], py, strerror(errno));
	free(args);
	return EXIT_FAIL;
}

static int cmd_bench(int argc, char **argv)
{
	return handover("tdaxbench", 1, argc, argv);
}

/* tdax trace info|dump FILE and tdax sim FILE: the simulator package. */
static int cmd_trace(int argc, char **argv)
{
	return handover("tdaxsim", 0, argc, argv);
}

/* ---- dispatch ---------------------------------------------------------- */

static const char main_help[] =
	"usage: tdax COMMAND [ARGS] (each command takes --help)\n"
	"\n"
	"  device create    create and format a device region\n"
	"  device info      show a device region's header, state and usage\n"
	"  device destroy   remove a device region\n"
	"  recover          sync or replay the records left in a device\n"
	"  run              run a command with lightweight syncs\n"
	"  status           what is upgraded, per file and range; sync counters\n"
	"  top              status, refreshed, for watching a running database\n"
	"  get [KEY]        show the policy's tunables\n"
	"  set KEY=VALUE    change a tunable for every process using the device\n"
	"  bench SUITE      benchmarks side by side, with plots (tdax bench --help)\n"
	"  trace info|dump  read a trace made by tdax run --trace\n"
	"  sim TRACE        replay a trace through the policies (tdax sim --help)\n"
	"\n"
	"The device is --device PATH, else $TDAX_DEVICE, else " TDAX_DEFAULT_DEVICE_HELP " (UID:\n"
	"your user id). A region another user owns is refused unless --allow-shared.\n"
	"Exit status: 0 success, 1 failure (the message says what and what to do),\n"
	"2 bad usage, 3 recovery left some records in the device.\n";

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		fputs(main_help, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	if (strcmp(argv[1], "recover") == 0)
		return cmd_recover(argc - 1, argv + 1);
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} top[] = { { "run", cmd_run }, { "status", cmd_status }, { "top", cmd_top },
		    { "get", cmd_get }, { "set", cmd_set }, { "bench", cmd_bench },
		    { "trace", cmd_trace }, { "sim", cmd_trace } };
	for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
		if (strcmp(argv[1], top[i].name) == 0)
			return top[i].fn(argc - 1, argv + 1);
	if (strcmp(argv[1], "device") == 0 && argc >= 3) {
		if (strcmp(argv[2], "create") == 0)
			return cmd_device_create(argc - 2, argv + 2);
		if (strcmp(argv[2], "info") == 0)
			return cmd_device_info(argc - 2, argv + 2);
		if (strcmp(argv[2], "destroy") == 0)
			return cmd_device_destroy(argc - 2, argv + 2);
	}
	fprintf(stderr, "tdax: unknown command '%s%s%s'\n%s", argv[1], argc >= 3 ? " " : "",
		argc >= 3 ? argv[2] : "", main_help);
	return EXIT_USAGE;
}
