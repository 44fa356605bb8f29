/*
 * shadow -- a test aid (test build only, src/testaid.h): the durable view
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

/* Copy the file open as fd to path + ".tdax-durable" (when enabled). Call
 * after taking the release point and before the real sync. */
#ifdef TDAX_TEST_BUILD
void tdax_shadow_before_sync(int fd, const char *path);
#else
static inline void tdax_shadow_before_sync(int fd, const char *path)
{
	(void)fd;
	(void)path;
}
#endif

#endif
