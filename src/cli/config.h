/*
 * config -- the configuration file, /etc/tdax/tdax.conf (or $TDAX_CONFIG):
 * an INI file, parsed by libinih, that gives every tdax command its
 * defaults -- the device, the mode and policy, the write-back's and the
 * policy's tunables, the paths tdax manages, and the regions recovered at
 * boot (docs/cli.md "Configuration file").
 *
 * Precedence: command line > environment > file > built-in default. The
 * file's settings become the environment variables tdax already reads
 * (TDAX_DEVICE, TDAX_POLICY, TDAX_WB_*, TDAX_INCLUDE, ...), set only where
 * the caller's environment has none; an option on the command line sets
 * them over both. `tdax run` passes them on to the preload library, which
 * never reads the file itself.
 */
#ifndef TDAX_CLI_CONFIG_H
#define TDAX_CLI_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "core/util.h"

#define TDAX_CONFIG_DEFAULT "/etc/tdax/tdax.conf"
#define TDAX_CONFIG_MAX_BOOT 16 /* regions recovered at boot */
#define TDAX_CONFIG_MAX_TUNABLES 6
#define TDAX_CONFIG_ENV 13 /* environment variables the file can give (at most 12) */

struct tdax_config {
	char path[4096];
	bool read; /* a file was read (the default file may be absent) */
	struct {
		const char *name; /* TDAX_... */
		char value[4096];
		int line;
	} env[TDAX_CONFIG_ENV];
	int nenv;
	/* [tunables]: KEY=VALUE as `tdax set` takes them, checked as a set. */
	char tunables[TDAX_CONFIG_MAX_TUNABLES][96];
	char *tunable_kv[TDAX_CONFIG_MAX_TUNABLES];
	int ntunables;
	/* [device] path, then each boot_recover: what `tdax recover --configured` recovers. */
	char boot[TDAX_CONFIG_MAX_BOOT][4096];
	int nboot;
};

/* The file main() read for this command (empty if none). */
extern struct tdax_config tdax_conf;

/* Read the file: `file` if not NULL, else $TDAX_CONFIG (set and empty: no
 * file), else TDAX_CONFIG_DEFAULT, whose absence is no error. 0, or -1 with
 * err naming the file, the line and what is wrong there. */
int tdax_config_load(const char *file, struct tdax_config *c, struct tdax_err *err);

/* Set the file's environment variables where the environment has none. */
void tdax_config_export(const struct tdax_config *c);

/* Print the settings the file gives, one per line, with their lines. */
void tdax_config_print(FILE *f, const struct tdax_config *c);

/* tdax config check|show. */
int cmd_config(int argc, char **argv);

#endif
