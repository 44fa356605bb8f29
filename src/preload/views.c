/*
 * views -- mappings of managed files that cannot write them (views.h).
 */
#define _GNU_SOURCE
#include "preload/views.h"
#include "core/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

struct slot {
	uintptr_t addr; /* 0: free */
	size_t len;
	bool shared;
	struct tdax_view v;
};

_Atomic uint32_t tdax_views_live, tdax_views_taints;

static struct slot views[TDAX_VIEWS_MAX];
static struct tdax_ident taints[TDAX_VIEWS_MAX];
static pthread_mutex_t views_lock = PTHREAD_MUTEX_INITIALIZER;

bool tdax_views_add(int fd, uint64_t dev, uint64_t ino, const struct tdax_ident *id, uintptr_t addr,
		    size_t len, bool shared)
{
	bool added = false;
	pthread_mutex_lock(&views_lock);
	for (int i = 0; i < TDAX_VIEWS_MAX && !added; i++)
		if (!views[i].addr) {
			views[i] = (struct slot){ .addr = addr, .len = len, .shared = shared,
						  .v = { .fd = fd, .dev = dev, .ino = ino, .id = *id } };
			atomic_fetch_add(&tdax_views_live, 1);
			added = true;
		}
	pthread_mutex_unlock(&views_lock);
	return added;
}

static bool overlaps(const struct slot *s, uintptr_t addr, size_t len)
{
	return s->addr && addr < s->addr + s->len && s->addr < addr + len;
}

/* Locked: free slot s. */
static void drop(struct slot *s)
{
	s->addr = 0;
	atomic_fetch_sub(&tdax_views_live, 1);
}

/* Locked: take the shared views [addr, addr + len) overlaps. */
static void take_locked(uintptr_t addr, size_t len, struct tdax_views_taken *t)
{
	for (int i = 0; i < TDAX_VIEWS_MAX; i++)
		if (views[i].shared && overlaps(&views[i], addr, len)) {
			t->v[t->n++] = views[i].v;
			drop(&views[i]);
		}
}

void tdax_views_take_slow(uintptr_t addr, size_t len, struct tdax_views_taken *t)
{
	pthread_mutex_lock(&views_lock);
	take_locked(addr, len, t);
	pthread_mutex_unlock(&views_lock);
}

/* The kernel maps whole pages: a length as it counts it. */
static size_t pages(size_t len)
{
	return (len + 4095) & ~(size_t)4095;
}

static bool whole_move(const struct slot *v, uintptr_t old, size_t old_len, int flags)
{
	return v->addr == old && pages(v->len) == pages(old_len) && old_len && !(flags & MREMAP_DONTUNMAP);
}

void tdax_views_take_moved(uintptr_t old, size_t old_len, int flags, struct tdax_views_taken *t)
{
	t->n = 0;
	if (!atomic_load_explicit(&tdax_views_live, memory_order_relaxed))
		return;
	size_t len = old_len ? old_len : 1;
	int n = 0;
	bool whole = false;
	pthread_mutex_lock(&views_lock);
	for (int i = 0; i < TDAX_VIEWS_MAX; i++)
		if (overlaps(&views[i], old, len)) {
			n++;
			whole |= whole_move(&views[i], old, old_len, flags);
		}
	if (n > (int)whole)
		take_locked(old, len, t);
	pthread_mutex_unlock(&views_lock);
}

/* Locked: free every view inside [addr, addr + len) but keep. */
static void gone_locked(uintptr_t addr, size_t len, const struct slot *keep)
{
	for (int i = 0; i < TDAX_VIEWS_MAX; i++) {
		struct slot *v = &views[i];
		if (v != keep && v->addr && v->addr >= addr && v->addr + v->len <= addr + len)
			drop(v);
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
	struct slot *whole = NULL;
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
		found = views[i].addr && views[i].v.dev == dev && views[i].v.ino == ino;
	pthread_mutex_unlock(&views_lock);
	return found;
}

/* Locked: is the file of identity id tainted? */
static bool tainted_locked(const struct tdax_ident *id)
{
	uint32_t n = atomic_load(&tdax_views_taints);
	for (uint32_t i = 0; i < n; i++)
		if (tdax_ident_same(&taints[i], id))
			return true;
	return false;
}

void tdax_views_taint(const struct tdax_ident *id)
{
	pthread_mutex_lock(&views_lock);
	if (!tainted_locked(id)) {
		uint32_t n = atomic_load(&tdax_views_taints);
		/* Full (32 files, each made writable after the process had
		 * closed every descriptor of it): the oldest gives way. */
		if (n == TDAX_VIEWS_MAX)
			memmove(taints, taints + 1, sizeof(taints[0]) * --n);
		taints[n] = *id;
		atomic_store(&tdax_views_taints, n + 1);
	}
	pthread_mutex_unlock(&views_lock);
}

bool tdax_views_tainted_slow(const struct tdax_ident *id)
{
	pthread_mutex_lock(&views_lock);
	bool found = tainted_locked(id);
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
