/*
 * out -- how the tdax command reports: error and usage messages, and the
 * pieces of text and --json output its commands share.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/out.h"
#include "core/device.h"
#include "core/stats.h"

/* The length of the well-formed UTF-8 sequence s starts with, within
 * left bytes (2 to 4: no overlong form, no surrogate, nothing past
 * U+10FFFF), or 0; *cp its code point. */
static int utf8_len(const unsigned char *s, size_t left, uint32_t *cp)
{
	unsigned c = s[0];
	int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	if ((size_t)n > left)
		return 0;
	*cp = c & (0x7f >> n);
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		*cp = *cp << 6 | (s[i] & 0x3f);
	}
	if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
	    (c == 0xf4 && s[1] > 0x8f))
		return 0;
	return n;
}

/* Characters a terminal acts on or that hide what follows: the C1
 * controls (U+009B is a CSI), zero-width marks, line and paragraph
 * separators, bidirectional embeddings, overrides and isolates, the BOM. */
static bool hides(uint32_t cp)
{
	return cp <= 0x9f || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

void text_str(FILE *f, const char *s, size_t max)
{
	for (size_t i = 0; i < max && s[i];) {
		const unsigned char *u = (const unsigned char *)s + i;
		uint32_t cp;
		int n = 1;
		if (u[0] >= 0x80 && ((n = utf8_len(u, max - i, &cp)) == 0 || hides(cp)))
			n = 0; /* escaped, a byte at a time */
		if (u[0] == '\\')
			fputs("\\\\", f);
		else if (n == 0 || u[0] < 0x20 || u[0] == 0x7f)
			fprintf(f, "\\x%02x", u[0]);
		else
			fwrite(u, 1, (size_t)n, f);
		i += n ? (size_t)n : 1;
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

/* A JSON string is Unicode: a file name's bytes that are not UTF-8 are
 * written as the lone surrogates U+DC80..U+DCFF, Python's surrogateescape
 * (os.fsencode gives the name's bytes back; other parsers show U+FFFD). */
void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	while (*s) {
		const unsigned char *u = (const unsigned char *)s;
		uint32_t cp;
		int n = u[0] >= 0x80 ? utf8_len(u, 4, &cp) : 1;
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
