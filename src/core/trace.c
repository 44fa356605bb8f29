/*
 * trace -- the event record for the simulator (see trace.h).
 */
#define _GNU_SOURCE
#include "core/trace.h"
#include "core/sys.h"
#include "core/control.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

bool tdax_tracing;
static int trace_fd = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char buf[64 << 10];
static size_t used;

/* Raw system calls: the hooks must not see the trace's own I/O. */
static ssize_t raw_write(int fd, const void *p, size_t n)
{
	return tdax_syscall(SYS_write, fd, p, n);
}

int tdax_trace_create(const char *path, const struct tdax_device *dev, struct tdax_err *err)
{
	int fd = (int)tdax_syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		if (errno == EEXIST)
			return tdax_errf(err, "%s: exists; tdax appends to a trace only it created (remove it "
				"or pick another name)", path);
		return tdax_errf(err, "%s: cannot create the trace: %s", path, strerror(errno));
	}
	struct tdax_tunables t;
	tdax_control_get(dev, &t);
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	struct tdax_trace_header h = {
		.magic = TDAX_TRACE_MAGIC, .version = TDAX_TRACE_VERSION,
		.record_size = sizeof(struct tdax_trace_rec), .upgrade_pct = t.upgrade_pct,
		.downgrade_pct = t.downgrade_pct, .write_threshold = t.write_threshold,
		.gran_order = t.gran_order, .wb_window_ns = t.wb_window_ns, .wr_window_ns = t.wr_window_ns,
		.log_capacity = u.capacity, .start_ns = tdax_now_ns(),
	};
	ssize_t w = raw_write(fd, &h, sizeof(h));
	tdax_syscall(SYS_close, fd);
	return w == (ssize_t)sizeof(h) ? 0 : tdax_errf(err, "%s: cannot write the trace header", path);
}

void tdax_trace_start(const struct tdax_device *dev, int (*keep)(int *fdp))
{
	const char *path = secure_getenv("TDAX_TRACE");
	if (!path || !*path)
		return;
	tdax_trace_create(path, dev, NULL); /* by hand (no tdax run): the first process makes it */
	trace_fd = (int)tdax_syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_APPEND | O_CLOEXEC);
	tdax_tracing = trace_fd >= 0 && keep(&trace_fd) == 0; /* out of the application's way */
}

static void flush_locked(void)
{
	if (used && raw_write(trace_fd, buf, used) != (ssize_t)used)
		tdax_tracing = false; /* a broken trace stops; the application goes on */
	used = 0;
}

static void put(const void *p, size_t n)
{
	if (used + n > sizeof(buf))
		flush_locked();
	memcpy(buf + used, p, n);
	used += n;
}

void tdax_trace_event(uint16_t kind, uint32_t file, uint64_t off, uint32_t len, uint16_t flags)
{
	struct tdax_trace_rec r = { tdax_now_ns(), tdax_pid(), file, off, len, kind, flags };
	pthread_mutex_lock(&lock);
	put(&r, sizeof(r));
	pthread_mutex_unlock(&lock);
}

void tdax_trace_name(uint32_t file, const char *path)
{
	size_t n = strlen(path), padded = (n + 31) & ~(size_t)31;
	struct tdax_trace_rec r = { tdax_now_ns(), tdax_pid(), file, 0, (uint32_t)n, TDAX_TR_NAME, 0 };
	char name[TDAX_FILE_PATH_MAX_TRACE];
	memset(name, 0, sizeof(name));
	memcpy(name, path, n < sizeof(name) ? n : sizeof(name));
	pthread_mutex_lock(&lock);
	put(&r, sizeof(r));
	put(name, padded < sizeof(name) ? padded : sizeof(name));
	pthread_mutex_unlock(&lock);
}

void tdax_trace_flush(void)
{
	if (!tdax_tracing)
		return;
	pthread_mutex_lock(&lock);
	flush_locked();
	pthread_mutex_unlock(&lock);
}

void tdax_trace_after_fork(void)
{
	used = 0; /* the parent writes what it buffered */
	pthread_mutex_init(&lock, NULL);
}
