/*
 * state -- the state of one process under tdax, at the bottom of the
 * preload layer: its view of the device, configuration (from the
 * environment `tdax run` sets; filled in by start.c), its private counters,
 * one-line warnings and fallbacks, and the table of the real C library
 * functions the hooks replace.
 */
#ifndef TDAX_STATE_H
#define TDAX_STATE_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "core/device.h"
#include "core/files.h"
#include "core/stats.h"
#include "core/tunables.h"

/* thesis: the thesis' tracking policy; adaptive: the same with thresholds
 * of its own per range and upgrade-ahead for append streams
 * (policy/track.h); always, never: the bounds. */
enum tdax_policy { TDAX_POLICY_THESIS = 0, TDAX_POLICY_ALWAYS, TDAX_POLICY_NEVER, TDAX_POLICY_ADAPTIVE };

struct tdax_runtime {
	struct tdax_device *dev;     /* NULL: tdax is off in this process, all calls pass through */
	bool waiting;                /* configured, not attached yet (start.h) */
	bool inherited;              /* waiting, with inherited descriptors to manage (start.h) */
	enum tdax_policy policy;
	bool quiet;
	bool verbose;                /* TDAX_VERBOSE=1: warn of the routine fallbacks too */
	bool supervisor;             /* TDAX_SUPERVISOR=1: tdax serve-syscalls (cli/notify.c) */
#ifdef TDAX_TEST_BUILD
	bool test_lie;               /* TDAX_TEST_LIE=1: positive control, see coherent.c */
#endif
	uint64_t wb_interval_ns;     /* how often the write-back thread looks */
	uint64_t wb_age_ns;          /* records older than this are checkpointed */
	uint64_t wb_bytes;           /* a file with this much logged is checkpointed */
	uint32_t wb_high_pct;        /* device use above this: checkpoint everything */
	uint32_t reserve_pct;        /* the log's share transparent upgrades leave to explicit mappings */
	uint64_t big_write;          /* a write of at least this many bytes is not logged (0: none; coherent.h) */
	bool blind;                  /* asynchronous I/O tdax cannot see: manage nothing new */
	bool leases;                 /* write leases may spare syncs their look at the file (lease.h) */
	int lease_signal;            /* the signal of a lease's break (TDAX_LEASE_SIGNAL) */
	bool bypass;                 /* TDAX_MODE=bypass: files may be promoted (bypass.h) */
	struct tdax_tunables bypass_env; /* bypass mode's tunables this process's variables fix */
	uint32_t bypass_env_set;     /* which: bit i for tdax_tunable_names[6 + i] */
	_Atomic int lost;            /* the region was removed, replaced or truncated (watch.h) */
	uint8_t *touched;            /* per file entry: this process logged to it */
	uint32_t *named;             /* per file entry: the generation whose path is in the trace */
	_Atomic uint32_t *opens;     /* per file entry: this process's descriptors on it */
	_Atomic uint64_t count[TDAX_ST_COUNT];   /* this process's counters, but for its threads' slots */
	_Atomic uint64_t flushed[TDAX_ST_COUNT]; /* the part of all already added to the device */
	_Atomic uint32_t warned;     /* bit per fallback reason already reported */
};

extern struct tdax_runtime tdax_rt;

/*
 * The real C library functions (dlsym(RTLD_NEXT)): one list,
 * X(name, return type, parameters), for the table.
 */
