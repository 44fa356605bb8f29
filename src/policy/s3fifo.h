/*
 * s3fifo -- which block bypass mode's block cache gives up when it needs
 * room: S3-FIFO (Yang et al., "FIFO queues are all you need for cache
 * eviction", SOSP 2023, Algorithm 1), as pure code: no I/O, no allocation
 * (the caller hands over all the memory), so the runtime and the
 * simulator run the same decisions.
 *
 * The cache holds n objects, ids 0..n-1, each with a key (the caller's
 * name for what the id holds) and a frequency of 0..3. Three FIFO queues:
 *   S, small: where a new object enters; its target is 10 % of n (at
 *      least 1; n, or the size tdax_s3fifo_resize gave). Most objects are accessed once and never again; S lets
 *      them go early, after a short stay, without disturbing M.
 *   M, main: the rest of n. An object of S accessed while in S moves to M
 *      when its turn to leave S comes (lazy promotion: no work at a hit);
 *      an object of M accessed since its last turn gets another round, its
 *      frequency lowered by one (a second chance, up to three).
 *   G, ghost: the keys of the last objects S let go, as many as M holds.
 *      An object inserted again while its key is in G was evicted too
 *      early: it enters M at once.
 * A hit only raises a frequency (the runtime counts hits lock-free and
 * hands them over at eviction, tdax_s3fifo_hits_fn); the queues change at
 * insert, evict and remove only. S and M are intrusive doubly linked lists
 * over the ids. G is a hash table of keys and insertion numbers, twice its
 * capacity rounded up to a power of two (16 slots at least), linear
 * probing over 16 slots; a key is in G while its insertion number is among
 * G's last main_cap. It is lossy: when the 16 slots of a new key are all
 * live, the oldest of them is forgotten early. Every call is O(1) (evict
 * amortized; init too).
 */
#ifndef TDAX_S3FIFO_H
#define TDAX_S3FIFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TDAX_S3FIFO_NONE UINT32_MAX
#define TDAX_S3FIFO_FREQ_MAX 3
/* How far the ghost looks for a key from its hash's slot. */
#define TDAX_S3FIFO_GHOST_PROBES 16

/* Accesses of id since the last time it was asked, forgotten by the asking
 * (the runtime counts hits lock-free and hands them over at eviction time). */
typedef uint32_t (*tdax_s3fifo_hits_fn)(void *ctx, uint32_t id);

/* One id: its key, its neighbours in its queue (newer: toward the head,
 * older: toward the tail; NONE at the ends), its frequency and its queue
 * (0: none, else small or main, s3fifo.c's). */
struct tdax_s3fifo_node {
	uint64_t key;
	uint32_t newer, older;
	uint8_t freq, queue;
};

/* A ghost slot: a key and its insertion number; 0: empty. */
struct tdax_s3fifo_ghost {
	uint64_t key, seq;
};

/* A queue: newest at head, oldest (the next to leave) at tail. */
struct tdax_s3fifo_queue {
	uint32_t head, tail, size;
};

struct tdax_s3fifo {
	uint32_t n;         /* ids 0..n-1 */
	uint32_t small_cap; /* S's target: m / 10, at least 1 (m: n, or tdax_s3fifo_resize's) */
	uint32_t main_cap;  /* M's capacity, m - small_cap; G's too */
	struct tdax_s3fifo_queue small, main;
	struct tdax_s3fifo_node *node;   /* n, in mem */
	struct tdax_s3fifo_ghost *ghost; /* ghost_mask + 1 slots, in mem */
	uint64_t ghost_mask;
	uint64_t ghost_seq; /* G's last insertion number; a key is in G while
			     * ghost_seq - its seq < main_cap */
};

/* The memory tdax_s3fifo_init needs for ids 0..n-1 (n >= 1). */
size_t tdax_s3fifo_bytes(uint32_t n);
/* An empty cache of n ids over mem: tdax_s3fifo_bytes(n) bytes of zeros,
 * 8-byte aligned (fresh from calloc or an anonymous map: init touches none
 * of it, so a cache sized for far more ids than it will hold costs only
 * the pages it uses); c and mem are the whole state. */
void tdax_s3fifo_init(struct tdax_s3fifo *c, uint32_t n, void *mem);
/* The cache holds m objects now, 1 <= m <= n (ids stay 0..n-1): S's target
 * and M's and G's capacity follow m. Nothing moves at once: a queue over
 * its new target gives up objects at the following evictions. */
void tdax_s3fifo_resize(struct tdax_s3fifo *c, uint32_t m);
/* id enters with key and frequency 0: to M if key is in G (and it leaves
 * G), else to S. An id already queued is taken out first, as by remove.
 * Does not evict: the caller evicts first when n ids are queued. */
void tdax_s3fifo_insert(struct tdax_s3fifo *c, uint32_t id, uint64_t key);
/* n accesses of a queued id: freq = min(freq + n, 3); nothing if not queued. */
void tdax_s3fifo_hit(struct tdax_s3fifo *c, uint32_t id, uint32_t n);
/* The victim, out of every queue (its key in G if it left from S), or
 * TDAX_S3FIFO_NONE when nothing is queued. hits (may be NULL) is asked for
 * an object's uncounted accesses before its frequency is looked at. */
uint32_t tdax_s3fifo_evict(struct tdax_s3fifo *c, tdax_s3fifo_hits_fn hits, void *ctx);
/* id out of its queue without going to G (freed for another reason);
 * nothing if not queued. */
void tdax_s3fifo_remove(struct tdax_s3fifo *c, uint32_t id);

bool tdax_s3fifo_queued(const struct tdax_s3fifo *c, uint32_t id);
bool tdax_s3fifo_in_main(const struct tdax_s3fifo *c, uint32_t id);
bool tdax_s3fifo_ghost_has(const struct tdax_s3fifo *c, uint64_t key);
uint32_t tdax_s3fifo_small_size(const struct tdax_s3fifo *c);
uint32_t tdax_s3fifo_main_size(const struct tdax_s3fifo *c);

#endif
