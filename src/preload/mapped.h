/*
 * mapped -- the process's table of explicit mappings (include/tdax.h's
 * tdax_map; the calls are explicit.h's): where each lies, and which file
 * entry it maps, for the calls and for every part of tdax that must treat
 * a mapped file apart (its syncs are real while one lives: stores not
 * persisted are not in the log; bypass mode promotes it not).
 *
 * A slot's address is stored last (release) and read first (acquire), 0
 * is a free slot: a persist finds its mapping without a lock. Adding and
 * removing take the table's lock (never on a persist).
 */
#ifndef TDAX_MAPPED_H
#define TDAX_MAPPED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tdax.h"

struct tdax_mapping {
	_Atomic uintptr_t addr;
	size_t len;
	uint64_t off;      /* of addr in the file */
	uint32_t idx, gen; /* the file's entry, when logged */
	bool logged;       /* tdax manages the file: a persist may be answered from the log */
};

/* Live mappings in this process. */
extern _Atomic uint32_t tdax_mapped_live;

/* Does a live mapping of this process map file entry idx (or one of a file
 * that had no entry when it was made, which may be it now)? One load while
 * there is none. */
bool tdax_mapped_file_slow(uint32_t idx);
static inline bool tdax_mapped_file(uint32_t idx)
{
	return __builtin_expect(atomic_load_explicit(&tdax_mapped_live, memory_order_relaxed) != 0, 0) &&
	       tdax_mapped_file_slow(idx);
}

/* The mapping [addr, addr + len) lies in, or NULL. */
const struct tdax_mapping *tdax_mapped_find(const void *addr, size_t len);

/* The table's lock, around add, remove and a look at every slot. */
void tdax_mapped_lock(void);
void tdax_mapped_unlock(void);
/* fork: the lock is taken before and let go after, on both sides (a child
 * made while another thread held it would find it held by nobody it has,
 * and hang at its first tdax_map). */
void tdax_mapped_before_fork(void);
void tdax_mapped_after_fork(void);

/* Locked: a slot for a new mapping of len bytes at addr, off in its file,
 * counted live, not logged (the caller sets idx and gen, then logged);
 * NULL if the table is full. */
struct tdax_mapping *tdax_mapped_add(uintptr_t addr, size_t len, uint64_t off);

/* Locked: the slot of the mapping made at addr with length len, or NULL. */
struct tdax_mapping *tdax_mapped_exact(const void *addr, size_t len);

/* Locked: slot i (< TDAX_MAPS_MAX), or NULL if free. */
struct tdax_mapping *tdax_mapped_at(int i);

/* Locked: free slot m, no longer live. */
void tdax_mapped_remove(struct tdax_mapping *m);

/* Locked: pin again the ranges of every logged mapping of file (idx, gen)
 * (tdax_tracking_pin). A range's pin is one process's at a time (its
 * pid), and a process that unmaps lets go of its pins: another mapping of
 * the same range, here or in another process, must take them up again. */
void tdax_mapped_pin(uint32_t idx, uint32_t gen);

/* The same for every logged mapping of this process, the lock taken: the
 * write-back thread's, every pass that looks at the ranges (~100 ms), so
 * that a pin let go by another process is taken up within one. Nothing
 * while no mapping lives. */
void tdax_mapped_pin_every(void);

#endif
