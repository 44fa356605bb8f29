/*
 * runtime -- the state of one process under tdax: its view of the device,
 * configuration (from the environment `tdax run` sets), the table of the
 * file descriptors it manages, its private counters and one-line warnings.
 * Also the library's start (constructor), fork and exit handling.
 */
#ifndef TDAX_RUNTIME_H
#define TDAX_RUNTIME_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "core/device.h"
#include "preload/fdtable.h"
#include "core/files.h"
#include "core/stats.h"

enum tdax_policy { TDAX_POLICY_THESIS = 0, TDAX_POLICY_ALWAYS, TDAX_POLICY_NEVER };

struct tdax_runtime {
	struct tdax_device *dev;     /* NULL: tdax is off in this process, all calls pass through */
	enum tdax_policy policy;
	bool quiet;
#ifdef TDAX_TEST_BUILD
	bool test_lie;               /* TDAX_TEST_LIE=1: positive control, see coherent.c */
#endif
	uint64_t wb_interval_ns;     /* how often the write-back thread looks */
	uint64_t wb_age_ns;          /* records older than this are checkpointed */
	uint64_t wb_bytes;           /* a file with this much logged is checkpointed */
	uint32_t wb_high_pct;        /* device use above this: checkpoint everything */
	bool blind;                  /* asynchronous I/O tdax cannot see: manage nothing new */
	_Atomic int lost;            /* the region was removed, replaced or truncated (watch.h) */
	uint8_t *touched;            /* per file entry: this process logged to it */
	uint8_t *named;              /* per file entry: its path is in the trace */
	_Atomic uint64_t count[TDAX_ST_COUNT];   /* this process's counters */
	uint64_t flushed[TDAX_ST_COUNT];         /* the part already added to the device */
	_Atomic uint32_t warned;     /* bit per fallback reason already reported */
};

extern struct tdax_runtime tdax_rt;

/* Real libc functions, resolved with dlsym(RTLD_NEXT). */
struct tdax_real {
	int (*open)(const char *, int, ...);
	int (*openat)(int, const char *, int, ...);
	int (*close)(int);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*pwrite)(int, const void *, size_t, off_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*pwritev)(int, const struct iovec *, int, off_t);
	ssize_t (*pwritev2)(int, const struct iovec *, int, off_t, int);
	int (*fsync)(int);
	int (*fdatasync)(int);
	int (*ftruncate)(int, off_t);
	int (*fallocate)(int, int, off_t, off_t);
	int (*posix_fallocate)(int, off_t, off_t);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	int (*rename)(const char *, const char *);
	int (*renameat)(int, const char *, int, const char *);
	int (*renameat2)(int, const char *, int, const char *, unsigned);
	int (*unlink)(const char *);
	int (*unlinkat)(int, const char *, int);
	int (*truncate)(const char *, off_t);
	ssize_t (*copy_file_range)(int, off_t *, int, off_t *, size_t, unsigned);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*splice)(int, off_t *, int, off_t *, size_t, unsigned);
	void *(*fopen)(const char *, const char *);
	void *(*fdopen)(int, const char *);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
};
extern struct tdax_real tdax_real;
void tdax_resolve_real(void);

/* Thread-locals of the hot path: initial-exec, so that reading one is a
 * load and not a call to __tls_get_addr (libtdax.so is loaded at start). */
#define TDAX_TLS __attribute__((tls_model("initial-exec")))

/* Calls tdax makes itself pass straight through the hooks. */
extern __thread int tdax_inside TDAX_TLS;

static inline bool tdax_on(void)
{
	return tdax_rt.dev != NULL && !tdax_inside &&
	       !atomic_load_explicit(&tdax_rt.lost, memory_order_relaxed);
}

static inline void tdax_count(enum tdax_stat s, uint64_t n)
{
	atomic_fetch_add_explicit(&tdax_rt.count[s], n, memory_order_relaxed);
}

/* One line on stderr, "tdax[PID]: " and fmt with a and b (unless quiet). */
void tdax_warn(const char *fmt, const char *a, const char *b);

/* Count a fallback and say so once per process and reason (unless quiet). */
void tdax_fallback(enum tdax_fallback why, const char *path);

/* Asynchronous I/O tdax cannot follow starts in this process (an io_uring):
 * every file it has or opens for writing goes to the kernel's sync path. */
void tdax_go_blind(void);

/* Add this process's counters into the device's. */
void tdax_stats_flush(void);

#endif
