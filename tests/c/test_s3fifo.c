/* test_s3fifo -- the block cache's eviction (policy/s3fifo.h) against the
 * S3-FIFO paper: new objects enter the small queue and one-hit wonders
 * leave through it, an object accessed in the small queue moves to main,
 * the ghost sends a returning key to main and forgets, main's second
 * chances, the runtime's handed-over hits, remove, a scan that does not
 * flush the hot set (against a plain FIFO), a resize, and random
 * operations. */
#include "harness.h"

#include <string.h>

#include "policy/s3fifo.h"

#define NONE TDAX_S3FIFO_NONE

static uint64_t arena[1 << 14];
static struct tdax_s3fifo C;

/* A fresh cache of n ids over the arena. */
static struct tdax_s3fifo *fresh(uint32_t n)
{
	if (tdax_s3fifo_bytes(n) > sizeof(arena))
		abort();
	memset(arena, 0, sizeof(arena)); /* init takes zeroed memory */
	tdax_s3fifo_init(&C, n, arena);
	return &C;
}

/* Ids 0..n-1 in with keys 1000 + id, oldest first. */
static struct tdax_s3fifo *filled(uint32_t n)
{
	struct tdax_s3fifo *c = fresh(n);
	for (uint32_t i = 0; i < n; i++)
		tdax_s3fifo_insert(c, i, 1000 + i);
	return c;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The runtime's lock-free counts: handed over, and forgotten, when asked. */
static uint32_t take_hits(void *ctx, uint32_t id)
{
	uint32_t *counts = ctx, h = counts[id];
	counts[id] = 0;
	return h;
}

TEST(new_objects_enter_small_and_one_hit_wonders_leave_through_it)
{
	struct tdax_s3fifo *c = fresh(100);
	uint32_t owner[100]; /* id -> the index of the key it holds */
	for (uint32_t k = 0; k < 200; k++) {
		uint32_t id = k;
		if (k >= 100) {
			id = tdax_s3fifo_evict(c, NULL, NULL);
			/* First in, first out of S, its key to the ghost; M untouched. */
			CHECK(id != NONE && owner[id] == k - 100);
			CHECK(!tdax_s3fifo_queued(c, id));
			CHECK(tdax_s3fifo_ghost_has(c, 1000 + owner[id]));
			CHECK(tdax_s3fifo_main_size(c) == 0);
		}
		tdax_s3fifo_insert(c, id, 1000 + k);
		owner[id] = k;
		CHECK(tdax_s3fifo_queued(c, id) && !tdax_s3fifo_in_main(c, id));
		CHECK(tdax_s3fifo_small_size(c) == (k < 100 ? k + 1 : 100));
	}
	CHECK(tdax_s3fifo_main_size(c) == 0);
	CHECK(!tdax_s3fifo_ghost_has(c, 1000 + 150)); /* still cached, never evicted */
}

TEST(an_object_hit_in_small_moves_to_main_at_its_turn_with_freq_0)
{
	struct tdax_s3fifo *c = filled(10);
	tdax_s3fifo_hit(c, 0, 1);
	CHECK(!tdax_s3fifo_in_main(c, 0)); /* lazy: a hit moves nothing */
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 1);
	CHECK(tdax_s3fifo_in_main(c, 0) && c->node[0].freq == 0);
	CHECK(!tdax_s3fifo_ghost_has(c, 1000));
	CHECK(tdax_s3fifo_small_size(c) == 8 && tdax_s3fifo_main_size(c) == 1);
}

/* n = 20: S's target 2, M's capacity 18. M full, S holding 19 (hit) and
 * 18: 19 moves to M, which gives up its oldest, 0; 18 stays in S. */
TEST(a_move_into_a_full_main_evicts_from_main)
{
	struct tdax_s3fifo *c = filled(20);
	for (uint32_t i = 0; i < 18; i++)
		tdax_s3fifo_hit(c, i, 1);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 18);
	CHECK(tdax_s3fifo_main_size(c) == 18 && tdax_s3fifo_small_size(c) == 1);
	tdax_s3fifo_insert(c, 18, 5000);
	tdax_s3fifo_hit(c, 19, 1);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 0);
	CHECK(tdax_s3fifo_in_main(c, 19) && !tdax_s3fifo_in_main(c, 18) && tdax_s3fifo_queued(c, 18));
	CHECK(!tdax_s3fifo_ghost_has(c, 1000));
	CHECK(tdax_s3fifo_main_size(c) == 18 && tdax_s3fifo_small_size(c) == 1);
}

