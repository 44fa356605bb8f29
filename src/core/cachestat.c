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
	return !pid || tdax_age_ns(now, atomic_load(&s->updated_ns)) > TDAX_CACHESTAT_STALE_NS;
}

/* Bytes a second into units of 64 (saturated), and back. */
static uint32_t units(uint64_t bps)
{
	return bps >> 6 > UINT32_MAX ? UINT32_MAX : (uint32_t)(bps >> 6);
}

static struct tdax_cachestat figures(const struct tdax_cachestat_slot *s)
{
	return (struct tdax_cachestat){
		.blocks = s->blocks, .block_size = s->block_size, .hits = s->hits, .misses = s->misses,
		.read = (uint64_t)s->read << 6, .write = (uint64_t)s->write << 6,
		.append = (uint64_t)s->append << 6,
	};
}

static bool live(const struct tdax_cachestat_slot *s, uint64_t now)
{
	return !stale(s, now) && tdax_pid_alive(atomic_load(&s->pid));
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
	s->read = units(v->read);
	s->write = units(v->write);
	s->append = units(v->append);
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
		if (s->file != file || s->gen != gen || !live(s, now))
			continue;
		*v = figures(s);
		*pid = atomic_load(&s->pid);
		return true;
	}
	return false;
}

uint32_t tdax_cachestat_others(const struct tdax_device *dev, uint32_t pid, struct tdax_cachestat *v,
			       uint32_t max)
{
	uint64_t now = tdax_coarse_ns();
	uint32_t n = 0;
	for (uint32_t i = 0; i < TDAX_CACHESTAT_SLOTS && n < max; i++) {
		const struct tdax_cachestat_slot *s = slot_at(dev, i);
		if (atomic_load(&s->pid) != pid && live(s, now))
			v[n++] = figures(s);
	}
	return n;
}
