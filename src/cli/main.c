/*
 * main -- the tdax command's entry: the top-level usage (--help) and the
 * dispatch of argv[1] (and argv[2] for "device") to the command files.
 * Written in C so that recovery works on a minimal system with no Python.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cmd_device.h"
#include "cli/cmd_exporter.h"
#include "cli/cmd_pin.h"
#include "cli/cmd_python.h"
#include "cli/cmd_recover.h"
#include "cli/cmd_run.h"
#include "cli/cmd_status.h"
#include "cli/config.h"
#include "cli/intercept.h"
#include "cli/out.h"
#include "core/device.h"
#include "version.h" /* generated: build/gen, scripts/version.sh */

static const char main_help[] =
	"usage: tdax COMMAND [ARGS] (each command takes --help), tdax --version\n"
	"\n"
	"  device create    create and format a device region\n"
	"  device info      show a device region's header, state and usage\n"
	"  device destroy   remove a device region\n"
	"  recover          sync or replay the records left in a device\n"
	"  run              run a command with lightweight syncs\n"
	"  status           what is upgraded, per file and range; sync counters\n"
	"  top              status, refreshed, for watching a running database\n"
	"  metrics          counters and gauges in the Prometheus text format\n"
	"  exporter         the same over HTTP, for Prometheus to scrape (loopback)\n"
	"  get [KEY]        show the policy's tunables\n"
	"  set KEY=VALUE    change a tunable for every process using the device\n"
	"  pin FILE         keep a file's ranges upgraded while it runs (explicit mapping)\n"
	"  bench SUITE      benchmarks side by side, with plots (tdax bench --help)\n"
	"  trace info|dump  read a trace made by tdax run --trace\n"
	"  sim TRACE        replay a trace through the policies (tdax sim --help)\n"
	"  config check|show  the configuration file (" TDAX_CONFIG_DEFAULT ")\n"
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
	if (strcmp(argv[1], "--version") == 0) {
		printf("tdax %s (build %s)\n", TDAX_VERSION, TDAX_BUILD);
		return EXIT_OK;
	}
	if (strcmp(argv[1], "config") == 0)
		return cmd_config(argc - 1, argv + 1);
	/* The file's settings, where neither the command line nor the
	 * environment gives one (config.h). */
	struct tdax_err e;
	if (tdax_config_load(NULL, &tdax_conf, &e) != 0)
		return fail(&e);
	tdax_config_export(&tdax_conf);
	if (strcmp(argv[1], "recover") == 0)
		return cmd_recover(argc - 1, argv + 1);
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} top[] = { { "run", cmd_run }, { "status", cmd_status }, { "top", cmd_top }, { "metrics", cmd_metrics }, { "exporter", cmd_exporter },
		    { "get", cmd_get }, { "set", cmd_set }, { "pin", cmd_pin }, { "bench", cmd_bench },
		    { "trace", cmd_trace }, { "sim", cmd_trace },
		    { "serve-syscalls", cmd_serve_syscalls } /* tdax run's, not listed */ };
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