TEST(a_key_evicted_from_small_and_inserted_again_goes_to_main_and_leaves_the_ghost)
{
	struct tdax_s3fifo *c = filled(10);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 0);
	CHECK(tdax_s3fifo_ghost_has(c, 1000));
	tdax_s3fifo_insert(c, 0, 1000);
	CHECK(tdax_s3fifo_in_main(c, 0) && !tdax_s3fifo_ghost_has(c, 1000));
	CHECK(tdax_s3fifo_small_size(c) == 9 && tdax_s3fifo_main_size(c) == 1);
	/* A key never seen, or one that left, enters S. */
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 1);
	tdax_s3fifo_insert(c, 1, 5000);
	CHECK(!tdax_s3fifo_in_main(c, 1));
}

/* M, oldest first: 0 hit twice, 1 hit once, 2 and 3 never. The victims:
 * 2, 3, then 1 (passed over once), then 0 (passed over twice). */
TEST(an_object_of_main_hit_twice_is_passed_over_twice_before_it_goes)
{
	struct tdax_s3fifo *c = filled(20);
	for (uint32_t i = 0; i < 4; i++)
		tdax_s3fifo_hit(c, i, 1);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 4); /* 0..3 moved to M */
	CHECK(tdax_s3fifo_main_size(c) == 4);
	for (uint32_t i = 5; i < 20; i++) /* S emptied: evict takes from M */
		tdax_s3fifo_remove(c, i);
	tdax_s3fifo_hit(c, 0, 2);
	tdax_s3fifo_hit(c, 1, 1);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 2);
	CHECK(c->node[0].freq == 1 && c->node[1].freq == 0);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 3);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 1);
	CHECK(tdax_s3fifo_queued(c, 0) && c->node[0].freq == 0);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 0);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == NONE);
	CHECK(!tdax_s3fifo_ghost_has(c, 1002)); /* M's victims leave no ghost */
}

TEST(accesses_handed_over_by_the_callback_keep_an_object)
{
	uint32_t counts[10] = { 0 };
	/* Without the callback, 0 is S's victim. */
	struct tdax_s3fifo *c = filled(10);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 0);
	/* With it reporting an access of 0, 0 moves to M and the count is taken. */
	c = filled(10);
	counts[0] = 1;
	CHECK(tdax_s3fifo_evict(c, take_hits, counts) == 1);
	CHECK(tdax_s3fifo_in_main(c, 0) && counts[0] == 0);
	/* In M: 5 accesses count as 3 (the cap), so 0 is passed over, down to 2. */
	for (uint32_t i = 2; i < 10; i++)
		tdax_s3fifo_remove(c, i);
	tdax_s3fifo_insert(c, 1, 1001); /* back from the ghost, to M */
	counts[0] = 5;
	CHECK(tdax_s3fifo_evict(c, take_hits, counts) == 1);
	CHECK(c->node[0].freq == 2 && counts[0] == 0);
}

TEST(a_removed_id_is_neither_queued_nor_evicted_nor_in_the_ghost)
{
	struct tdax_s3fifo *c = filled(10);
	tdax_s3fifo_hit(c, 0, 1);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 1); /* and 0 moved to M */
	tdax_s3fifo_remove(c, 2); /* S's tail */
	tdax_s3fifo_remove(c, 6); /* the middle of S */
	tdax_s3fifo_remove(c, 0); /* M's only one */
	tdax_s3fifo_remove(c, 0); /* again: nothing */
	CHECK(!tdax_s3fifo_queued(c, 0) && !tdax_s3fifo_queued(c, 2) && !tdax_s3fifo_queued(c, 6));
	CHECK(tdax_s3fifo_small_size(c) == 6 && tdax_s3fifo_main_size(c) == 0);
	uint32_t v, expect[] = { 3, 4, 5, 7, 8, 9 }, k = 0;
	while ((v = tdax_s3fifo_evict(c, NULL, NULL)) != NONE) {
		CHECK(k < 6 && v == expect[k++]);
	}
	CHECK(k == 6);
	CHECK(!tdax_s3fifo_ghost_has(c, 1000) && !tdax_s3fifo_ghost_has(c, 1002) &&
	      !tdax_s3fifo_ghost_has(c, 1006));
	CHECK(tdax_s3fifo_ghost_has(c, 1001) && tdax_s3fifo_ghost_has(c, 1009));
}

