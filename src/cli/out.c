/*
 * out -- how the tdax command reports: error and usage messages, and the
 * pieces of text and --json output its commands share.
 */
#include <stdio.h>

#include "cli/out.h"
#include "core/device.h"
#include "core/stats.h"

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

void json_counters(const struct tdax_device *dev)
{
	const _Atomic uint64_t *c = tdax_stats(dev);
	printf("{");
	for (int i = 0; i < TDAX_ST_COUNT; i++)
		if (i != TDAX_ST_FALLBACK0 + TDAX_FB_NONE)
			printf("%s\"%s%s\": %llu", i ? ", " : "",
			       i >= TDAX_ST_FALLBACK0 && i < TDAX_ST_LAT0 ? "fallback_" : "",
			       tdax_stat_name((enum tdax_stat)i), (unsigned long long)atomic_load(&c[i]));
	printf("}");
}
