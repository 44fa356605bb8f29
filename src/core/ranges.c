/*
 * ranges -- lookup and insertion in the device's range table, with a small
 * per-thread cache in front (a write usually hits the range of the last).
 * Entries of files that are gone (their file entry freed or reused) are
 * taken over by new ranges, so the table does not fill up with the dead.
 */
#include "core/ranges.h"
#include "core/files.h"
#include "core/tunables.h"
#include "core/util.h"

#include <string.h>

#define PROBES 64
#define CACHE 256

/* Per thread: no sharing, no races; initial-exec as in runtime.h. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
	uint64_t open_id, key;
	uint32_t fgen, slot;
} cache[CACHE];

/* n >= 1: the cache's size, or max_ranges (checked when the device is opened). */
static uint32_t hash(uint64_t key, uint32_t n)
{
	return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) % n;
}

/* An entry whose file entry was freed or given to another file: its
 * tracking means nothing any more, and the slot may be taken. */
static bool stale(const struct tdax_device *dev, uint64_t k, uint32_t fgen)
{
	uint32_t idx = (uint32_t)(k >> 32) - 1;
	if (idx >= dev->sb->max_files)
		return true; /* a key no file can have: a damaged entry, free to take */
	const struct tdax_file *f = tdax_file_at(dev, idx);
	return atomic_load(&f->state) != TDAX_FILE_ACTIVE || f->gen != fgen;
}

/* Claim an entry for a new file generation: reset its counters. */
static void adopt(struct tdax_range *r, uint32_t fgen)
{
	TDAX_ASSERT(atomic_load(&r->key) != 0); /* claimed (keys never go back to 0) */
	uint32_t old = atomic_load(&r->fgen);
	if (old != fgen && atomic_compare_exchange_strong(&r->fgen, &old, fgen)) {
		memset(&r->t, 0, sizeof(r->t));
		atomic_store(&r->job_pid, 0);
	}
}

struct tdax_range *tdax_ranges_get(struct tdax_device *dev, uint32_t file, uint32_t fgen,
				   uint32_t rno, bool create)
{
	/* A registered file's index: a key no file can have marks a damaged
	 * entry (stale() takes it over). */
	TDAX_ASSERT(file < dev->sb->max_files);
	uint64_t key = ((uint64_t)file + 1) << 32 | rno;
	uint32_t n = dev->sb->max_ranges;
	uint32_t c = hash(key, CACHE);
	if (cache[c].open_id == dev->open_id && cache[c].key == key && cache[c].fgen == fgen) {
		struct tdax_range *r = tdax_range_at(dev, cache[c].slot);
		if (atomic_load_explicit(&r->key, memory_order_relaxed) == key &&
		    atomic_load_explicit(&r->fgen, memory_order_relaxed) == fgen)
			return r;
	}
	uint32_t h = hash(key, n);
	for (uint32_t p = 0; p < PROBES && p < n; p++) {
		uint32_t slot = (h + p) % n;
		struct tdax_range *r = tdax_range_at(dev, slot);
		uint64_t k = atomic_load(&r->key);
		if (k == 0) {
			if (!create)
				return NULL;
			if (!atomic_compare_exchange_strong(&r->key, &k, key) && k != key)
				continue; /* someone else took the slot for another range */
		} else if (k != key) {
			uint32_t old = atomic_load(&r->fgen);
			if (!create || !stale(dev, k, old) || !atomic_compare_exchange_strong(&r->key, &k, key))
				continue;
			/* taken over from a file that is gone: start from nothing */
			memset(&r->t, 0, sizeof(r->t));
			atomic_store(&r->job_pid, 0);
			atomic_store(&r->fgen, fgen);
		}
		if (create)
			adopt(r, fgen);
		else if (atomic_load(&r->fgen) != fgen)
			return NULL;
		cache[c].open_id = dev->open_id;
		cache[c].key = key;
		cache[c].fgen = fgen;
		cache[c].slot = slot;
		return r;
	}
	return NULL;
}

void tdax_ranges_format(struct tdax_device *dev)
{
	uint64_t n = (uint64_t)dev->sb->max_ranges * TDAX_RANGE_ENTRY_SIZE;
	memset(tdax_range_at(dev, 0), 0, n);
	tdax_dev_persist(dev, tdax_range_at(dev, 0), n);
}

uint32_t tdax_ranges_gran(struct tdax_file_rt *rt, const struct tdax_tunables *t)
{
	uint32_t g = tdax_file_gran(rt);
	if (g)
		return g - 1;
	uint32_t none = 0;
	atomic_compare_exchange_strong(&rt->gran, &none, t->gran_order + 1);
	return tdax_file_gran(rt) - 1;
}

void tdax_ranges_pin(struct tdax_range *r)
{
	if (atomic_load_explicit(&r->pin_pid, memory_order_relaxed) != tdax_pid())
		tdax_pidlock_try(&r->pin_pid);
}

void tdax_ranges_unpin(struct tdax_range *r)
{
	uint32_t me = tdax_pid();
	atomic_compare_exchange_strong(&r->pin_pid, &me, 0);
}
