/* test_cachestat -- the device's table of promoted files (core/cachestat.h):
 * what another process's selection sees of a slot, and when a slot is
 * nobody's. */
#define _GNU_SOURCE
#include "harness.h"

#include <string.h>
#include <unistd.h>

#include "core/cachestat.h"
#include "core/util.h"

static struct tdax_cachestat_slot *slot0(struct tdax_device *dev)
{
	return (struct tdax_cachestat_slot *)(dev->base + TDAX_CACHESTAT_OFF);
}

/* Another live process (this one's parent) publishes a file: this process
 * sees its figures, its own slots not; a slot updated after this
 * process's clock read (the writer read the clock later, a tick on) is
 * fresh, not an age that wrapped around; one not updated for
 * TDAX_CACHESTAT_STALE_NS, or whose process is gone, is nobody's. */
TEST(another_processs_slot_is_seen_while_its_process_lives_and_updates_it)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	uint32_t other = (uint32_t)getppid(), me = (uint32_t)getpid();
	struct tdax_cachestat v = { .blocks = 3, .block_size = 4096, .write = 640, .append = 1 << 20 }, got[4];
	tdax_cachestat_put(dev, other, 7, 1, &v);
	tdax_cachestat_put(dev, me, 8, 1, &v);
	CHECK(tdax_cachestat_others(dev, me, got, 4) == 1);
	CHECK(got[0].blocks == 3 && got[0].write == 640 && got[0].append == 1 << 20);

	struct tdax_cachestat_slot *s = NULL;
	for (struct tdax_cachestat_slot *t = slot0(dev); !s; t++)
		s = atomic_load(&t->pid) == other ? t : NULL;
	uint64_t now = tdax_coarse_ns();
	atomic_store(&s->updated_ns, now + 50 * 1000000ull);
	CHECK(tdax_cachestat_others(dev, me, got, 4) == 1);
	atomic_store(&s->updated_ns, now - TDAX_CACHESTAT_STALE_NS - 1000000000ull);
	CHECK(tdax_cachestat_others(dev, me, got, 4) == 0);
	/* A stale slot is taken by the next publisher. */
	tdax_cachestat_put(dev, me, 9, 1, &v);
	CHECK(atomic_load(&s->pid) == me && s->file == 9);
	tdax_device_close(dev);
}

TEST(an_age_is_never_negative)
{
	CHECK(tdax_age_ns(1000, 400) == 600);
	CHECK(tdax_age_ns(400, 1000) == 0);
	CHECK(tdax_age_ns(5, 5) == 0);
}
