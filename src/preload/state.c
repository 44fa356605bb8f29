/*
 * state -- the process's tdax state (state.h): the real functions, counters,
 * warnings and fallbacks.
 */
#define _GNU_SOURCE
#include "preload/state.h"
#include "core/control.h"
#include "core/env.h"
#include "core/sys.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct tdax_runtime tdax_rt;
struct tdax_real tdax_real;
__thread int tdax_inside TDAX_TLS;
__thread bool tdax_fds_private TDAX_TLS;
__thread uint32_t tdax_lat_tick TDAX_TLS;
__thread int tdax_lat_answer TDAX_TLS;
struct tdax_count_slot tdax_count_slots[TDAX_COUNT_SLOTS];
__thread int tdax_count_slot TDAX_TLS;

/* Is thread tid of this process gone? */
static bool thread_gone(int32_t tid)
{
	return tdax_syscall(SYS_tgkill, getpid(), tid, 0) != 0 && errno == ESRCH;
}

void tdax_count_slot_claim(void)
{
	int err = errno;
	int32_t me = (int32_t)tdax_syscall(SYS_gettid);
	/* A free slot; else one whose thread is gone. */
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < TDAX_COUNT_SLOTS; i++) {
			int32_t t = atomic_load(&tdax_count_slots[i].tid);
			if ((pass == 0 ? t == 0 : t != 0 && thread_gone(t)) &&
			    atomic_compare_exchange_strong(&tdax_count_slots[i].tid, &t, me)) {
				tdax_count_slot = i + 1;
				errno = err;
				return;
			}
		}
	}
	tdax_count_slot = -1;
	errno = err;
}

uint64_t tdax_count_total(enum tdax_stat s)
{
	uint64_t n = atomic_load(&tdax_rt.count[s]);
	for (int i = 0; i < TDAX_COUNT_SLOTS; i++)
		n += atomic_load_explicit(&tdax_count_slots[i].v[s], memory_order_relaxed);
	return n;
}

void tdax_count_after_fork(void)
{
	if (tdax_count_slot > 0)
		atomic_store(&tdax_count_slots[tdax_count_slot - 1].tid, (int32_t)tdax_syscall(SYS_gettid));
	else if (tdax_count_slot < 0)
		tdax_count_slot = 0; /* the parent's other threads' slots are free to take here */
}

void *tdax_real_lookup(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

void tdax_warn(const char *fmt, const char *a, const char *b)
{
	if (tdax_rt.quiet)
		return;
	char line[1024];
	int n = snprintf(line, sizeof(line), "tdax[%d]: ", (int)getpid());
	n += snprintf(line + n, sizeof(line) - (size_t)n, fmt, a, b);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	tdax_inside++;
	/* The write-back thread has a descriptor table of its own (fdtable.h):
	 * the application's stderr, as it is now, through /proc. */
	int fd = tdax_fds_private ? TDAX_REAL(open)("/proc/self/fd/2", O_WRONLY | O_APPEND | O_CLOEXEC) : 2;
	if (fd >= 0 && TDAX_REAL(write)(fd, line, (size_t)n) < 0)
		n = 0;
	if (fd != 2 && fd >= 0)
		TDAX_REAL(close)(fd);
	tdax_inside--;
}

void tdax_fallback(enum tdax_fallback why, const char *path)
{
	tdax_count((enum tdax_stat)(TDAX_ST_FALLBACK0 + why), 1);
	tdax_fallback_said(why, path);
}

void tdax_fallback_said(enum tdax_fallback why, const char *path)
{
	/* The normal course of things -- counted, worth a warning only when
	 * asked (TDAX_VERBOSE): a change of names, a range not upgraded, a
	 * stdio stream (a log file a server opens with fopen for every line:
	 * its syncs are the kernel's, nothing is at risk), a big write on the
	 * block path (TDAX_BIG_WRITE, as configured). */
	if (!tdax_rt.verbose &&
	    (why == TDAX_FB_METADATA || why == TDAX_FB_NOT_UPGRADED || why == TDAX_FB_STDIO ||
	     why == TDAX_FB_BIG_WRITE))
		return;
	uint32_t bit = 1u << why;
	if (atomic_fetch_or(&tdax_rt.warned, bit) & bit)
		return;
	tdax_warn("%s: falling back to the kernel's sync (%s); further cases are only counted "
	     "(TDAX_QUIET=1 silences this)", path, tdax_fallback_name(why));
}

void tdax_stats_flush(void)
{
	/* Two threads may flush at once (the write-back thread's pass and a
	 * sync before the thread ran): each adds only what it moved
	 * `flushed` past. */
	_Atomic uint64_t *dst = tdax_stats(tdax_rt.dev);
	for (int i = 0; i < TDAX_ST_COUNT; i++) {
		uint64_t now = tdax_count_total((enum tdax_stat)i);
		uint64_t was = atomic_load_explicit(&tdax_rt.flushed[i], memory_order_relaxed);
		while (was < now && !atomic_compare_exchange_weak(&tdax_rt.flushed[i], &was, now))
			;
		if (was < now)
			atomic_fetch_add(&dst[i], now - was);
	}
}

uint64_t tdax_env_value(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi)
{
	uint64_t v;
	char why[192];
	if (tdax_env_u64(name, dflt, lo, hi, &v, why, sizeof(why)))
		tdax_warn("%s%s", why, "");
	return v;
}

/* Bypass mode's variables, in the order of its tunables (control.h). */
static const struct tdax_env_number bypass_vars[4] = {
	{ "TDAX_BYPASS_SHARE_PCT", 50, 1, 100 },
	{ "TDAX_BYPASS_BLOCK", 4096, 512, TDAX_MAX_BYPASS_BLOCK },
	{ "TDAX_BYPASS_FLOOR", 0, 0, (uint64_t)1 << 40 },
	{ "TDAX_BYPASS_WINDOW_MS", 1000, 10, 60000 },
};

void tdax_bypass_configure(void)
{
	uint64_t v[4];
	for (int i = 0; i < 4; i++) {
		v[i] = tdax_env_value(bypass_vars[i].name, bypass_vars[i].dflt, bypass_vars[i].lo, bypass_vars[i].hi);
		if (secure_getenv(bypass_vars[i].name))
			tdax_rt.bypass_env_set |= 1u << i;
	}
	tdax_rt.bypass_env.bypass_share_pct = (uint32_t)v[0];
	tdax_rt.bypass_env.bypass_block = (uint32_t)v[1];
	tdax_rt.bypass_env.bypass_floor = v[2];
	tdax_rt.bypass_env.bypass_window_ns = v[3] * 1000000u;
}

void tdax_bypass_tunables(const struct tdax_device *dev, struct tdax_tunables *t)
{
	tdax_control_get(dev, t);
	uint32_t set = tdax_rt.bypass_env_set;
	const struct tdax_tunables *e = &tdax_rt.bypass_env;
	if (set & 1)
		t->bypass_share_pct = e->bypass_share_pct;
	if (set & 2)
		t->bypass_block = e->bypass_block;
	if (set & 4)
		t->bypass_floor = e->bypass_floor;
	if (set & 8)
		t->bypass_window_ns = e->bypass_window_ns;
}