/* n = 100: M's capacity, and G's, is 90. Key 0 is a key like the others. */
TEST(the_ghost_forgets_a_key_after_main_capacity_newer_keys)
{
	struct tdax_s3fifo *c = fresh(100);
	CHECK(c->small_cap == 10 && c->main_cap == 90);
	for (uint32_t i = 0; i < 100; i++)
		tdax_s3fifo_insert(c, i, i);
	CHECK(!tdax_s3fifo_ghost_has(c, 0));
	uint32_t v = tdax_s3fifo_evict(c, NULL, NULL);
	CHECK(v == 0 && tdax_s3fifo_ghost_has(c, 0));
	for (uint64_t k = 100; k < 190; k++) {
		tdax_s3fifo_insert(c, v, k);
		CHECK(tdax_s3fifo_ghost_has(c, 0)); /* 89 newer keys at most */
		v = tdax_s3fifo_evict(c, NULL, NULL);
	}
	CHECK(!tdax_s3fifo_ghost_has(c, 0)); /* the 90th pushed it out */
	CHECK(tdax_s3fifo_ghost_has(c, 1)); /* the next oldest is still in */
	/* Inserted again now, key 0 is new: it enters S. */
	tdax_s3fifo_insert(c, v, 0);
	CHECK(!tdax_s3fifo_in_main(c, v));
}

TEST(a_cache_of_one_id_still_works)
{
	struct tdax_s3fifo *c = fresh(1);
	CHECK(c->small_cap == 1 && c->main_cap == 0);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == NONE);
	tdax_s3fifo_insert(c, 0, 7);
	tdax_s3fifo_hit(c, 0, 1);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 0); /* to M, over its capacity: out */
	CHECK(!tdax_s3fifo_queued(c, 0) && !tdax_s3fifo_ghost_has(c, 7));
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == NONE);
}

/* The scan trace: a hot set of 500 keys (0..499) read at random, one
 * access in four, amid a scan of 50,000 keys read once each. */
#define SCAN_IDS 1000
#define SCAN_HOT 500
#define SCAN_KEYS 50000
#define SCAN_WARM 20000 /* accesses before the hot hits are counted */
static uint32_t trace[SCAN_HOT + SCAN_KEYS * 4 / 3 + 1];
static uint32_t trace_len;
static uint32_t where[SCAN_HOT + SCAN_KEYS]; /* key -> id, NONE if not cached */
static uint32_t holds[SCAN_IDS];             /* id -> key */

static void make_trace(void)
{
	uint64_t s = 88172645463325252ull;
	uint32_t scan = 0;
	trace_len = 0;
	while (scan < SCAN_KEYS)
		trace[trace_len++] = xorshift(&s) % 4 ? SCAN_HOT + scan++ : (uint32_t)(xorshift(&s) % SCAN_HOT);
}

/* The hit ratio of the hot keys after the warm-up, for S3-FIFO (fifo
 * false) or a plain FIFO of as many ids. */
static double hot_hit_ratio(bool fifo)
{
	struct tdax_s3fifo *c = fresh(SCAN_IDS);
	uint32_t used = 0, ring = 0, hot = 0, hits = 0;
	for (uint32_t k = 0; k < SCAN_HOT + SCAN_KEYS; k++)
		where[k] = NONE;
	for (uint32_t i = 0; i < trace_len; i++) {
		uint32_t key = trace[i], id = where[key];
		bool counted = i >= SCAN_WARM && key < SCAN_HOT;
		hot += counted;
		if (id != NONE) {
			hits += counted;
			if (!fifo)
				tdax_s3fifo_hit(c, id, 1);
			continue;
		}
		if (used < SCAN_IDS) {
			id = used++;
		} else {
			id = fifo ? ring : tdax_s3fifo_evict(c, NULL, NULL);
			ring = (ring + 1) % SCAN_IDS;
			where[holds[id]] = NONE;
		}
		if (!fifo)
			tdax_s3fifo_insert(c, id, key);
		where[key] = id;
		holds[id] = key;
	}
	return (double)hits / hot;
}

TEST(a_scan_of_one_hit_wonders_does_not_flush_the_hot_set)
{
	make_trace();
	double s3 = hot_hit_ratio(false), fifo = hot_hit_ratio(true);
	printf("  hot hit ratio: s3-fifo %.3f, fifo %.3f\n", s3, fifo);
	CHECK(s3 >= 0.9);
	CHECK(s3 > fifo + 0.1);
}

/* Random inserts, hits, evictions and removes on 64 ids and 200 keys (so
 * keys come back from the ghost), with and without handed-over hits. The
 * test's own view: which ids are queued, and which id caches which key. */
enum { RN = 64, RKEYS = 200 };
static bool r_queued[RN];
static uint32_t r_key[RN], r_id[RKEYS], r_n;

static void r_forget(uint32_t id)
{
	r_queued[id] = false;
	r_id[r_key[id]] = NONE;
	r_n--;
}

