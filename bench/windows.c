/*
 * windows -- why the decay windows are what they are: the policy (track.c,
 * the same code the runtime runs) fed synthetic streams with a simulated
 * clock, for a grid of writeback and write windows. Per pair it prints
 * whether a write+sync stream is upgraded and after how many syncs, how
 * soon it is downgraded once it stops, and whether the streams that must
 * never be upgraded (slow syncs, rare sync bursts, writes with rare syncs)
 * stay on the kernel path.
 *
 * usage: tdax-windows
 */
#include <stdio.h>
#include <string.h>

#include "policy/track.h"

#define MS 1000000ull
#define US 1000ull

struct sim {
	struct tdax_range_track r;
	struct tdax_tunables t;
	uint64_t last_sync;
	int syncs, upgraded_at, upgrades;
};

static void init(struct sim *s, uint64_t wb, uint64_t wr)
{
	memset(s, 0, sizeof(*s));
	s->t = (struct tdax_tunables)TDAX_DEFAULT_TUNABLES;
	s->t.wb_window_ns = wb;
	s->t.wr_window_ns = wr;
	s->last_sync = UINT64_MAX;
	s->upgraded_at = -1;
}

static void jobs(struct sim *s)
{
	enum tdax_decision j = tdax_track_job_begin(&s->r);
	tdax_track_job_end(&s->r, j, true);
	if (j == TDAX_UPGRADE) {
		s->upgrades++;
		if (s->upgraded_at < 0)
			s->upgraded_at = s->syncs;
	}
}

static void sync_at(struct sim *s, uint64_t now)
{
	bool stream = s->last_sync != UINT64_MAX && now - s->last_sync <= s->t.wb_window_ns;
	s->last_sync = now;
	s->syncs++;
	tdax_track_sync(&s->r, &s->t, now, stream);
	jobs(s);
}

static void reeval(struct sim *s, uint64_t now)
{
	tdax_track_reevaluate(&s->r, &s->t, now);
	jobs(s);
}

/* 128 B append + sync every 200 us for 2 s, then silence: syncs until the
 * upgrade, ms until the downgrade after the stream stopped. */
static void stream(uint64_t wb, uint64_t wr, int *syncs, double *down_ms)
{
	struct sim s;
	init(&s, wb, wr);
	uint64_t now = 100000 * MS;
	for (int i = 0; i < 10000; i++, now += 200 * US) {
		tdax_track_write(&s.r, &s.t, now, (uint64_t)i / 32 % 512, 1);
		sync_at(&s, now + 20 * US);
	}
	*syncs = s.upgraded_at;
	uint64_t stop = now;
	*down_ms = -1;
	for (; now < stop + 60000 * MS; now += 10 * MS) {
		reeval(&s, now);
		if (atomic_load(&s.r.state) == TDAX_R_NONE) {
			*down_ms = (double)(now - stop) / 1e6;
			break;
		}
	}
}

/* Upgrades of a pattern that must never be upgraded, over 60 s:
 * 4 KiB writes every 10 ms with a sync every `sync_ms`, or (burst) a burst
 * of 20 syncs 1 ms apart every 10 s. */
static int never(uint64_t wb, uint64_t wr, int sync_ms, int burst)
{
	struct sim s;
	init(&s, wb, wr);
	uint64_t now = 100000 * MS;
	for (int i = 0; i < 60000; i++, now += MS) {
		if (i % 10 == 0)
			tdax_track_write(&s.r, &s.t, now, (uint64_t)i / 10 % 512, 1);
		if (burst ? (i % 10000 >= 9980) : (i % sync_ms == sync_ms - 1))
			sync_at(&s, now);
		if (i % 100 == 0)
			reeval(&s, now);
	}
	return (int)atomic_load(&s.r.transitions);
}

int main(void)
{
	static const uint64_t wbs[] = { 250 * MS, 1000 * MS, 4000 * MS };
	static const double ratios[] = { 1.0, 1.5, 3.0 };
	printf("U=60 D=30 F=5. stream: 128 B append+sync every 200 us for 2 s, then nothing.\n");
	printf("never-cases: transitions in 60 s of 4 KiB writes every 10 ms with a sync every\n");
	printf("2 s / every 5 s / in bursts of 20 every 10 s (all must be 0).\n\n");
	printf("%8s %8s | %14s %14s | %6s %6s %6s\n", "wb (ms)", "wr (ms)", "upgraded after",
	       "downgraded", "2 s", "5 s", "bursts");
	for (size_t i = 0; i < 3; i++)
		for (size_t k = 0; k < 3; k++) {
			uint64_t wb = wbs[i], wr = (uint64_t)((double)wb * ratios[k]);
			int syncs;
			double down;
			stream(wb, wr, &syncs, &down);
			char up[32], dn[32];
			snprintf(up, sizeof(up), syncs < 0 ? "never" : "%d syncs", syncs);
			snprintf(dn, sizeof(dn), down < 0 ? "-" : "%.0f ms later", down);
			printf("%8llu %8llu | %14s %14s | %6d %6d %6d\n", (unsigned long long)(wb / MS),
			       (unsigned long long)(wr / MS), up, dn, never(wb, wr, 2000, 0),
			       never(wb, wr, 5000, 0), never(wb, wr, 0, 1));
		}
	return 0;
}
