/*
 * views -- mappings of managed files that cannot write them (views.h).
 */
#define _GNU_SOURCE
#include "preload/views.h"
#include "core/sys.h"
#include "preload/fdtable.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>

struct view {
	uintptr_t addr; /* 0: no view here (the slot is free once fd is -1 too) */
	size_t len;
	uint64_t dev, ino;
	bool shared;
	int fd;         /* shared: tdax's duplicate of the descriptor it was made from */
};

_Atomic uint32_t tdax_views_live;

/* Slots change under the lock; a dropped view's duplicate is let go after
 * it (losing sight of a file syncs it), the slot taken until then. */
static struct view views[TDAX_VIEWS_MAX] = { [0 ... TDAX_VIEWS_MAX - 1] = { .fd = -1 } };
static pthread_mutex_t views_lock = PTHREAD_MUTEX_INITIALIZER;

bool tdax_views_add(int fd, uint64_t dev, uint64_t ino, uintptr_t addr, size_t len, bool shared)
{
	int dup = shared ? (int)tdax_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (shared && dup < 0)
		return false;
	struct view *v = NULL;
	bool added = false;
	pthread_mutex_lock(&views_lock);
	for (int i = 0; i < TDAX_VIEWS_MAX && !v; i++)
		if (!views[i].addr && views[i].fd < 0)
			v = &views[i];
	if (v) {
		*v = (struct view){ .addr = addr, .len = len, .dev = dev, .ino = ino, .shared = shared, .fd = dup };
		added = !shared || tdax_ownfd_keep(&v->fd) == 0; /* (a duplicate not kept is closed) */
		if (added)
			atomic_fetch_add(&tdax_views_live, 1);
		else
			*v = (struct view){ .fd = -1 };
	} else if (dup >= 0) {
		tdax_syscall(SYS_close, dup);
	}
	pthread_mutex_unlock(&views_lock);
	return added;
}

static bool overlaps(const struct view *v, uintptr_t addr, size_t len)
{
	return v->addr && addr < v->addr + v->len && v->addr < addr + len;
}

/* Locked: take view v out of the table (its slot stays taken while its
 * duplicate lives). */
static void take(struct view *v)
{
	v->addr = 0;
	atomic_fetch_sub(&tdax_views_live, 1);
}

void tdax_views_take_slow(uintptr_t addr, size_t len, struct tdax_views_taken *t)
{
	pthread_mutex_lock(&views_lock);
	for (int i = 0; i < TDAX_VIEWS_MAX; i++)
		if (views[i].shared && overlaps(&views[i], addr, len)) {
			take(&views[i]);
			t->slot[t->n++] = i;
		}
	pthread_mutex_unlock(&views_lock);
}

/* The kernel maps whole pages: a length as it counts it. */
static size_t pages(size_t len)
{
	return (len + 4095) & ~(size_t)4095;
}

static bool whole_move(const struct view *v, uintptr_t old, size_t old_len, int flags)
{
	return v->addr == old && pages(v->len) == pages(old_len) && old_len && !(flags & MREMAP_DONTUNMAP);
}

void tdax_views_take_moved(uintptr_t old, size_t old_len, int flags, struct tdax_views_taken *t)
{
	t->n = 0;
	if (!atomic_load_explicit(&tdax_views_live, memory_order_relaxed))
		return;
	int whole = -1, n = 0;
	pthread_mutex_lock(&views_lock);
	for (int i = 0; i < TDAX_VIEWS_MAX; i++)
		if (overlaps(&views[i], old, old_len ? old_len : 1)) {
			n++;
			whole = whole_move(&views[i], old, old_len, flags) ? i : whole;
		}
	pthread_mutex_unlock(&views_lock);
	if (n > (whole >= 0))
		tdax_views_take_slow(old, old_len ? old_len : 1, t);
}

int tdax_views_fd(int slot)
{
	return views[slot].fd;
}

void tdax_views_let_go(const struct tdax_views_taken *t)
{
	pthread_mutex_lock(&views_lock);
	for (int i = 0; i < t->n; i++)
		if (views[t->slot[i]].fd >= 0)
			tdax_ownfd_close(&views[t->slot[i]].fd); /* (-1 now: the slot is free) */
	pthread_mutex_unlock(&views_lock);
}

/* Locked: take every view inside [addr, addr + len) but keep; their
 * duplicates are closed, their slots free. */
static void gone_locked(uintptr_t addr, size_t len, const struct view *keep)
{
	for (int i = 0; i < TDAX_VIEWS_MAX; i++) {
		struct view *v = &views[i];
		if (v != keep && v->addr && v->addr >= addr && v->addr + v->len <= addr + len) {
			take(v);
			if (v->fd >= 0)
				tdax_ownfd_close(&v->fd);
		}
	}
}

void tdax_views_unmapped_slow(uintptr_t addr, size_t len)
{
	pthread_mutex_lock(&views_lock);
	gone_locked(addr, len, NULL);
	pthread_mutex_unlock(&views_lock);
}

int tdax_views_munmap(void *addr, size_t len)
{
	if (!atomic_load_explicit(&tdax_views_live, memory_order_relaxed))
		return (int)tdax_syscall(SYS_munmap, addr, len);
	/* The lock is held over the call: another thread that maps memory
	 * where a view was and makes it writable finds the view gone, not a
	 * view of a file in its place. */
	pthread_mutex_lock(&views_lock);
	int r = (int)tdax_syscall(SYS_munmap, addr, len);
	int err = errno;
	if (r == 0)
		gone_locked((uintptr_t)addr, len, NULL);
	pthread_mutex_unlock(&views_lock);
	errno = err;
	return r;
}

void *tdax_views_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr)
{
	if (!atomic_load_explicit(&tdax_views_live, memory_order_relaxed))
		return (void *)tdax_syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
	uintptr_t a = (uintptr_t)old;
	pthread_mutex_lock(&views_lock);
	struct view *whole = NULL;
	bool here = false;
	for (int i = 0; i < TDAX_VIEWS_MAX; i++) {
		here |= overlaps(&views[i], a, old_len ? old_len : 1);
		whole = whole_move(&views[i], a, old_len, flags) ? &views[i] : whole;
	}
	if (!here && !(flags & MREMAP_FIXED)) { /* (a realloc's, say) */
		pthread_mutex_unlock(&views_lock);
		return (void *)tdax_syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
	}
	void *p = (void *)tdax_syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
	int err = errno;
	if (p != MAP_FAILED) {
		if (whole) {
			whole->addr = (uintptr_t)p;
			whole->len = new_len;
		}
		if (flags & MREMAP_FIXED) /* what was there is gone */
			gone_locked((uintptr_t)p, new_len, whole);
		if (p != old && !(flags & MREMAP_DONTUNMAP)) /* and what was here */
			gone_locked(a, old_len, whole);
	}
	pthread_mutex_unlock(&views_lock);
	errno = err;
	return p;
}

bool tdax_views_of(uint64_t dev, uint64_t ino)
{
	if (!atomic_load_explicit(&tdax_views_live, memory_order_relaxed))
		return false;
	bool found = false;
	pthread_mutex_lock(&views_lock);
	for (int i = 0; i < TDAX_VIEWS_MAX && !found; i++)
		found = views[i].addr && views[i].dev == dev && views[i].ino == ino;
	pthread_mutex_unlock(&views_lock);
	return found;
}

void tdax_views_before_fork(void)
{
	pthread_mutex_lock(&views_lock);
}

void tdax_views_after_fork(void)
{
	pthread_mutex_unlock(&views_lock);
}
