/*
 * out -- how the tdax command reports: exit codes, error and usage
 * messages, and text or --json output (strings made safe, counters).
 */
#ifndef TDAX_CLI_OUT_H
#define TDAX_CLI_OUT_H

#include <stdio.h>

#include "core/util.h"

/* Exit codes (documented in docs/cli.md). */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_INCOMPLETE = 3 };

/* Print at most max bytes of s for a terminal: printable ASCII and
 * well-formed UTF-8 as they are; control characters (C0, C1), invisible and
 * bidirectional marks, and bytes that are not UTF-8, as \xNN; a backslash
 * as \\ -- so no file name can move the cursor, clear the screen or pass
 * for another. */
void text_str(FILE *f, const char *s, size_t max);
/* "tdax: MESSAGE" on stderr; returns EXIT_FAIL. */
int fail(const struct tdax_err *e);
/* "tdax CMD: " fmt (with arg) on stderr, and where to find the usage;
 * returns EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, const char *arg);
/* Print s as a JSON string (bytes that are not UTF-8 as \\udcXX, out.c). */
void json_str(FILE *f, const char *s);
struct tdax_device;
/* The device-wide counters as a JSON object. */
void json_counters(const struct tdax_device *dev);

#endif
