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

/* The length of the well-formed UTF-8 sequence s starts with (2 to 4
 * bytes: no overlong form, no surrogate, nothing past U+10FFFF), or 0. */
static int utf8_len(const unsigned char *s)
{
	unsigned c = s[0];
	int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	for (int i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
	    (c == 0xf4 && s[1] > 0x8f))
		return 0;
	return n;
}

/* A JSON string is Unicode: a file name's bytes that are not UTF-8 are
 * written as the lone surrogates U+DC80..U+DCFF, Python's surrogateescape
 * (os.fsencode gives the name's bytes back; other parsers show U+FFFD). */
void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	while (*s) {
		const unsigned char *u = (const unsigned char *)s;
		int n = u[0] >= 0x80 ? utf8_len(u) : 1;
		if (u[0] == '"' || u[0] == '\\')
			fprintf(f, "\\%c", u[0]);
		else if (u[0] < 0x20 || u[0] == 0x7f)
			fprintf(f, "\\u%04x", u[0]);
		else if (n == 0)
			fprintf(f, "\\udc%02x", u[0]);
		else
			fwrite(u, 1, (size_t)n, f);
		s += n ? n : 1;
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
