/*
 * shadow -- the durable-view copy for power-cut tests (see shadow.h); only
 * the test build compiles this file.
 */
#define _GNU_SOURCE
#include "core/shadow.h"
#include "core/sys.h"
#include "core/testaid.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

static int enabled = -1;

bool tdax_shadow_on(void)
{
	if (enabled < 0) {
		const char *s = TDAX_TEST_ENV("DURABLE_SHADOW");
		enabled = s && strcmp(s, "1") == 0;
	}
	return enabled;
}

/* The copy's name for the file at path. */
static bool copy_name(char out[PATH_MAX], const char *path)
{
	return snprintf(out, PATH_MAX, "%s.tdax-durable", path) < PATH_MAX;
}

/*
 * The copies of one file are taken one at a time, by every thread and
 * process: two at once (the write-back thread's and an exit's checkpoint)
 * would write one temporary file, or rename an older copy over a newer
 * one. The lock is the directory's (flock): no file of the test's own in
 * the application's directory, never a lock on the application's file.
 */
static int lock_copy(const char *dst)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", dst);
	char *slash = strrchr(dir, '/');
	if (!slash)
		return -1;
	*(slash == dir ? slash + 1 : slash) = '\0';
	int fd = (int)tdax_syscall(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		tdax_syscall(SYS_flock, fd, LOCK_EX);
	return fd;
}

void tdax_shadow_before_sync(int fd, const char *path)
{
	if (!tdax_shadow_on())
		return;
	char tmp[PATH_MAX], dst[PATH_MAX];
	if (!copy_name(dst, path))
		return;
	if (snprintf(tmp, sizeof(tmp), "%s.%d", dst, (int)tdax_syscall(SYS_gettid)) >= (int)sizeof(tmp))
		return;
	int lock = lock_copy(dst);
	/* thread-self: the write-back thread has a descriptor table of its own. */
	int in = (int)tdax_syscall(SYS_openat, AT_FDCWD, "/proc/thread-self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char self[64];
	snprintf(self, sizeof(self), "%d", fd);
	int src = (int)tdax_syscall(SYS_openat, in, self, O_RDONLY | O_CLOEXEC);
	int out = (int)tdax_syscall(SYS_openat, AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	char buf[65536];
	ssize_t n;
	off_t off = 0;
	while (src >= 0 && out >= 0 && (n = tdax_sys_pread(src, buf, sizeof(buf), off)) > 0) {
		if (tdax_syscall(SYS_write, out, buf, (size_t)n) != n)
			break;
		off += n;
	}
	if (out >= 0)
		tdax_syscall(SYS_close, out);
	if (src >= 0)
		tdax_syscall(SYS_close, src);
	if (in >= 0)
		tdax_syscall(SYS_close, in);
	tdax_syscall(SYS_rename, tmp, dst);
	if (lock >= 0)
		tdax_syscall(SYS_close, lock); /* and the lock with it */
}

void tdax_shadow_unlinked(const char *path)
{
	char copy[PATH_MAX];
	if (tdax_shadow_on() && copy_name(copy, path))
		tdax_syscall(SYS_unlinkat, AT_FDCWD, copy, 0);
}

void tdax_shadow_renamed(const char *from, const char *to, bool exchange)
{
	char a[PATH_MAX], b[PATH_MAX];
	if (!tdax_shadow_on() || !copy_name(a, from) || !copy_name(b, to))
		return;
	if (exchange && tdax_syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0)
		return;
	/* One side had no copy (or no exchange asked): the copy that exists
	 * moves, and the name it lands on loses whatever copy it had. */
	if (tdax_syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, 0) == 0)
		return;
	if (exchange)
		tdax_syscall(SYS_renameat2, AT_FDCWD, b, AT_FDCWD, a, 0);
	else
		tdax_syscall(SYS_unlinkat, AT_FDCWD, b, 0);
}
