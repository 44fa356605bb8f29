/* test_select -- bypass mode's profiles and selection (policy/select.h)
 * with a fake clock: the paper's §4.3 greedy choice, the floor, the
 * footprint, the hysteresis and when a new selection is due. */
#include "harness.h"

#include <string.h>

#include "policy/select.h"

#define MS 1000000ull
#define S 1000000000ull
#define WIN S

static const struct tdax_select_params P = { .capacity = 1 << 20, .floor = 4096, .hold_ns = S,
					     .append_hold_ns = S / 10, .keep_pct = TDAX_SELECT_KEEP_PCT };

/* A file that makes n writes of len bytes (appends or in place) and a sync
 * after every k of them, evenly over the window ending at now. */
static void stream(struct tdax_profile *p, uint64_t now, int n, uint64_t len, bool append, int k)
{
	for (int i = 0; i < n; i++) {
		uint64_t t = now - WIN + (uint64_t)i * (WIN / (uint64_t)n);
		tdax_profile_write(p, WIN, t, len, append);
		if (k && (i + 1) % k == 0)
			tdax_profile_sync(p, WIN, t);
	}
}

static struct tdax_candidate cand(const struct tdax_profile *p, uint64_t now, bool promoted)
{
	struct tdax_candidate c;
	memset(&c, 0, sizeof(c));
	tdax_profile_rates(p, WIN, now, &c.rates);
	c.promoted = promoted;
	return c;
}

TEST(a_profile_counts_reads_writes_appends_and_syncs_over_its_window)
{
	static struct tdax_profile p;
	memset(&p, 0, sizeof(p));
	uint64_t now = 100 * S;
	stream(&p, now, 1000, 128, true, 1);
	tdax_profile_write(&p, WIN, now - 1, 4096, false);
	tdax_profile_read(&p, WIN, now - 1, 8192);
	struct tdax_rates r;
	tdax_profile_rates(&p, WIN, now, &r);
	/* Within the window's resolution (the oldest bucket may be gone). */
	CHECK(r.append >= 128000 * 7 / 8 && r.append <= 128000);
	CHECK(r.write == 4096 && r.read == 8192);
	CHECK(r.syncs >= 875 && r.syncs <= 1000 && r.ops >= 876 && r.ops <= 1001);
	CHECK(tdax_select_bandwidth(&r) == r.read + r.write + r.append);
	/* Two windows later it is all forgotten. */
	tdax_profile_rates(&p, WIN, now + 2 * WIN, &r);
	CHECK(!r.read && !r.write && !r.append && !r.ops && !r.syncs);
	/* A 100-byte write counts as two units of 64. */
	tdax_profile_write(&p, WIN, now + 3 * WIN, 100, false);
	tdax_profile_rates(&p, WIN, now + 3 * WIN, &r);
	CHECK(r.write == 128);
}

/* Hot, warm and cold files, room for two: the two with the most bandwidth
 * that synced; a busy file that never syncs is no candidate. */
TEST(the_files_with_most_bandwidth_that_sync_are_taken_while_they_fit)
{
	static struct tdax_profile hot, warm, busy_unsynced, cold;
	uint64_t now = 50 * S;
	stream(&hot, now, 2000, 256, true, 1);        /* ~512 KB/s appended, synced */
	stream(&warm, now, 500, 256, true, 1);        /* ~128 KB/s */
	stream(&busy_unsynced, now, 4000, 256, true, 0); /* ~1 MB/s, never synced */
	stream(&cold, now, 8, 256, false, 1);         /* 2 KB/s: below the floor */
	struct tdax_candidate c[4] = { cand(&warm, now, false), cand(&busy_unsynced, now, false),
				       cand(&hot, now, false), cand(&cold, now, false) };
	uint32_t order[4];
	struct tdax_select_params p = P;
	uint64_t total = tdax_select(c, order, 4, &p);
	CHECK(c[0].selected && c[2].selected && !c[1].selected && !c[3].selected);
	CHECK(!c[1].score && !c[3].score && c[2].score > c[0].score);
	CHECK(total == tdax_select_bandwidth(&c[0].rates) + tdax_select_bandwidth(&c[2].rates));
	/* The footprint: the blocks of a tenth of a second of appends (the
	 * reservation); of a second of writes in place; reads take none. */
	CHECK(c[2].footprint == c[2].rates.append / 10);
	struct tdax_candidate w = c[2];
	w.rates.write = w.rates.append;
	w.rates.append = 0;
	w.rates.read = 1 << 20;
	tdax_select(&w, order, 1, &p);
	CHECK(w.footprint == c[2].rates.append);
	/* Room for the hot one alone. */
	p.capacity = c[2].footprint;
	tdax_select(c, order, 4, &p);
	CHECK(c[2].selected && !c[0].selected);
	/* Room for less than the hot one: the warm one, smaller, still fits. */
	p.capacity = c[2].footprint - 1;
	tdax_select(c, order, 4, &p);
	CHECK(!c[2].selected && c[0].selected);
	/* No room at all: nothing. */
	p.capacity = 0;
	tdax_select(c, order, 4, &p);
	CHECK(!c[0].selected && !c[1].selected && !c[2].selected && !c[3].selected);
}

/* Two files of about the same bandwidth and room for one: the promoted one
 * keeps its place until the other has a quarter more; a promoted file
 * stays a candidate down to half the floor. */
