/*
 * args -- the options of the tdax commands that only name a device
 * (--device, --json, --force, ...), and root's flags to open any user's.
 */
#ifndef TDAX_CLI_ARGS_H
#define TDAX_CLI_ARGS_H

#include <stdbool.h>

/* --device's default is tdax_env_device() (core/env.h): $TDAX_DEVICE, else
 * the user's default region; the flags to open it with are
 * tdax_env_open_flags(). admin_flags adds to them, for root naming a region
 * other than its own default, leave to inspect, recover or remove any
 * user's region (recovery acts as the region's owner). */
int admin_flags(const char *path);

/* Options of the commands that name a device. parse_dev_args returns -1
 * to go on, or the exit status (after --help or bad usage); `allowed` lists
 * the option letters a command takes ('+': positional arguments follow, at
 * optind). open_dev_args also opens the device. */
struct dev_args {
	const char *path;
	bool json, force, power_failure, discard, verbose, configured;
};
struct tdax_device;
int parse_dev_args(const char *cmd, const char *help, int argc, char **argv, const char *allowed,
		   struct dev_args *a);
int open_dev_args(const char *cmd, const char *help, int argc, char **argv, const char *allowed,
		  struct dev_args *a, struct tdax_device **dev);

#endif
