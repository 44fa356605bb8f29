/*
 * start -- the top of the preload layer (start.h): the library's
 * constructor (configuration from the environment), attaching (the device
 * opened and brought up to date, descriptors inherited across exec
 * adopted), fork and exit.
 *
 * Neither fails the application: if the device cannot be used, tdax says
 * so once on stderr and every call goes straight to the kernel.
 */
#define _GNU_SOURCE
#include "core/env.h"
#include "core/log.h"
#include "core/recover.h"
#include "core/sys.h"
#include "core/testaid.h"
#include "core/trace.h"
#include "preload/fdtable.h"
#include "preload/landing.h"
#include "preload/lease.h"
#include "preload/manage.h"
#include "preload/mapped.h"
#include "preload/start.h"
#include "preload/cache.h"
#include "preload/promoted.h"
#include "preload/selection.h"
#include "preload/rules.h"
#include "preload/state.h"
#include "preload/tracking.h"
#include "preload/views.h"
#include "preload/fault.h"
#include "preload/writeback.h"

#include <dirent.h>
#include <sys/syscall.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/single_threaded.h>
#include <sys/stat.h>
#include <unistd.h>

/* Call fn for every descriptor the process has (inherited across exec),
 * with its open flags; stop when it returns true. Raw getdents64 into the
 * stack: no opendir, no malloc, in every process tdax starts in. */