TEST(a_promoted_file_keeps_its_place_against_a_slightly_busier_one)
{
	static struct tdax_profile a, b;
	uint64_t now = 20 * S;
	stream(&a, now, 1000, 256, true, 1);
	stream(&b, now, 1150, 256, true, 1); /* 15 % more */
	struct tdax_candidate c[2] = { cand(&a, now, true), cand(&b, now, false) };
	uint32_t order[2];
	struct tdax_select_params p = P;
	tdax_select(c, order, 2, &p); /* the footprints */
	CHECK(c[0].selected && c[1].selected);
	p.capacity = c[1].footprint; /* room for one of them */
	tdax_select(c, order, 2, &p);
	CHECK(c[0].selected && !c[1].selected);
	/* Not promoted, a is dropped for b at once. */
	c[0].promoted = false;
	tdax_select(c, order, 2, &p);
	CHECK(!c[0].selected && c[1].selected);
	/* b with half as much again: it takes the place. */
	static struct tdax_profile b2;
	stream(&b2, now, 1500, 256, true, 1);
	c[0].promoted = true;
	c[1] = cand(&b2, now, false);
	p.capacity = 1 << 20;
	tdax_select(c, order, 2, &p);
	p.capacity = c[1].footprint;
	tdax_select(c, order, 2, &p);
	CHECK(!c[0].selected && c[1].selected);
	/* The floor: 3 KB/s is under it for a newcomer, not for a promoted file. */
	static struct tdax_profile slow;
	stream(&slow, now, 12, 256, true, 1);
	struct tdax_candidate s = cand(&slow, now, false);
	p.capacity = 1 << 20;
	tdax_select(&s, order, 1, &p);
	CHECK(!s.selected);
	s.promoted = true;
	tdax_select(&s, order, 1, &p);
	CHECK(s.selected);
}

/* A bursty writer -- 256 KiB in place every half second -- whose estimate
 * dipped to half (one burst out of the window) when a selection took it
 * beside a promoted appender: at its full estimate the two overfill the
 * capacity (by more than the keep margin), a selection is due whatever
 * the total bandwidth did, and it keeps the appender, ranked first. */
TEST(promoted_files_that_overfill_the_capacity_call_for_a_selection)
{
	static struct tdax_profile hot, bursty, dipped;
	uint64_t now = 30 * S;
	stream(&hot, now, 1000, 4096, true, 1); /* ~4 MB/s appended */
	for (uint64_t t = now - WIN / 2; t < now; t += WIN / 2 - 1) {
		tdax_profile_write(&bursty, WIN, t, 256 << 10, false);
		tdax_profile_sync(&bursty, WIN, t);
	}
	tdax_profile_write(&dipped, WIN, now - 1, 256 << 10, false);
	tdax_profile_sync(&dipped, WIN, now - 1);
	struct tdax_candidate c[2] = { cand(&hot, now, true), cand(&dipped, now, false) };
	uint32_t order[2];
	struct tdax_select_params p = P;
	tdax_select(c, order, 2, &p); /* the footprints */
	p.capacity = c[0].footprint + c[1].footprint;
	uint64_t total = tdax_select(c, order, 2, &p);
	CHECK(c[0].selected && c[1].selected && !tdax_select_over(c, 2, &p));
	c[1] = cand(&bursty, now, true);
	CHECK(!tdax_select_due(total, tdax_select_total(c, 2, &p)));
	CHECK(tdax_select_over(c, 2, &p));
	/* (Over it by no more than keep_pct: not yet, the hysteresis.) */
	struct tdax_candidate both[2] = { c[0], c[1] };
	struct tdax_select_params roomy = p;
	tdax_select(both, order, 2, &roomy); /* their footprints now */
	roomy.capacity = (both[0].footprint + both[1].footprint) * 100 / (100 + TDAX_SELECT_KEEP_PCT) + 100;
	CHECK(!tdax_select_over(c, 2, &roomy));
	roomy.capacity -= 200;
	CHECK(tdax_select_over(c, 2, &roomy));
	tdax_select(c, order, 2, &p);
	CHECK(c[0].selected && !c[1].selected && c[1].footprint == 2 * (p.capacity - c[0].footprint));
	/* Files not promoted never overfill it. */
	c[0].promoted = c[1].promoted = false;
	p.capacity = 0;
	CHECK(!tdax_select_over(c, 2, &p));
}

TEST(a_new_selection_is_due_when_the_bandwidth_moves_by_a_quarter)
{
	CHECK(!tdax_select_due(0, 0));
	CHECK(tdax_select_due(0, 1));
	CHECK(tdax_select_due(1000, 0));
	CHECK(!tdax_select_due(1000, 1250) && !tdax_select_due(1000, 750));
	CHECK(tdax_select_due(1000, 1251) && tdax_select_due(1000, 749));
}

/* A window longer than a second: one sync in it still makes a candidate
 * (syncs are a count, not a rate rounded down); the total a due check
 * compares is the candidates' bandwidth alone. */
TEST(one_sync_in_a_long_window_makes_a_candidate_and_the_total_counts_candidates)
{
	static struct tdax_profile p, q;
	uint64_t now = 30 * S, win = 4 * S;
	tdax_profile_write(&p, win, now - S, 64 << 10, true);
	tdax_profile_sync(&p, win, now - S);
	tdax_profile_write(&q, win, now - S, 64 << 10, true); /* never synced */
	struct tdax_candidate c[2];
	memset(c, 0, sizeof(c));
	tdax_profile_rates(&p, win, now, &c[0].rates);
	tdax_profile_rates(&q, win, now, &c[1].rates);
	CHECK(c[0].rates.syncs == 1 && c[0].rates.append == (64 << 10) / 4 && c[1].rates.syncs == 0);
	uint32_t order[2];
	struct tdax_select_params pp = P;
	CHECK(tdax_select_total(c, 2, &pp) == c[0].rates.append);
	CHECK(tdax_select(c, order, 2, &pp) == c[0].rates.append);
	CHECK(c[0].selected && !c[1].selected);
}
