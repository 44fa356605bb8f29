/*
 * args -- how the tdax command's commands find their device: the default
 * device, the flags to open it with, and the options of the commands that
 * only name a device (--device, --json, --force, ...).
 */
#ifndef TDAX_CLI_ARGS_H
#define TDAX_CLI_ARGS_H

#include <stdbool.h>

/* --device's default: $TDAX_DEVICE, else the user's default region. */
const char *default_device(void);
/* Flags to open a device with: TDAX_ALLOW_SHARED (or --allow-shared) allows
 * a region other users own or can write. admin_flags adds, for root naming a
 * region other than its own default, leave to inspect, recover or remove any
 * user's region (recovery acts as the region's owner). */
int open_flags(void);
int admin_flags(const char *path);

/* Options of the commands that name a device. parse_dev_args returns -1
 * to go on, or the exit status (after --help or bad usage); `allowed` lists
 * the option letters a command takes ('+': positional arguments follow, at
 * optind). open_dev_args also opens the device. */
struct dev_args {
	const char *path;
	bool json, force, power_failure, discard, verbose;
};
struct tdax_device;
int parse_dev_args(const char *cmd, const char *help, int argc, char **argv, const char *allowed,
		   struct dev_args *a);
int open_dev_args(const char *cmd, const char *help, int argc, char **argv, const char *allowed,
		  struct dev_args *a, struct tdax_device **dev);

#endif
