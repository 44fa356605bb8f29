/*
 * rules -- TDAX_INCLUDE and TDAX_EXCLUDE (rules.h).
 */
#define _GNU_SOURCE
#include "preload/rules.h"
#include "core/util.h"
#include "preload/state.h"

#include <fnmatch.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PATTERNS 64

struct patterns {
	char text[8192]; /* the variable's copy, ':' made '\0' */
	const char *p[MAX_PATTERNS];
	int n;
};

static struct patterns include, exclude;

static void read_patterns(const char *name, struct patterns *ps)
{
	const char *v = secure_getenv(name);
	if (!v || !*v)
		return;
	if (strlen(v) >= sizeof(ps->text)) {
		tdax_warn("%s is longer than 8 KiB; %s", name, "its patterns are ignored");
		return;
	}
	strcpy(ps->text, v);
	for (char *s = ps->text, *next; s; s = next) {
		next = strchr(s, ':');
		if (next)
			*next++ = '\0';
		if (!*s)
			continue;
		if (*s != '/' || ps->n == MAX_PATTERNS) {
			tdax_warn("%s: a pattern is ignored (not an absolute path, or past the 64th): %s",
				  name, s);
			continue;
		}
		ps->p[ps->n++] = s;
	}
}

void tdax_rules_configure(void)
{
	read_patterns("TDAX_INCLUDE", &include);
	read_patterns("TDAX_EXCLUDE", &exclude);
}

static bool matches(const struct patterns *ps, const char *path)
{
	for (int i = 0; i < ps->n; i++)
		if (fnmatch(ps->p[i], path, 0) == 0)
			return true;
	return false;
}

bool tdax_rules_allow(int fd)
{
	if (!include.n && !exclude.n)
		return true;
	char path[PATH_MAX];
	if (tdax_fd_path(fd, path, sizeof(path)) < 0)
		return !include.n; /* nameless: only an include could have wanted it */
	return (!include.n || matches(&include, path)) && !matches(&exclude, path);
}
