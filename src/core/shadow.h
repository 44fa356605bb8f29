/*
 * shadow -- a test aid (test build only, src/core/testaid.h): the durable view
 * of a file, kept beside it.
 *
 * With TDAX_TEST_DURABLE_SHADOW=1, every real sync tdax makes of a file
 * first copies the file to PATH.tdax-durable. Together with the records the
 * sync leaves live, that copy is exactly what a disk would hold after a
 * power cut at that moment, so a test can cut the power by replacing the
 * file with it and running `tdax recover --power-failure`. Off by default;
 * costs one getenv per process when off. In the product build the call is
 * an empty inline function.
 */
#ifndef TDAX_SHADOW_H
#define TDAX_SHADOW_H

#include <stdbool.h>

/*
 * The copy belongs to the file, not to its name: when the name goes
 * (unlink) the copy goes with it, and when the file moves (rename) the copy
 * moves too. Otherwise a new file created at the same name (SQLite's
 * rollback journal is deleted and created again for every transaction)
 * would "fall back" to the bytes of the one before it.
 */
#ifdef TDAX_TEST_BUILD
/* Whether TDAX_TEST_DURABLE_SHADOW=1 is set. */
bool tdax_shadow_on(void);
/* Copy the file open as fd to path + ".tdax-durable" (when enabled). Call
 * after taking the release point and before the real sync. */
void tdax_shadow_before_sync(int fd, const char *path);
/* The absolute name `path` was unlinked. */
void tdax_shadow_unlinked(const char *path);
/* The file at absolute name `from` now lives at `to` (with exchange, the
 * two swapped places). */
void tdax_shadow_renamed(const char *from, const char *to, bool exchange);
#else
static inline bool tdax_shadow_on(void)
{
	return false;
}
static inline void tdax_shadow_before_sync(int fd, const char *path)
{
	(void)fd;
	(void)path;
}
static inline void tdax_shadow_unlinked(const char *path)
{
	(void)path;
}
static inline void tdax_shadow_renamed(const char *from, const char *to, bool exchange)
{
	(void)from;
	(void)to;
	(void)exchange;
}
#endif

#endif
