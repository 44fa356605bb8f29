/*
 * cli -- what the tdax command's modules share: exit codes, argument and
 * error helpers, and the command entry points.
 */
#ifndef TDAX_CLI_H
#define TDAX_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "core/util.h"

/* Exit codes (documented in docs/cli.md). */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_INCOMPLETE = 3 };

const char *default_device(void);
/* Flags to open a device with: TDAX_ALLOW_SHARED (or --allow-shared) allows
 * a region other users own or can write. admin_flags adds, for root naming a
 * region other than its own default, leave to inspect, recover or remove any
 * user's region (recovery acts as the region's owner). */
int open_flags(void);
int admin_flags(const char *path);
/* Print at most max bytes of s for a terminal: bytes outside printable ASCII
 * as \xNN, a backslash as \\, so no file name can move the cursor or clear
 * the screen. */
void text_str(FILE *f, const char *s, size_t max);
int fail(const struct tdax_err *e);
int usage_error(const char *cmd, const char *fmt, const char *arg);
void json_str(FILE *f, const char *s);
struct tdax_device;
/* The device-wide counters as a JSON object. */
void json_counters(const struct tdax_device *dev);

/* Options of the commands that name a device. parse_dev_args returns -1
 * to go on, or the exit status (after --help or bad usage); `allowed` lists
 * the option letters a command takes ('+': positional arguments follow, at
 * optind). open_dev_args also opens the device. */
struct dev_args {
	const char *path;
	bool json, force, power_failure, discard, verbose;
};
int parse_dev_args(const char *cmd, const char *help, int argc, char **argv, const char *allowed,
		   struct dev_args *a);
int open_dev_args(const char *cmd, const char *help, int argc, char **argv, const char *allowed,
		  struct dev_args *a, struct tdax_device **dev);

int cmd_device_create(int argc, char **argv);
int cmd_device_info(int argc, char **argv);
int cmd_device_destroy(int argc, char **argv);
int cmd_recover(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_set(int argc, char **argv);

#endif