#define TDAX_REAL_FUNCTIONS(X)                                                        \
	X(open, int, (const char *, int, ...))                                        \
	X(openat, int, (int, const char *, int, ...))                                 \
	X(close, int, (int))                                                          \
	X(write, ssize_t, (int, const void *, size_t))                                \
	X(pwrite, ssize_t, (int, const void *, size_t, off_t))                        \
	X(writev, ssize_t, (int, const struct iovec *, int))                          \
	X(pwritev, ssize_t, (int, const struct iovec *, int, off_t))                  \
	X(pwritev2, ssize_t, (int, const struct iovec *, int, off_t, int))            \
	X(lseek, off_t, (int, off_t, int))                                            \
	X(fsync, int, (int))                                                          \
	X(fdatasync, int, (int))                                                      \
	X(ftruncate, int, (int, off_t))                                               \
	X(fallocate, int, (int, int, off_t, off_t))                                   \
	X(posix_fallocate, int, (int, off_t, off_t))                                  \
	X(dup, int, (int))                                                            \
	X(dup2, int, (int, int))                                                      \
	X(dup3, int, (int, int, int))                                                 \
	X(fcntl, int, (int, int, ...))                                                \
	X(mmap, void *, (void *, size_t, int, int, int, off_t))                       \
	X(rename, int, (const char *, const char *))                                  \
	X(renameat, int, (int, const char *, int, const char *))                      \
	X(renameat2, int, (int, const char *, int, const char *, unsigned))           \
	X(unlink, int, (const char *))                                                \
	X(unlinkat, int, (int, const char *, int))                                    \
	X(rmdir, int, (const char *))                                                 \
	X(mkdir, int, (const char *, mode_t))                                         \
	X(mkdirat, int, (int, const char *, mode_t))                                  \
	X(link, int, (const char *, const char *))                                    \
	X(linkat, int, (int, const char *, int, const char *, int))                   \
	X(symlink, int, (const char *, const char *))                                 \
	X(symlinkat, int, (const char *, int, const char *))                          \
	X(mknod, int, (const char *, mode_t, dev_t))                                  \
	X(mknodat, int, (int, const char *, mode_t, dev_t))                           \
	X(mkfifo, int, (const char *, mode_t))                                        \
	X(mkfifoat, int, (int, const char *, mode_t))                                 \
	X(truncate, int, (const char *, off_t))                                       \
	X(fchmod, int, (int, mode_t))                                                 \
	X(fchmodat, int, (int, const char *, mode_t, int))                            \
	X(chmod, int, (const char *, mode_t))                                         \
	X(fchown, int, (int, uid_t, gid_t))                                           \
	X(fchownat, int, (int, const char *, uid_t, gid_t, int))                      \
	X(chown, int, (const char *, uid_t, gid_t))                                   \
	X(lchown, int, (const char *, uid_t, gid_t))                                  \
	X(futimens, int, (int, const struct timespec *))                              \
	X(utimensat, int, (int, const char *, const struct timespec *, int))          \
	X(fsetxattr, int, (int, const char *, const void *, size_t, int))             \
	X(setxattr, int, (const char *, const char *, const void *, size_t, int))     \
	X(lsetxattr, int, (const char *, const char *, const void *, size_t, int))    \
	X(fremovexattr, int, (int, const char *))                                     \
	X(removexattr, int, (const char *, const char *))                             \
	X(lremovexattr, int, (const char *, const char *))                            \
	X(copy_file_range, ssize_t, (int, off_t *, int, off_t *, size_t, unsigned))   \
	X(sendfile, ssize_t, (int, int, off_t *, size_t))                             \
	X(splice, ssize_t, (int, off_t *, int, off_t *, size_t, unsigned))            \
	X(ioctl, int, (int, unsigned long, ...))                                      \
	X(fopen, void *, (const char *, const char *))                                \
	X(freopen, void *, (const char *, const char *, void *))                      \
	X(fdopen, void *, (int, const char *))                                        \
	X(vdprintf, int, (int, const char *, va_list))                                \
	X(__vdprintf_chk, int, (int, int, const char *, va_list))                     \
	X(backtrace_symbols_fd, void, (void *const *, int, int))                      \
	X(openlog, void, (const char *, int, int))                                    \
	X(vsyslog, void, (int, const char *, va_list))                                \
	X(__vsyslog_chk, void, (int, int, const char *, va_list))                     \
	X(execve, int, (const char *, char *const[], char *const[]))                  \
	X(execvpe, int, (const char *, char *const[], char *const[]))                 \
	X(vfork, pid_t, (void))                                                       \
	X(_exit, void, (int))                                                         \
	X(sigaction, int, (int, const struct sigaction *, struct sigaction *))        \
	X(pthread_create, int, (pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))

