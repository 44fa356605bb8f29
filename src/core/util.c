/*
 * util -- error formatting, boot id, clocks, size parsing, pid locks, the
 * test build's assertion failures.
 */
#define _GNU_SOURCE
#include "core/util.h"
#include "core/sys.h"
#include "core/testaid.h"

#include <errno.h>
#include <linux/magic.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef TDAX_TEST_BUILD
_Noreturn void tdax_assert_fail(const char *file, int line, const char *cond)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "tdax[%u]: %s:%d: assertion failed: %s\n", tdax_pid(),
			 file, line, cond);
	if (n < 0)
		n = 0;
	if (n > (int)sizeof(msg) - 1)
		n = (int)sizeof(msg) - 1;
	(void)tdax_syscall(SYS_write, 2, msg, (size_t)n);
	abort();
}
#endif

int tdax_errf(struct tdax_err *err, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return -1;
}

void tdax_boot_id(char out[TDAX_BOOT_ID_LEN + 1])
{
	out[0] = '\0';
	int fd = tdax_sys_open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return;
	ssize_t n = tdax_sys_read(fd, out, TDAX_BOOT_ID_LEN);
	tdax_sys_close(fd);
	out[n == TDAX_BOOT_ID_LEN ? n : 0] = '\0';
}

uint64_t tdax_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t tdax_coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool tdax_fs_unmanaged(long f_type)
{
	switch ((unsigned long)f_type) {
	case TMPFS_MAGIC: case PROC_SUPER_MAGIC: case SYSFS_MAGIC: case DEVPTS_SUPER_MAGIC:
	case HUGETLBFS_MAGIC: case RAMFS_MAGIC: case CGROUP2_SUPER_MAGIC:
		return true;
	}
	return false;
}

uint64_t tdax_name_hash(const char *name)
{
	uint64_t h = 1469598103934665603ull;
	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return h ? h : 1;
}

void tdax_spin_ns(uint64_t ns)
{
	if (!ns)
		return;
	uint64_t end = tdax_now_ns() + ns;
	while (tdax_now_ns() < end)
		__builtin_ia32_pause();
}

int tdax_parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static uint32_t cached_pid;
static pthread_once_t pid_once = PTHREAD_ONCE_INIT;

void tdax_pid_after_fork(void)
{
	cached_pid = 0;
}

static void pid_once_init(void)
{
	pthread_atfork(NULL, NULL, tdax_pid_after_fork);
}

uint32_t tdax_pid(void)
{
	if (!cached_pid) {
		pthread_once(&pid_once, pid_once_init);
		cached_pid = (uint32_t)getpid();
	}
	return cached_pid;
}

int tdax_statx_fd(int fd, unsigned mask, struct statx *stx)
{
	static _Atomic int empty_name; /* 1: the kernel wants "" (before 6.11) */
	if (!atomic_load_explicit(&empty_name, memory_order_relaxed)) {
		/* (glibc's statx() declares the path non-null) */
		int rc = (int)tdax_syscall(SYS_statx, fd, NULL, AT_EMPTY_PATH, mask, stx);
		if (rc == 0 || errno != EFAULT)
			return rc;
		atomic_store_explicit(&empty_name, 1, memory_order_relaxed);
	}
	return tdax_sys_statx(fd, "", AT_EMPTY_PATH, mask, stx);
}

bool tdax_statx_sealed(const struct statx *stx)
{
	return (stx->stx_attributes & (STATX_ATTR_APPEND | STATX_ATTR_IMMUTABLE)) != 0;
}

int tdax_file_size(int fd, uint64_t *size)
{
	struct statx stx;
	if (tdax_statx_fd(fd, STATX_SIZE, &stx) != 0)
		return -1;
	*size = stx.stx_size;
	return 0;
}

int tdax_sync_parent_dir(const char *path)
{
	char dir[PATH_MAX];
	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (;;) {
		char *slash = strrchr(dir, '/');
		if (!slash) {
			errno = EINVAL; /* not absolute */
			return -1;
		}
		slash[slash == dir] = '\0'; /* "/a" -> "/" */
		int fd = tdax_sys_open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
		if (fd >= 0) {
			int rc = (int)tdax_syscall(SYS_fsync, fd);
			int e = errno;
			tdax_sys_close(fd);
			errno = e;
			return rc;
		}
		if ((errno != ENOENT && errno != ENOTDIR) || slash == dir)
			return -1;
	}
}

