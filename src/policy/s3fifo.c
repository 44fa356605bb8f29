/*
 * s3fifo -- the block cache's queues, ghost and eviction (s3fifo.h).
 */
#include "policy/s3fifo.h"

/* A node's queue; OUT is 0 so that a zeroed node is out of every queue. */
enum { OUT = 0, SMALL, MAIN };

static uint32_t small_cap(uint32_t n)
{
	return n / 10 ? n / 10 : 1;
}

/* G's table: twice its capacity, a power of two, so that at most half the
 * slots are live and a probe run rarely fills; no fewer than the probes. */
static uint64_t ghost_slots(uint32_t n)
{
	uint64_t want = 2 * (uint64_t)(n - small_cap(n)), s = TDAX_S3FIFO_GHOST_PROBES;
	while (s < want)
		s <<= 1;
	return s;
}

size_t tdax_s3fifo_bytes(uint32_t n)
{
	return ghost_slots(n) * sizeof(struct tdax_s3fifo_ghost) + (size_t)n * sizeof(struct tdax_s3fifo_node);
}

void tdax_s3fifo_init(struct tdax_s3fifo *c, uint32_t n, void *mem)
{
	c->n = n;
	tdax_s3fifo_resize(c, n);
	c->small = c->main = (struct tdax_s3fifo_queue){ TDAX_S3FIFO_NONE, TDAX_S3FIFO_NONE, 0 };
	c->ghost = mem;
	c->ghost_mask = ghost_slots(n) - 1;
	c->node = (struct tdax_s3fifo_node *)(c->ghost + ghost_slots(n));
	c->ghost_seq = 0;
}

void tdax_s3fifo_resize(struct tdax_s3fifo *c, uint32_t m)
{
	c->small_cap = small_cap(m);
	c->main_cap = m - c->small_cap;
}

/* The ghost. A key lives in the slots from its hash's on, within the
 * probes; a slot is live while its insertion number is among the last
 * main_cap. Lookups always look at every probe: a removal leaves a hole,
 * and an insertion may skip holes for the key's own slot. */

/* Spreads the keys (block numbers, mostly consecutive) over the table:
 * MurmurHash3's finalizer. */
static uint64_t hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	return k ^ (k >> 33);
}

static bool live(const struct tdax_s3fifo *c, const struct tdax_s3fifo_ghost *g)
{
	return g->seq && c->ghost_seq - g->seq < c->main_cap;
}

static struct tdax_s3fifo_ghost *probe(const struct tdax_s3fifo *c, uint64_t h, uint32_t i)
{
	return &c->ghost[(h + i) & c->ghost_mask];
}

static struct tdax_s3fifo_ghost *ghost_find(const struct tdax_s3fifo *c, uint64_t key)
{
	uint64_t h = hash(key);
	for (uint32_t i = 0; i < TDAX_S3FIFO_GHOST_PROBES; i++) {
		struct tdax_s3fifo_ghost *g = probe(c, h, i);
		if (g->key == key && live(c, g))
			return g;
	}
	return NULL;
}

/* Into the key's own slot, else the first dead one, else over the oldest
 * of the probes (the loss that bounds the table: a key forgotten early). */
static void ghost_put(struct tdax_s3fifo *c, uint64_t key)
{
	struct tdax_s3fifo_ghost *own = NULL, *dead = NULL, *oldest = NULL;
	uint64_t h = hash(key);
	for (uint32_t i = 0; i < TDAX_S3FIFO_GHOST_PROBES; i++) {
		struct tdax_s3fifo_ghost *g = probe(c, h, i);
		if (g->seq && g->key == key)
			own = g;
		else if (!live(c, g) && !dead)
			dead = g;
		else if (!oldest || g->seq < oldest->seq)
			oldest = g;
	}
	struct tdax_s3fifo_ghost *g = own ? own : dead ? dead : oldest;
	g->key = key;
	g->seq = ++c->ghost_seq;
}

bool tdax_s3fifo_ghost_has(const struct tdax_s3fifo *c, uint64_t key)
{
	return ghost_find(c, key) != NULL;
}

/* The queues. */

static struct tdax_s3fifo_queue *queue(struct tdax_s3fifo *c, uint8_t which)
{
	return which == SMALL ? &c->small : &c->main;
}

static void push(struct tdax_s3fifo *c, uint8_t which, uint32_t id)
{
	struct tdax_s3fifo_queue *q = queue(c, which);
	struct tdax_s3fifo_node *x = &c->node[id];
	x->newer = TDAX_S3FIFO_NONE;
	x->older = q->head;
	x->queue = which;
	if (q->head != TDAX_S3FIFO_NONE)
		c->node[q->head].newer = id;
	else
		q->tail = id;
	q->head = id;
	q->size++;
}