#define TDAX_REAL_FIELD(name, ret, params) ret(*name) params;
struct tdax_real {
	TDAX_REAL_FUNCTIONS(TDAX_REAL_FIELD)
};
#undef TDAX_REAL_FIELD
extern struct tdax_real tdax_real;
/* The real function: TDAX_REAL(fsync)(fd) is libc's fsync(fd), looked up
 * on its first use (a hook may run before the constructor, from another
 * library's; and a process looks up only what it calls). */
void *tdax_real_lookup(const char *name);
#define TDAX_REAL_GETTER(name, ret, params)                                             \
	static inline __typeof__(tdax_real.name) tdax_real_##name(void)                \
	{                                                                              \
		if (__builtin_expect(tdax_real.name == NULL, 0))                       \
			tdax_real.name = (__typeof__(tdax_real.name))tdax_real_lookup(#name); \
		return tdax_real.name;                                                 \
	}
TDAX_REAL_FUNCTIONS(TDAX_REAL_GETTER)
#undef TDAX_REAL_GETTER
#define TDAX_REAL(name) (tdax_real_##name())

/* Thread-locals of the hot path: initial-exec, so that reading one is a
 * load and not a call to __tls_get_addr (libtdax.so is loaded at start). */
#define TDAX_TLS __attribute__((tls_model("initial-exec")))

/* Calls tdax makes itself pass straight through the hooks. */
extern __thread int tdax_inside TDAX_TLS;

/* This thread has a descriptor table of its own (the write-back thread,
 * fdtable.h): the application's descriptors are not its own. */
extern __thread bool tdax_fds_private TDAX_TLS;

/*
 * pthread_cancel must not end an application's thread inside a hook: a
 * cancellation point the hook calls (the real write, a sync, an open)
 * would end it holding a file's lock, an in-flight count or the attach,
 * and the process would hang, or trust what it should not. A hook doing
 * such work holds cancellation off (TDAX_NO_CANCEL, before the work) and
 * acts on a pending one when it is done -- its cleanup, at every return:
 * the call has had its effect, as at a cancellation point that completed.
 * A hook that holds nothing across the real call leaves it a cancellation
 * point, as it is without tdax (a write tdax has nothing to remember of,
 * unregistered.h).
 */
static inline int tdax_cancel_hold(void)
{
	int old = PTHREAD_CANCEL_DISABLE;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	return old;
}

static inline void tdax_cancel_release(const int *old)
{
	if (*old != PTHREAD_CANCEL_ENABLE)
		return;
	int err = errno;
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	pthread_testcancel();
	errno = err;
}

#define TDAX_NO_CANCEL \
	const int tdax_cancel_old_ __attribute__((cleanup(tdax_cancel_release), unused)) = tdax_cancel_hold()

static inline bool tdax_on(void)
{
	return tdax_rt.dev != NULL && !tdax_inside &&
	       !atomic_load_explicit(&tdax_rt.lost, memory_order_relaxed);
}

/* The shared run-time state of registered file idx (files.h). */
static inline struct tdax_file_rt *tdax_rt_of(uint32_t idx)
{
	return &tdax_file_at(tdax_rt.dev, idx)->rt;
}

/*
 * The process's counters (stats.h) are added per thread: a locked add
 * waits for every store before it to complete -- on a persist, the
 * application's stores into the bytes it persists (~20 ns of a 200 ns
 * persist, measured) -- so a thread counts into a slot of its own with a
 * plain load and store, and tdax_count_total sums the slots and the
 * process's shared counters (the threads that found no slot). A slot is
 * never emptied: a thread takes over the slot of one that is gone
 * (tdax_count_slot_claim), counts and all. A signal handler that counts
 * while its thread is between the load and the store of the same counter
 * loses one of the two counts: these are statistics, never a promise.
 */
#define TDAX_COUNT_SLOTS 32
struct tdax_count_slot {
	_Atomic int32_t tid; /* its thread; 0: free */
	_Atomic uint64_t v[TDAX_ST_COUNT];
};
extern struct tdax_count_slot tdax_count_slots[TDAX_COUNT_SLOTS];
extern __thread int tdax_count_slot TDAX_TLS; /* index + 1; 0: none yet; -1: none to be had */
void tdax_count_slot_claim(void);
uint64_t tdax_count_total(enum tdax_stat s);
/* A child of fork: its thread keeps its slot under its new thread id. */
void tdax_count_after_fork(void);

static inline void tdax_count(enum tdax_stat s, uint64_t n)
{
	if (__builtin_expect(tdax_count_slot == 0, 0))
		tdax_count_slot_claim();
	int k = tdax_count_slot;
	if (__builtin_expect(k > 0, 1)) {
		_Atomic uint64_t *c = &tdax_count_slots[k - 1].v[s];
		atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
		return;
	}
	atomic_fetch_add_explicit(&tdax_rt.count[s], n, memory_order_relaxed);
}

/*
 * Sync latency (stats.h): one sync in TDAX_LAT_EVERY per thread is timed
 * from its hook's entry to its return (two clock reads, ~45 ns, are as much
 * as a promoted file's whole sync), and counted as light or real by how it
 * was answered: tdax_count_sync() notes that for the timing hook.
 */
extern __thread uint32_t tdax_lat_tick TDAX_TLS;
extern __thread int tdax_lat_answer TDAX_TLS; /* -1: not answered yet; 1 light, 0 real */

static inline void tdax_count_sync(bool light)
{
	tdax_count(light ? TDAX_ST_LIGHT_SYNCS : TDAX_ST_REAL_SYNCS, 1);
	tdax_lat_answer = light;
}

/* A sync hook's start: the time if this one is timed, else 0. */
static inline uint64_t tdax_lat_begin(void)
{
	if (++tdax_lat_tick % TDAX_LAT_EVERY)
		return 0;
	tdax_lat_answer = -1;
	return tdax_now_ns();
}

/* Its end: into the histogram of its answer (none: not counted). */
static inline void tdax_lat_end(uint64_t t0)
{
	if (!t0 || tdax_lat_answer < 0)
		return;
	uint64_t ns = tdax_now_ns() - t0;
	tdax_count(tdax_lat_stat(tdax_lat_answer, tdax_lat_bucket(ns)), 1);
	tdax_count(tdax_lat_stat(tdax_lat_answer, TDAX_LAT_BUCKETS), ns);
}

/* One line on stderr, "tdax[PID]: " and fmt with a and b (unless quiet). */
void tdax_warn(const char *fmt, const char *a, const char *b);

/* The number in environment variable name, within [lo, hi]; dflt if it is
 * unset, and (with a warning) if it is not such a number. */
uint64_t tdax_env_value(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi);

/* Bypass mode's variables (TDAX_BYPASS_SHARE_PCT, _BLOCK, _FLOOR and
 * _WINDOW_MS) into tdax_rt, at start. */
void tdax_bypass_configure(void);
/* The tunables, with bypass mode's: the device's (tdax set: read anew at
 * each call), each fixed for this process by its variable if it was set. */
void tdax_bypass_tunables(const struct tdax_device *dev, struct tdax_tunables *t);

/* Count a fallback and say so once per process and reason (unless quiet). */
void tdax_fallback(enum tdax_fallback why, const char *path);
/* Only the saying. */
void tdax_fallback_said(enum tdax_fallback why, const char *path);

/* Add this process's counters into the device's. */
void tdax_stats_flush(void);

#endif
