/*
 * cachestat -- the device's table of promoted files' cache figures
 * (cachestat.h).
 */
#include "core/cachestat.h"
#include "core/util.h"

_Static_assert(TDAX_CACHESTAT_OFF >= TDAX_TUNABLES_OFF + 256 && TDAX_CACHESTAT_SLOTS >= 8,
	       "the table fits between the tunables and the directories");

static struct tdax_cachestat_slot *slot_at(const struct tdax_device *dev, uint32_t i)
{
	return (struct tdax_cachestat_slot *)(dev->base + TDAX_CACHESTAT_OFF) + i;
}

static bool stale(const struct tdax_cachestat_slot *s, uint64_t now)
{
	uint32_t pid = atomic_load(&s->pid);
	return !pid || now - atomic_load(&s->updated_ns) > TDAX_CACHESTAT_STALE_NS;
}

void tdax_cachestat_put(struct tdax_device *dev, uint32_t pid, uint32_t file, uint32_t gen,
			const struct tdax_cachestat *v)
{
	uint64_t now = tdax_coarse_ns();
	struct tdax_cachestat_slot *s = NULL;
	for (uint32_t i = 0; i < TDAX_CACHESTAT_SLOTS && !s; i++) {
		struct tdax_cachestat_slot *t = slot_at(dev, i);
		if (atomic_load(&t->pid) == pid && t->file == file)
			s = t;
	}
	for (uint32_t i = 0; i < TDAX_CACHESTAT_SLOTS && !s; i++) {
		struct tdax_cachestat_slot *t = slot_at(dev, i);
		uint32_t was = atomic_load(&t->pid);
		if (stale(t, now) && atomic_compare_exchange_strong(&t->pid, &was, pid))
			s = t;
	}
	if (!s)
		return;
	s->file = file;
	s->gen = gen;
	s->blocks = v->blocks;
	s->block_size = v->block_size;
	s->hits = v->hits;
	s->misses = v->misses;
	s->bandwidth = v->bandwidth;
	s->append = v->append;
	atomic_store(&s->updated_ns, now);
}

void tdax_cachestat_sweep(struct tdax_device *dev, uint32_t pid, bool (*keep)(uint32_t file))
{
	for (uint32_t i = 0; i < TDAX_CACHESTAT_SLOTS; i++) {
		struct tdax_cachestat_slot *s = slot_at(dev, i);
		uint32_t mine = pid;
		if (atomic_load(&s->pid) == pid && !keep(s->file))
			atomic_compare_exchange_strong(&s->pid, &mine, 0);
	}
}

bool tdax_cachestat_get(const struct tdax_device *dev, uint32_t file, uint32_t gen, struct tdax_cachestat *v,
			uint32_t *pid)
{
	uint64_t now = tdax_coarse_ns();
	for (uint32_t i = 0; i < TDAX_CACHESTAT_SLOTS; i++) {
		const struct tdax_cachestat_slot *s = slot_at(dev, i);
		uint32_t p = atomic_load(&s->pid);
		if (stale(s, now) || s->file != file || s->gen != gen || !tdax_pid_alive(p))
			continue;
		*v = (struct tdax_cachestat){
			.blocks = s->blocks, .block_size = s->block_size, .hits = s->hits, .misses = s->misses,
			.bandwidth = s->bandwidth, .append = s->append,
		};
		*pid = p;
		return true;
	}
	return false;
}
