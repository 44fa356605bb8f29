/*
 * args -- the options shared by the commands that only name a device, and
 * root's flags to open any user's (args.h).
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/out.h"
#include "core/device.h"
#include "core/env.h"

int admin_flags(const char *path)
{
	bool named = strcmp(path, tdax_default_device()) != 0;
	return tdax_env_open_flags() | (geteuid() == 0 && named ? TDAX_OPEN_ANY_OWNER : 0);
}

int parse_dev_args(const char *cmd, const char *help, int argc, char **argv,
			  const char *allowed, struct dev_args *a)
{
	static const struct option opts[] = {
		{ "device", required_argument, 0, 'd' }, { "json", no_argument, 0, 'j' },
		{ "force", no_argument, 0, 'f' }, { "power-failure", no_argument, 0, 'p' },
		{ "discard-unmatched", no_argument, 0, 'x' }, { "verbose", no_argument, 0, 'v' },
		{ "allow-shared", no_argument, 0, 'a' }, { "help", no_argument, 0, 'h' },
		{ "configured", no_argument, 0, 'c' },
		{ 0, 0, 0, 0 },
	};
	int c;
	a->path = tdax_env_device();
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
		case 'c': a->configured = true; break;
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
