/*
 * rules -- the operator's rules of which files tdax manages: TDAX_INCLUDE
 * and TDAX_EXCLUDE, each a ':'-separated list of fnmatch(3) patterns of
 * absolute paths, matched without FNM_PATHNAME: a star matches a slash
 * too, so "/var/lib/redis/" and a star is every file below that
 * directory. They come from `tdax run`'s environment, which the
 * configuration file ([paths], src/cli/config.h) fills. A file qualifies
 * only if no include is given or one matches its path, and no exclude
 * does; manage.c adds the one exception (a file another process has
 * registered stays managed: its writes must not go unseen).
 *
 * Read once, in the constructor. With no rule the check is one load; with
 * rules it costs a readlink of /proc/self/fd per writable open of a
 * regular file (the path the kernel resolved, whatever the open said).
 */
#ifndef TDAX_RULES_H
#define TDAX_RULES_H

#include <stdbool.h>

/* Read the rules from the environment (a warning for one that is not
 * absolute, or past the limits: it is ignored). */
void tdax_rules_configure(void);

/* Do the rules allow the file open as fd (any descriptor, O_PATH too)? */
bool tdax_rules_allow(int fd);

#endif