static bool each_fd(bool (*fn)(int fd, int flags))
{
	int dir = tdax_sys_open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (dir < 0)
		return false;
	char buf[4096] __attribute__((aligned(8)));
	bool stop = false;
	long n;
	while (!stop && (n = tdax_syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0) {
		for (long off = 0; !stop && off < n;) {
			struct dirent64 *de = (struct dirent64 *)(buf + off);
			off += de->d_reclen;
			int fd = atoi(de->d_name);
			if (de->d_name[0] == '.' || fd == dir)
				continue;
			int fl = (int)tdax_syscall(SYS_fcntl, fd, F_GETFL);
			if (fl >= 0)
				stop = fn(fd, fl & ~(O_CREAT | O_TRUNC));
		}
	}
	tdax_sys_close(dir);
	return stop;
}

/* The descriptor whose open attaches the process (tdax_attach_opening),
 * or -1. Written by the attaching thread only. */
static int opening = -1;

static bool adopt(int fd, int flags)
{
	if (fd != opening)
		tdax_manage(fd, NULL, flags);
	return false;
}

/* A write-back tunable from the environment (core/env.h, tdax_wb_vars). */
static uint64_t wb_var(int i)
{
	const struct tdax_env_number *v = &tdax_wb_vars[i];
	return tdax_env_value(v->name, v->dflt, v->lo, v->hi);
}

static void configure(void)
{
	tdax_rt.quiet = tdax_env_on("TDAX_QUIET"); /* first: every warning below respects it */
	tdax_rt.verbose = tdax_env_on("TDAX_VERBOSE");
	tdax_rt.supervisor = tdax_env_on("TDAX_SUPERVISOR");
	const char *p = secure_getenv("TDAX_POLICY");
	/* The default, adaptive: never below thesis on any recorded trace
	 * (docs/policy.md, "The default"). */
	tdax_rt.policy = !p || !strcmp(p, "adaptive") ? TDAX_POLICY_ADAPTIVE
		       : !strcmp(p, "thesis")         ? TDAX_POLICY_THESIS
		       : !strcmp(p, "always")         ? TDAX_POLICY_ALWAYS
		       : !strcmp(p, "never")          ? TDAX_POLICY_NEVER
						      : TDAX_POLICY_ADAPTIVE;
	if (p && tdax_rt.policy == TDAX_POLICY_ADAPTIVE && strcmp(p, "adaptive"))
		tdax_warn("unknown TDAX_POLICY '%s'%s; using adaptive", p, "");
#ifdef TDAX_TEST_BUILD
	const char *lie = TDAX_TEST_ENV("LIE");
	tdax_rt.test_lie = lie && !strcmp(lie, "1");
#endif
	tdax_rt.wb_interval_ns = wb_var(TDAX_WB_INTERVAL_MS) * 1000000u;
	tdax_rt.wb_age_ns = wb_var(TDAX_WB_AGE_MS) * 1000000u;
	tdax_rt.wb_bytes = wb_var(TDAX_WB_BYTES);
	tdax_rt.wb_high_pct = (uint32_t)wb_var(TDAX_WB_HIGH_PCT);
	tdax_rt.reserve_pct = (uint32_t)tdax_env_value("TDAX_EXPLICIT_RESERVE_PCT", 10, 0, 100);
	tdax_rt.big_write = tdax_env_value("TDAX_BIG_WRITE", 0, 0, (uint64_t)1 << 40);
	/* One the application does not use (one it handles turns leases off). */
	tdax_rt.lease_signal = (int)tdax_env_value("TDAX_LEASE_SIGNAL", (uint64_t)(SIGRTMAX - 2),
						   (uint64_t)SIGRTMIN, (uint64_t)SIGRTMAX);
	tdax_rt.leases = tdax_env_value("TDAX_LEASES", 1, 0, 1) == 1;
	const char *m = secure_getenv("TDAX_MODE");
	tdax_rt.bypass = m && !strcmp(m, "bypass");
	if (m && !tdax_rt.bypass && strcmp(m, "coherent"))
		tdax_warn("unknown TDAX_MODE '%s'%s; using coherent", m, "");
	if (tdax_rt.bypass)
		tdax_bypass_configure();
	tdax_rules_configure();
}

/* Bring the device up to date before this process writes to it. */
static int bring_up_to_date(struct tdax_device *dev)
{
	struct tdax_recover_report r;
	struct tdax_err e;
	bool lost = tdax_device_boot_changed(dev);
	/* After a reboot: replay what the last boot left. After a crash of
	 * another process on this boot: sync and release what it left, and
	 * write in what it had deferred (bypass mode; a pass elsewhere may
	 * have sealed its segments already). */
	if (lost || tdax_log_seal_dead(dev) || tdax_files_orphaned(dev)) {
		/* On the same boot, the records of a file that is gone from its
		 * path protect nothing (recovery finds files by path, the page
		 * cache has their bytes): let them go, or they stay for good. */
		struct tdax_recover_opts o = { .discard_unmatched = !lost };
		int rc = tdax_recover(dev, &o, &r, &e);
		if (rc < 0) {
			tdax_warn("%s: %s", dev->path, e.msg);
			return -1;
		}
		if (rc > 0 && lost) {
			tdax_warn("%s: %s", dev->path, "some records could not be recovered; run 'tdax "
			     "recover' to see which. tdax is off in this process");
			tdax_recover_report_free(&r);
			return -1;
		}
		tdax_recover_report_free(&r);
	}
	if (lost || dev->st->clean != TDAX_STATE_UNCLEAN)
		tdax_device_set_state(dev, TDAX_STATE_UNCLEAN);
	tdax_files_count_active(dev);
	return 0;
}

/* Open the device and bring it up to date; adopt the descriptors the
 * process inherited. On failure: one warning, tdax stays off. */
static void attach_now(void)
{
	struct tdax_device *dev;
	struct tdax_err e;
	uint64_t faults0 = tdax_thread_faults(); /* (validation maps the header in) */
	if (tdax_device_open(tdax_env_device(), tdax_env_open_flags(), &dev, &e) != 0) {
		tdax_warn("%s%s; every sync goes to the kernel", e.msg, "");
		return;
	}
	uint64_t faults = tdax_thread_faults() - faults0;
	tdax_rt.touched = calloc(dev->sb->max_files, 1);
	tdax_rt.named = calloc(dev->sb->max_files, sizeof(*tdax_rt.named));
	tdax_rt.opens = calloc(dev->sb->max_files, sizeof(*tdax_rt.opens));
	if (tdax_rt.bypass &&
	    !(tdax_promoted_init(dev->sb->max_files) && tdax_selection_init(dev) && tdax_cache_init(dev)))
		tdax_rt.bypass = false;
	if (tdax_fdtable_init() != 0 || !tdax_rt.touched || !tdax_rt.named || !tdax_rt.opens ||
	    !tdax_landing_init(dev->sb->max_files) || bring_up_to_date(dev) != 0) {
		tdax_device_close(dev);
		return;
	}
	faults0 = tdax_thread_faults();
	tdax_device_prefault(dev, dev->base, dev->sb->segs_off); /* header and tables */
	tdax_count(TDAX_ST_MAP_FAULTS, faults + tdax_thread_faults() - faults0);
	tdax_count(TDAX_ST_MAP_BYTES, dev->sb->segs_off);
	tdax_rt.dev = dev;
	tdax_fault_start();
	tdax_trace_start(dev, tdax_ownfd_keep);
	each_fd(adopt);
}

/* The inherited descriptors tdax would manage, while not attached; one
 * beyond the map makes the process attach at start. */
#define INHERITED_MAX 1024
static _Atomic uint64_t inherited_map[INHERITED_MAX / 64];

static bool note_inherited(int fd, int flags)
{
	if (!tdax_manage_wants(fd, flags))
		return false;
	if (fd >= INHERITED_MAX)
		return true; /* attach now */
	atomic_fetch_or(&inherited_map[fd / 64], (uint64_t)1 << (fd % 64));
	tdax_rt.inherited = true;
	return false;
}

bool tdax_inherited(int fd)
{
	return fd >= 0 && fd < INHERITED_MAX &&
	       (atomic_load_explicit(&inherited_map[fd / 64], memory_order_relaxed) >> (fd % 64) & 1);
}

/* The process whose memory a vfork child shares (tdax_vfork_shares), or 0. */
static _Atomic pid_t vfork_parent;

/* Is this a vfork child? (A system call only after a vfork that shared.) */
static bool in_vfork_child(void)
{
	pid_t p = atomic_load_explicit(&vfork_parent, memory_order_relaxed);
	if (!p)
		return false;
	if (getpid() != p)
		return true;
	atomic_store(&vfork_parent, 0); /* the parent: its one thread runs again, the child is gone */
	return false;
}

void tdax_inherited_closed(int fd)
{
	if (tdax_inherited(fd) && !in_vfork_child())
		atomic_fetch_and(&inherited_map[fd / 64], ~((uint64_t)1 << (fd % 64)));
}

/* 0: not attached; 1: a thread is attaching; 2: done (on or off for good). */
static _Atomic int attach_state;
static __thread bool attaching TDAX_TLS;

bool tdax_attach(void)
{
	return tdax_attach_opening(-1);
}

bool tdax_attach_opening(int fd)
{
	int none = 0;
	if (atomic_load(&attach_state) == 2 || attaching)
		return tdax_rt.dev != NULL; /* (attaching: a signal handler's call in the middle) */
	if (in_vfork_child())
		return false;
	if (atomic_compare_exchange_strong(&attach_state, &none, 1)) {
		attaching = true;
		tdax_inside++;
		opening = fd;
		attach_now();
		opening = -1;
		tdax_inside--;
		attaching = false;
		tdax_rt.waiting = false;
		tdax_rt.inherited = false;
		atomic_store(&attach_state, 2);
	}
	while (atomic_load(&attach_state) != 2)
		sched_yield();
	return tdax_rt.dev != NULL;
}

/* A child of fork() usually execs next: look exec up in the parent, once,
 * rather than in every child (a lookup in a fresh copy of the process
 * costs it page faults: a shell's every command paid ~0.2 ms). */
static void before_fork(void)
{
	TDAX_REAL(execve);
	TDAX_REAL(execvpe);
	if (tdax_fds) {
		tdax_promoted_before_fork(); /* first: a promoted file needs its lease */
		tdax_lease_before_fork();
	}
}

static void after_fork_parent(void)
{
	if (tdax_fds)
		tdax_promoted_after_fork_parent();
}

bool tdax_vfork_shares(void)
{
	if (atomic_load(&attach_state) != 0 || !__libc_single_threaded)
		return false;
	before_fork();
	atomic_store(&vfork_parent, getpid());
	return true;
}

/*
 * The application's threads alive: the main one, and each made through
 * pthread_create (its hook counts it before it starts). glibc ends the
 * process (exit(0)) in the thread whose end leaves no other, so were
 * tdax's write-back thread the last, the process would stay for good, a
 * zombie not even SIGTERM ends (that thread blocks every signal). The
 * application's last thread to end by pthread_exit, or by its start
 * routine's return, stops tdax's thread first (a thread-specific value's
 * destructor runs on the way). A thread made past the hook (before
 * libtdax.so's constructor, by a raw clone) is not counted: tdax's thread
 * may then stop early, its work left to the syncs and exit.
 */
static _Atomic int app_threads = 1;
static pthread_key_t app_key;
static _Atomic bool app_key_made;

static void app_thread_ends(void *unused)
{
	(void)unused;
	if (atomic_fetch_sub(&app_threads, 1) == 1)
		tdax_writeback_stop();
}

bool tdax_app_thread_coming(void)
{
	if (!atomic_load_explicit(&app_key_made, memory_order_relaxed))
		return false;
	atomic_fetch_add(&app_threads, 1);
	return true;
}

void tdax_app_thread_started(void)
{
	pthread_setspecific(app_key, &app_threads);
}

void tdax_app_thread_not_made(void)
{
	atomic_fetch_sub(&app_threads, 1); /* (its maker lives: never the last) */
}

static void at_fork_child(void)
{
	tdax_pid_after_fork(); /* first: what follows asks whose this process is */
	atomic_store(&app_threads, 1); /* the forking one */
	if (atomic_load_explicit(&vfork_parent, memory_order_relaxed))
		atomic_store(&vfork_parent, 0); /* a child of fork() owns its memory */
	tdax_count_after_fork(); /* (writes nothing unless this thread has counted) */
	/* Never attached: nothing of tdax's to set right, and nothing written
	 * (each page written in a child of fork costs it a copy: a shell's
	 * every command). */
	if (atomic_load(&attach_state) == 0)
		return;
	for (int i = 0; i < TDAX_ST_COUNT; i++) /* the parent counts those */
		atomic_store(&tdax_rt.flushed[i], tdax_count_total((enum tdax_stat)i));
	/* A thread of the parent was attaching: nobody will finish it here. */
	if (atomic_load(&attach_state) == 1) {
		tdax_rt.waiting = false;
		atomic_store(&attach_state, 2);
	}
	if (tdax_rt.dev)
		tdax_log_after_fork(tdax_rt.dev);
	tdax_promoted_after_fork_child();
	tdax_selection_after_fork_child();
	tdax_lease_after_fork();
	tdax_tracking_after_fork();
	tdax_writeback_after_fork();
	tdax_trace_after_fork();
}

/* (Apart: a vfork that shares memory runs before_fork alone.) */
void tdax_fork_prepare(void)
{
	tdax_mapped_before_fork();
	tdax_views_before_fork();
	before_fork();
}

void tdax_fork_parent(void)
{
	after_fork_parent();
	tdax_views_after_fork();
	tdax_mapped_after_fork();
}

void tdax_fork_child(void)
{
	at_fork_child();
	tdax_views_after_fork();
	tdax_mapped_after_fork();
}

pid_t tdax_fork_done(pid_t pid)
{
	if (pid == 0) {
		tdax_fork_child();
		return 0;
	}
	int err = errno; /* (a failed fork's) */
	tdax_fork_parent();
	if (pid > 0 && tdax_fds)
		tdax_lease_forked(pid);
	errno = err;
	return pid;
}

void tdax_at_exit(void)
{
	if (!tdax_rt.dev || atomic_load(&tdax_rt.lost))
		return;
	tdax_inside++;
	tdax_writeback_last();
	tdax_trace_flush();
	tdax_log_seal_mine(tdax_rt.dev);
	tdax_inside--;
}

/*
 * Is this process under tdax? Asked for by `tdax run` (which names the
 * device) or by LD_PRELOAD set by hand. A program that only links
 * libtdax.so for include/tdax.h and was asked for neither is not: its
 * calls stay the kernel's, and its persists are msync.
 */
static bool asked_for(void)
{
	const char *pre = secure_getenv("LD_PRELOAD");
	return tdax_env_device_named() || (pre && strstr(pre, "libtdax"));
}

__attribute__((constructor)) static void tdax_start(void)
{
	if (!asked_for())
		return;
	tdax_inside++;
	configure();
	/* Started with stderr closed (a daemon): fd 2 may become one of the
	 * application's files, so tdax says nothing rather than write into it. */
	if (tdax_syscall(SYS_fcntl, 2, F_GETFD) < 0)
		tdax_rt.quiet = true;
	pthread_atfork(tdax_fork_prepare, tdax_fork_parent, tdax_fork_child);
	if (pthread_key_create(&app_key, app_thread_ends) == 0) {
		pthread_setspecific(app_key, &app_threads); /* the main thread */
		atomic_store(&app_key_made, true);
	}
	atexit(tdax_at_exit);
	tdax_rt.waiting = true;
	bool now = each_fd(note_inherited); /* files to manage came across exec */
	tdax_inside--;
	if (now)
		tdax_attach();
}
