/*
 * mapped -- the table of explicit mappings (mapped.h).
 */
#define _GNU_SOURCE
#include "preload/mapped.h"
#include "preload/state.h"
#include "preload/tracking.h"

#include <pthread.h>

_Atomic uint32_t tdax_mapped_live;

static struct tdax_mapping maps[TDAX_MAPS_MAX];
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;

/* The slot a thread's last persist found: most persist through one mapping. */
static __thread int last_hit TDAX_TLS;

bool tdax_mapped_file_slow(uint32_t idx)
{
	for (int i = 0; i < TDAX_MAPS_MAX; i++)
		if (atomic_load_explicit(&maps[i].addr, memory_order_acquire) &&
		    (!maps[i].logged || maps[i].idx == idx))
			return true;
	return false;
}

const struct tdax_mapping *tdax_mapped_find(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	for (int k = 0; k < TDAX_MAPS_MAX; k++) {
		int i = (last_hit + k) % TDAX_MAPS_MAX;
		uintptr_t b = atomic_load_explicit(&maps[i].addr, memory_order_acquire);
		if (b && a >= b && len <= maps[i].len && a - b <= maps[i].len - len) {
			last_hit = i;
			return &maps[i];
		}
	}
	return NULL;
}

void tdax_mapped_lock(void)
{
	pthread_mutex_lock(&maps_lock);
}

void tdax_mapped_unlock(void)
{
	pthread_mutex_unlock(&maps_lock);
}

void tdax_mapped_before_fork(void)
{
	pthread_mutex_lock(&maps_lock);
}

void tdax_mapped_after_fork(void)
{
	pthread_mutex_unlock(&maps_lock);
}

struct tdax_mapping *tdax_mapped_add(uintptr_t addr, size_t len, uint64_t off)
{
	for (int i = 0; i < TDAX_MAPS_MAX; i++) {
		if (!atomic_load(&maps[i].addr)) {
			struct tdax_mapping *m = &maps[i];
			m->len = len;
			m->off = off;
			m->logged = false; /* until the caller says: its syncs are real meanwhile */
			atomic_fetch_add(&tdax_mapped_live, 1);
			atomic_store_explicit(&m->addr, addr, memory_order_release);
			return m;
		}
	}
	return NULL;
}

struct tdax_mapping *tdax_mapped_exact(const void *addr, size_t len)
{
	for (int i = 0; i < TDAX_MAPS_MAX; i++)
		if (atomic_load(&maps[i].addr) == (uintptr_t)addr && maps[i].len == len)
			return &maps[i];
	return NULL;
}

struct tdax_mapping *tdax_mapped_at(int i)
{
	return atomic_load(&maps[i].addr) ? &maps[i] : NULL;
}

void tdax_mapped_remove(struct tdax_mapping *m)
{
	atomic_store(&m->addr, 0);
	atomic_fetch_sub(&tdax_mapped_live, 1);
}

/* Locked: pin the ranges of every logged mapping, or (every false) of
 * those of file (idx, gen). */
static void pin(bool every, uint32_t idx, uint32_t gen)
{
	for (int i = 0; i < TDAX_MAPS_MAX; i++) {
		const struct tdax_mapping *m = tdax_mapped_at(i);
		if (m && m->logged && (every || (m->idx == idx && m->gen == gen)))
			tdax_tracking_pin(m->idx, m->gen, m->off, m->len);
	}
}

void tdax_mapped_pin(uint32_t idx, uint32_t gen)
{
	pin(false, idx, gen);
}

void tdax_mapped_pin_every(void)
{
	if (!atomic_load_explicit(&tdax_mapped_live, memory_order_relaxed))
		return;
	tdax_mapped_lock();
	pin(true, 0, 0);
	tdax_mapped_unlock();
}
