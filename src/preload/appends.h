/*
 * appends -- where a write at the end of a file lands, known without
 * asking the kernel.
 *
 * A write through an O_APPEND descriptor lands at the file's end, and
 * coherent mode must log it at the offset it took; the kernel tells that
 * only by the descriptor's position afterwards, an lseek (a system call
 * per append: ~10 % of a 128 B append + lightweight sync on this machine).
 * While this process holds the file's write lease (lease.h) no other
 * process can change the file, and every change this process makes passes
 * a hook: so once one append's end is known, the next append lands there
 * -- unless something else changed the file meanwhile. Every other way of
 * changing it says so before it reaches the kernel:
 *
 *   - a write that does not keep the end known (one at an offset, a cold
 *     one, one through a twin or at the position of a descriptor without
 *     O_APPEND) forgets the file's end, inside its in-flight count
 *     (tdax_appends_forget: a load while nothing is known);
 *   - any other change of the size or the bytes (truncate, fallocate, a
 *     copy into the file, a clone, a promotion) moves the process's resize
 *     count for its duration (tdax_appends_resize_begin/_end);
 *   - a lease granted again after it was lost, and a fork (the child's
 *     parent may append on), move the lease grant count (lease.h);
 *   - a duplicate of the descriptor still in unregistered mode (its file
 *     registered through another one since) writes with no count to see:
 *     no end becomes known while one exists.
 *
 * An append under its file's position lock (coherent_ops.c) uses the known
 * end only if the end was known before its write, the lease held and no
 * resize began from then until after it, and it moves the end on with a
 * compare-and-swap that a forget in between makes fail. Otherwise it reads
 * the end back with lseek, as before, and makes it known if nothing else
 * could have moved the file's end around its write: the lease held
 * throughout, no other write or resize in flight. The test build checks
 * every known end against the kernel's (a wrong one aborts the process).
 */
#ifndef TDAX_APPENDS_H
#define TDAX_APPENDS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/files.h"
#include "preload/fdtable.h"

/* The end known of each file entry of the region, in this process. */
struct tdax_append_end {
	_Atomic uint64_t end_plus1; /* 0: not known */
	/* Valid with end_plus1, written under the file's position lock: */
	uint64_t grants;            /* the lease grant count when it became known */
	uint64_t resizes;           /* the resize count then */
	uint32_t gen;               /* the entry's generation */
};
extern struct tdax_append_end *tdax_append_ends; /* max_files entries; NULL while tdax is off */

/* Allocate the table (at attach); false if it cannot be had. */
bool tdax_appends_init(uint32_t max_files);

#ifdef TDAX_TEST_BUILD
/* Positive control for the tests (TDAX_TEST_APPENDS_BLIND=1): no change
 * makes a known end forgotten, and none is checked against the kernel's. */
extern bool tdax_appends_blind;
#endif

/* A change of file idx that does not keep its end known is about to reach
 * the kernel (its in-flight count taken). */
static inline void tdax_appends_forget(uint32_t idx)
{
#ifdef TDAX_TEST_BUILD
	if (tdax_appends_blind)
		return;
#endif
	_Atomic uint64_t *e = &tdax_append_ends[idx].end_plus1;
	if (atomic_load_explicit(e, memory_order_relaxed))
		atomic_exchange(e, 0);
}

/* A call that may change some file's size or bytes other than by a write
 * is about to reach the kernel; _end once its effect is accounted for. */
void tdax_appends_resize_begin(void);
void tdax_appends_resize_end(void);

/* What an append under the position lock saw before its write. */
struct tdax_append_look {
	uint64_t end_plus1; /* the end known then, 0 if none */
	uint64_t grants, resizes;
	uint64_t seen;      /* the file's size as tdax writers left it (rt.size_seen) */
	bool quiet;         /* no other tdax write, cold write or resize on its way */
	bool covered;       /* every change since the last real sync logged (rt.uncovered 0) */
	bool held;          /* the lease held (looked at, lease.h) */
};
void tdax_appends_look(int fd, const struct tdax_fd *e, const struct tdax_file_rt *rt,
		       struct tdax_append_look *l);

/* After an append of r > 0 bytes: its end, if the known one holds (then
 * known on as that end), or -1 (read it back). */
int64_t tdax_appends_next(const struct tdax_fd *e, const struct tdax_append_look *l, size_t r);

/*
 * After an append of r bytes whose end was read back from the kernel:
 * make the end known if nothing but the append could have moved it since
 * the look (alone: no cold write started since, coherent.h). False if the
 * file was covered and the append landed elsewhere than where tdax's
 * writes had left its end while nothing of tdax's changed it: a writer
 * tdax does not see did. (The sync's guard compares the size alone, which
 * this append made agree; a file not covered has a real sync coming.)
 */
bool tdax_appends_learned(const struct tdax_fd *e, const struct tdax_file_rt *rt,
			  const struct tdax_append_look *l, uint64_t end, size_t r, bool alone);

#endif
