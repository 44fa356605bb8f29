/*
 * util -- small helpers every tdax module shares: error messages that name
 * what failed and what to do, the boot id, clocks, size parsing, the
 * crash-tolerant inter-process lock used off the hot path, and TDAX_ASSERT.
 */
#ifndef TDAX_UTIL_H
#define TDAX_UTIL_H

#include <sys/uio.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define TDAX_ERRLEN 640
#define TDAX_BOOT_ID_LEN 36

/*
 * TDAX_ASSERT(cond): an invariant of tdax's own code -- never a check of
 * what the region, a file or the user gave (a region is not trusted: that
 * is an error to handle, not an assertion). The test build
 * (-DTDAX_TEST_BUILD: the unit tests and their ASan/UBSan/TSan builds, the
 * test CLI and libtdax.so) checks it: on failure file:line and the
 * condition go to fd 2 by a raw write (no stdio, not the hooked write),
 * then abort(). The product compiles it to nothing: cond is not evaluated.
 */
#ifdef TDAX_TEST_BUILD
_Noreturn void tdax_assert_fail(const char *file, int line, const char *cond);
#define TDAX_ASSERT(cond) ((cond) ? (void)0 : tdax_assert_fail(__FILE__, __LINE__, #cond))
#else
#define TDAX_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

/* An error for the user: what failed, on which path, and what to do. */
struct tdax_err {
	char msg[TDAX_ERRLEN];
};

/* Fill err (if not NULL) and return -1. */
int tdax_errf(struct tdax_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The kernel's boot id (36 characters + NUL); "" if it cannot be read. */
void tdax_boot_id(char out[TDAX_BOOT_ID_LEN + 1]);

uint64_t tdax_now_ns(void);

/* CLOCK_MONOTONIC_COARSE (a few ms of resolution, a fraction of the cost):
 * for the policy's windows and the write-back's ages, which count in
 * hundreds of milliseconds. On the same time line as tdax_now_ns. */
uint64_t tdax_coarse_ns(void);

/* How long before now a time another thread or process stored was: 0 if it
 * is later than now (it read the clock after this thread did, the clock
 * may have ticked meanwhile: never a wrapped-around age). */
static inline uint64_t tdax_age_ns(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

/* A file system (statfs f_type) where a sync costs nothing or tdax has no
 * business (tmpfs, proc, sysfs, ...): its files are never managed. */
bool tdax_fs_unmanaged(long f_type);

/* A 64-bit hash of a name (FNV-1a), never 0: a key, not a proof. */
uint64_t tdax_name_hash(const char *name);

/* Busy-wait for ns nanoseconds (emulated device costs; never sleeps). */
void tdax_spin_ns(uint64_t ns);

/* Parse "123", "64k", "256M", "1G" (powers of 1024) into *out. */
int tdax_parse_size(const char *s, uint64_t *out);

/*
 * A lock word shared between processes that survives the death of its
 * holder: it holds the holder's pid, and a waiter that finds the holder
 * dead takes the lock over. For rare operations (file registration, policy
 * jobs), never for the write or sync path.
 */
void tdax_pidlock_acquire(_Atomic uint32_t *word);
/* Take the lock if it is free or its holder is dead; false if a live
 * process (this one included) holds it. */
bool tdax_pidlock_try(_Atomic uint32_t *word);
void tdax_pidlock_release(_Atomic uint32_t *word);

/* getpid(), cached (and forgotten in the child of a fork). */
uint32_t tdax_pid(void);
/* In the child of a fork: the cached pid is the parent's (a handler of
 * pthread_atfork's calls it; a fork that runs none, _Fork, must). */
void tdax_pid_after_fork(void);

/*
 * The size of an open file, without asking for its timestamps: since Linux
 * 6.13 a query of mtime/ctime makes the next write update the inode with a
 * fine-grained time (multigrain timestamps), which costs every write a
 * journal update. statx(STATX_SIZE) does not.
 */
int tdax_file_size(int fd, uint64_t *size);

/*
 * statx() of an open file. Since Linux 6.11 a NULL path with AT_EMPTY_PATH
 * skips the copy and lookup of the empty name ("", ~90 ns of ~700 on this
 * VM): it is tried first, and "" from the first EFAULT on (older kernels).
 * The sync path asks this of every lightweight sync.
 */
struct statx; /* <sys/stat.h> with _GNU_SOURCE */
int tdax_statx_fd(int fd, unsigned mask, struct statx *stx);
/* The file is append-only or immutable (chattr +a, +i): no write at an
 * offset of tdax's -- a replay, a write-in -- would be let in (EPERM). */
bool tdax_statx_sealed(const struct statx *stx);

/*
 * A descriptor's entry in /proc, for this thread's descriptor table (the
 * write-back thread has one of its own): its name, the path it leads to
 * now (readlink: absolute and canonical; the length, or -1), and the same
 * file opened again with other flags (the same inode, even if renamed or
 * removed since; -1 with errno). Raw calls: no hook of tdax's is crossed.
 */
#define TDAX_PROC_FD_NAME 40
void tdax_proc_fd_name(int fd, char name[TDAX_PROC_FD_NAME]);
ssize_t tdax_fd_path(int fd, char *out, size_t size);
int tdax_fd_reopen(int fd, int flags);

/*
 * Make the removal of the name `path` (absolute) durable: fsync its
 * directory, or, if that is gone too, the nearest directory above it that
 * is left. Before the records of a removed file are let go: until its
 * directory is synced a power cut can bring the file back without them.
 * Returns 0, or -1 with errno (the directory's sync failed).
 */
int tdax_sync_parent_dir(const char *path);

/* True if thread tid of process pid exists and is not a zombie (killed,
 * not yet reaped by its parent: it holds nothing -- no lease, no open file
 * -- and writes no more). It may be a reused id. */
bool tdax_task_alive(uint32_t pid, uint32_t tid);

/* Lift O_APPEND from fd's open file for a moment, for the writes of
 * tdax_sys_pwritev_all: through an O_APPEND descriptor Linux puts every
 * pwrite at the end, whatever its offset. 1 if it was lifted (give it back
 * with tdax_append_restore), 0 if the file had none or the kernel takes
 * RWF_NOAPPEND (sys.h: nothing to lift), -1 on error (errno). The caller
 * keeps the open file's other writers out meanwhile: each of them sees the
 * flag gone, and one giving it back ends the others' lift. */
int tdax_append_lift(int fd);
void tdax_append_restore(int fd);

/* When process pid started (clock ticks after boot, /proc/PID/stat); 0
 * if it cannot be read. With the pid, it names one process for good. */
uint64_t tdax_pid_start(uint32_t pid);

/* tdax_task_alive() of the process's main thread. */
bool tdax_pid_alive(uint32_t pid);

/* Bytes in n iovec entries. */
static inline size_t tdax_iov_bytes(const struct iovec *iov, int n)
{
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	return len;
}

/* *v = max(*v, x), atomically. */
static inline uint64_t tdax_atomic_max(_Atomic uint64_t *v, uint64_t x)
{
	uint64_t cur = atomic_load_explicit(v, memory_order_relaxed);
	while (cur < x && !atomic_compare_exchange_weak(v, &cur, x))
		;
	return cur; /* what it was */
}

#endif