bool tdax_task_alive(uint32_t pid, uint32_t tid)
{
	if (!pid || !tid ||
	    (tdax_syscall(SYS_tgkill, (pid_t)pid, (pid_t)tid, 0) != 0 && errno != EPERM))
		return false;
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%u/task/%u/stat", pid, tid);
	int fd = tdax_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return true;
	ssize_t n = tdax_sys_read(fd, buf, sizeof(buf) - 1);
	tdax_sys_close(fd);
	buf[n > 0 ? n : 0] = '\0';
	const char *st = strrchr(buf, ')');
	return !(st && st[1] == ' ' && (st[2] == 'Z' || st[2] == 'X'));
}

#ifdef TDAX_TEST_BUILD
/* Test aid (testaid.h): TDAX_TEST_LIFT_PAUSE_US=N has O_APPEND lifted as on
 * a kernel without RWF_NOAPPEND (sys.c), and every lift, whatever it
 * found, wait N microseconds before the write it is for: the window another
 * writer of the same open file would fall into. */
static void lift_pause(void)
{
	const char *us = TDAX_TEST_ENV("LIFT_PAUSE_US");
	if (us)
		usleep((useconds_t)strtoul(us, NULL, 10));
}
#else
static void lift_pause(void)
{
}
#endif

int tdax_append_lift(int fd)
{
	if (tdax_sys_noappend())
		return 0; /* tdax_sys_pwritev_all's writes land at their offsets */
	int fl = (int)tdax_syscall(SYS_fcntl, fd, F_GETFL);
	if (fl < 0)
		return -1;
	int lifted = !(fl & O_APPEND) ? 0 : tdax_syscall(SYS_fcntl, fd, F_SETFL, fl & ~O_APPEND) == 0 ? 1 : -1;
	lift_pause();
	return lifted;
}

void tdax_append_restore(int fd)
{
	int e = errno;
	int fl = (int)tdax_syscall(SYS_fcntl, fd, F_GETFL);
	if (fl >= 0)
		tdax_syscall(SYS_fcntl, fd, F_SETFL, fl | O_APPEND);
	errno = e;
}

uint64_t tdax_pid_start(uint32_t pid)
{
	char path[40], buf[512];
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	int fd = tdax_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	ssize_t n = tdax_sys_read(fd, buf, sizeof(buf) - 1);
	tdax_sys_close(fd);
	buf[n > 0 ? n : 0] = '\0';
	/* After the name (which may hold spaces and parentheses): field 3
	 * on; the start time is field 22. */
	const char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

bool tdax_pid_alive(uint32_t pid)
{
	return tdax_task_alive(pid, pid);
}

bool tdax_pidlock_try(_Atomic uint32_t *word)
{
	uint32_t me = tdax_pid(), cur = 0;
	if (atomic_compare_exchange_strong(word, &cur, me))
		return true;
	/* The holder died while holding it: take it over. */
	return cur != me && !tdax_pid_alive(cur) && atomic_compare_exchange_strong(word, &cur, me);
}

void tdax_pidlock_acquire(_Atomic uint32_t *word)
{
	for (unsigned spins = 0;; spins++) {
		if (tdax_pidlock_try(word))
			return;
		if (spins < 64)
			__builtin_ia32_pause();
		else
			nanosleep(&(struct timespec){ .tv_nsec = 50000 }, NULL);
	}
}

void tdax_pidlock_release(_Atomic uint32_t *word)
{
	atomic_store(word, 0);
}

void tdax_proc_fd_name(int fd, char name[TDAX_PROC_FD_NAME])
{
	snprintf(name, TDAX_PROC_FD_NAME, "/proc/thread-self/fd/%d", fd);
}

ssize_t tdax_fd_path(int fd, char *out, size_t size)
{
	char name[TDAX_PROC_FD_NAME];
	tdax_proc_fd_name(fd, name);
	ssize_t n = tdax_syscall(SYS_readlinkat, AT_FDCWD, name, out, size - 1);
	if (n <= 0 || (size_t)n >= size - 1)
		return -1;
	out[n] = '\0';
	return n;
}

int tdax_fd_reopen(int fd, int flags)
{
	char name[TDAX_PROC_FD_NAME];
	tdax_proc_fd_name(fd, name);
	return (flags & O_NONBLOCK) ? tdax_sys_open_nowait(AT_FDCWD, name, flags & ~O_NONBLOCK)
				    : tdax_sys_open(name, flags, 0);
}