TEST(random_operations_keep_the_queues_consistent)
{
	struct tdax_s3fifo *c = fresh(RN);
	uint32_t counts[RN] = { 0 };
	for (uint32_t k = 0; k < RKEYS; k++)
		r_id[k] = NONE;
	uint64_t s = 0x9e3779b97f4a7c15ull;
	for (int step = 0; step < 10000; step++) {
		uint32_t op = xorshift(&s) % 8, id = xorshift(&s) % RN;
		if (op < 3) { /* insert a key not cached */
			uint32_t key = xorshift(&s) % RKEYS;
			while (r_id[key] != NONE)
				key = (key + 1) % RKEYS;
			if (!r_queued[id]) {
				tdax_s3fifo_insert(c, id, key);
				CHECK(!tdax_s3fifo_ghost_has(c, key));
				r_queued[id] = true;
				r_key[id] = key;
				r_id[key] = id;
				r_n++;
			}
		} else if (op < 5) {
			if (xorshift(&s) % 2)
				tdax_s3fifo_hit(c, id, 1 + xorshift(&s) % 4);
			else
				counts[id] += xorshift(&s) % 3;
		} else if (op < 7) {
			uint32_t v = tdax_s3fifo_evict(c, xorshift(&s) % 2 ? take_hits : NULL, counts);
			CHECK((v == NONE) == (r_n == 0));
			if (v != NONE) {
				CHECK(v < RN && r_queued[v]); /* not returned twice */
				r_forget(v);
			}
		} else {
			tdax_s3fifo_remove(c, id);
			if (r_queued[id]) {
				r_forget(id);
				CHECK(!tdax_s3fifo_ghost_has(c, r_key[id]));
			}
		}
		CHECK(tdax_s3fifo_small_size(c) + tdax_s3fifo_main_size(c) == r_n);
		uint32_t in_main = 0;
		for (uint32_t i = 0; i < RN; i++) {
			CHECK(tdax_s3fifo_queued(c, i) == r_queued[i]);
			CHECK(!r_queued[i] || !tdax_s3fifo_ghost_has(c, r_key[i]));
			in_main += tdax_s3fifo_in_main(c, i);
		}
		CHECK(in_main == tdax_s3fifo_main_size(c));
	}
}

/* The runtime's readers keep hitting every block while an eviction runs:
 * each look hands over a new access. The eviction still ends, in M too. */
static uint32_t always_hit(void *ctx, uint32_t id)
{
	(void)ctx, (void)id;
	return 1;
}

TEST(an_eviction_ends_even_when_every_look_hands_over_an_access)
{
	struct tdax_s3fifo *c = filled(10);
	uint32_t v = tdax_s3fifo_evict(c, always_hit, NULL);
	CHECK(v < 10 && !tdax_s3fifo_queued(c, v));
	CHECK(tdax_s3fifo_small_size(c) + tdax_s3fifo_main_size(c) == 9);
	v = tdax_s3fifo_evict(c, always_hit, NULL);
	CHECK(v < 10 && !tdax_s3fifo_queued(c, v));
}

/* The block cache holds fewer blocks than it has ids for while its share
 * is small: S's target and G's span follow the size it is given. */
TEST(a_resized_cache_keeps_its_small_queue_at_a_tenth_of_its_new_size)
{
	struct tdax_s3fifo *c = fresh(100);
	tdax_s3fifo_resize(c, 20); /* S's target: 2 */
	tdax_s3fifo_insert(c, 0, 7);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 0);
	tdax_s3fifo_insert(c, 0, 7); /* back from G: into M */
	CHECK(tdax_s3fifo_in_main(c, 0));
	for (uint32_t i = 1; i <= 3; i++)
		tdax_s3fifo_insert(c, i, 100 + i);
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 1); /* S at 3 >= 2: its oldest */
	tdax_s3fifo_resize(c, 100); /* S's target: 10, S at 2 is under it */
	CHECK(tdax_s3fifo_evict(c, NULL, NULL) == 0); /* M's oldest */
	CHECK(tdax_s3fifo_small_size(c) == 2 && tdax_s3fifo_main_size(c) == 0);
}

TEST(a_resized_cache_keeps_as_many_ghosts_as_its_new_main_holds)
{
	struct tdax_s3fifo *c = fresh(100);
	tdax_s3fifo_resize(c, 10); /* M's capacity and G's: 9 */
	for (uint32_t i = 0; i < 10; i++)
		tdax_s3fifo_insert(c, i, 1000 + i);
	for (uint32_t i = 0; i < 10; i++)
		CHECK(tdax_s3fifo_evict(c, NULL, NULL) == i);
	CHECK(!tdax_s3fifo_ghost_has(c, 1000)); /* ten went to G: the first is gone */
	for (uint32_t i = 1; i < 10; i++)
		CHECK(tdax_s3fifo_ghost_has(c, 1000 + i));
}