static void unlink_node(struct tdax_s3fifo *c, uint32_t id)
{
	struct tdax_s3fifo_node *x = &c->node[id];
	struct tdax_s3fifo_queue *q = queue(c, x->queue);
	if (x->newer != TDAX_S3FIFO_NONE)
		c->node[x->newer].older = x->older;
	else
		q->head = x->older;
	if (x->older != TDAX_S3FIFO_NONE)
		c->node[x->older].newer = x->newer;
	else
		q->tail = x->newer;
	q->size--;
	x->queue = OUT;
}

static uint8_t plus(uint8_t freq, uint32_t n)
{
	return n >= (uint32_t)(TDAX_S3FIFO_FREQ_MAX - freq) ? TDAX_S3FIFO_FREQ_MAX : (uint8_t)(freq + n);
}

/* id's frequency once the accesses the runtime has not handed over yet are in. */
static uint8_t freq_now(struct tdax_s3fifo *c, uint32_t id, tdax_s3fifo_hits_fn hits, void *ctx)
{
	struct tdax_s3fifo_node *x = &c->node[id];
	if (hits)
		x->freq = plus(x->freq, hits(ctx, id));
	return x->freq;
}

void tdax_s3fifo_insert(struct tdax_s3fifo *c, uint32_t id, uint64_t key)
{
	tdax_s3fifo_remove(c, id);
	struct tdax_s3fifo_ghost *g = ghost_find(c, key);
	if (g)
		g->seq = 0;
	c->node[id].key = key;
	c->node[id].freq = 0;
	push(c, g ? MAIN : SMALL, id);
}

void tdax_s3fifo_hit(struct tdax_s3fifo *c, uint32_t id, uint32_t n)
{
	struct tdax_s3fifo_node *x = &c->node[id];
	if (x->queue != OUT)
		x->freq = plus(x->freq, n);
}

/* M's tail leaves unless accessed since its last turn: then it goes round
 * again, one access fewer. Each turn lowers a frequency, so without new
 * hits every object of M is at 0 after 3 rounds; hits handed over during
 * the loop could keep it turning, so after 4 rounds hits is no longer asked. */
static uint32_t evict_main(struct tdax_s3fifo *c, tdax_s3fifo_hits_fn hits, void *ctx)
{
	uint64_t looks = 4 * (uint64_t)c->main.size;
	for (;;) {
		uint32_t t = c->main.tail;
		if (looks-- == 0)
			hits = NULL;
		uint8_t f = freq_now(c, t, hits, ctx);
		unlink_node(c, t);
		if (!f)
			return t;
		c->node[t].freq = f - 1;
		push(c, MAIN, t);
	}
}

/* S's tail moves to M if accessed while in S (M then gives up one if it
 * is over its capacity), else leaves, its key to G. */
static uint32_t evict_small(struct tdax_s3fifo *c, tdax_s3fifo_hits_fn hits, void *ctx)
{
	while (c->small.size) {
		uint32_t t = c->small.tail;
		uint8_t f = freq_now(c, t, hits, ctx);
		unlink_node(c, t);
		if (!f) {
			ghost_put(c, c->node[t].key);
			return t;
		}
		c->node[t].freq = 0;
		push(c, MAIN, t);
		if (c->main.size > c->main_cap)
			return evict_main(c, hits, ctx);
	}
	return evict_main(c, hits, ctx);
}

uint32_t tdax_s3fifo_evict(struct tdax_s3fifo *c, tdax_s3fifo_hits_fn hits, void *ctx)
{
	if (!c->small.size && !c->main.size)
		return TDAX_S3FIFO_NONE;
	if (c->small.size >= c->small_cap || !c->main.size)
		return evict_small(c, hits, ctx);
	return evict_main(c, hits, ctx);
}

void tdax_s3fifo_remove(struct tdax_s3fifo *c, uint32_t id)
{
	if (c->node[id].queue != OUT)
		unlink_node(c, id);
}

bool tdax_s3fifo_queued(const struct tdax_s3fifo *c, uint32_t id)
{
	return c->node[id].queue != OUT;
}

bool tdax_s3fifo_in_main(const struct tdax_s3fifo *c, uint32_t id)
{
	return c->node[id].queue == MAIN;
}

uint32_t tdax_s3fifo_small_size(const struct tdax_s3fifo *c)
{
	return c->small.size;
}

uint32_t tdax_s3fifo_main_size(const struct tdax_s3fifo *c)
{
	return c->main.size;
}
