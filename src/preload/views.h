/*
 * views -- the process's mappings of managed files that cannot write them:
 * shared read-only ones (LMDB's data file, SQLite's with mmap_size) and
 * private ones. Writes reach such a file through write() and its kin,
 * which tdax sees, so its syncs may stay lightweight -- until a view could
 * write: a shared view of a descriptor open for writing can be made
 * writable later (mprotect, pkey_mprotect), and stores through it would go
 * unseen. The hook of a call that could make one writable (or move it
 * where it is not followed: mremap, other than of a whole view) gives the
 * file to the kernel first, as a writable shared mapping does at mmap:
 * checkpointed, and its syncs real for good (interpose_map.c) -- through a
 * descriptor of the file the process still has, or by its entry. A view
 * keeps no descriptor of its own: closing it would drop the process's
 * POSIX locks on the file (SQLite's). A file that has neither then is
 * *tainted* in this process: registered later, it goes to the kernel at
 * once.
 *
 * Every view keeps its file out of bypass mode: it reads the page cache,
 * which a promoted file's writes do not reach.
 *
 * A table of TDAX_VIEWS_MAX views under one lock; mprotect, munmap and
 * mremap look at it only while a view lives (one load otherwise). A view
 * the table has no room for: a shared one is taken as writable, a private
 * one is not followed (its file may be promoted).
 */
#ifndef TDAX_VIEWS_H
#define TDAX_VIEWS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/files.h"

#define TDAX_VIEWS_MAX 32

/* Views in this process. */
extern _Atomic uint32_t tdax_views_live;

/* fd (managed; the file st_dev dev, st_ino ino, identity id) was just
 * mapped at [addr, addr + len), not writable; shared: MAP_SHARED. False if
 * the table has no room (a shared view is then to be taken as writable). */
bool tdax_views_add(int fd, uint64_t dev, uint64_t ino, const struct tdax_ident *id, uintptr_t addr,
		    size_t len, bool shared);

/* Shared views taken out of the table, whose files the caller gives to
 * the kernel. */
struct tdax_view {
	int fd;                /* the descriptor it was made from (it may be closed, or another file's, now) */
	uint64_t dev, ino;     /* st_dev, st_ino */
	struct tdax_ident id;
};
struct tdax_views_taken {
	int n;
	struct tdax_view v[TDAX_VIEWS_MAX];
};

/* [addr, addr + len) may become writable (mprotect with PROT_WRITE): take
 * the shared views it overlaps. */
void tdax_views_take_slow(uintptr_t addr, size_t len, struct tdax_views_taken *t);
static inline void tdax_views_take(uintptr_t addr, size_t len, struct tdax_views_taken *t)
{
	t->n = 0;
	if (__builtin_expect(atomic_load_explicit(&tdax_views_live, memory_order_relaxed) != 0, 0))
		tdax_views_take_slow(addr, len, t);
}

/* The same before mremap(old, old_len, ..., flags): every shared view it
 * touches but one whole view that moves or resizes (which
 * tdax_views_mremap follows), that is part of a view, several, a copy
 * (old_len 0) or one left behind (MREMAP_DONTUNMAP). */
void tdax_views_take_moved(uintptr_t old, size_t old_len, int flags, struct tdax_views_taken *t);

/* [addr, addr + len) was mapped over: the views inside it are gone. */
void tdax_views_unmapped_slow(uintptr_t addr, size_t len);
static inline void tdax_views_unmapped(uintptr_t addr, size_t len)
{
	if (__builtin_expect(atomic_load_explicit(&tdax_views_live, memory_order_relaxed) != 0, 0))
		tdax_views_unmapped_slow(addr, len);
}

/* The kernel's munmap, under the table's lock while views live; the views
 * inside what it unmapped are gone. */
int tdax_views_munmap(void *addr, size_t len);

/* The kernel's mremap, under the table's lock while views live (no
 * mprotect of a view's new place comes between the call and the view's
 * move): a whole view moved or resized follows; views where the mapping
 * lands, or left where it was, are gone. */
void *tdax_views_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr);

/* Does a view of this process map the file st_dev dev, st_ino ino? */
bool tdax_views_of(uint64_t dev, uint64_t ino);

/* The file of identity id is tainted in this process (above). */
void tdax_views_taint(const struct tdax_ident *id);
/* Is it? One load while no file is. */
bool tdax_views_tainted_slow(const struct tdax_ident *id);
extern _Atomic uint32_t tdax_views_taints;
static inline bool tdax_views_tainted(const struct tdax_ident *id)
{
	return __builtin_expect(atomic_load_explicit(&tdax_views_taints, memory_order_relaxed) != 0, 0) &&
	       tdax_views_tainted_slow(id);
}

/* fork: the table's lock is taken before and let go after, on both sides. */
void tdax_views_before_fork(void);
void tdax_views_after_fork(void);

#endif
