/*
 * landing -- where a write at the file position lands, known without
 * asking the kernel.
 *
 * A write at the file position (write, writev: the position of the
 * descriptor's open file, or with O_APPEND the file's end) lands where the
 * kernel picks, and coherent mode must log it at that offset; the kernel
 * tells it only by the position afterwards, an lseek (a system call per
 * write: ~10 % of a 128 B append + lightweight sync on this machine).
 * While this process holds the file's write lease (lease.h) no other
 * process can change the file or share its open file, and every change
 * this process makes passes a hook: so once one write's end is known, the
 * next such write lands there -- unless something else moved the end or
 * the position meanwhile. Every other way of doing so says so before it
 * reaches the kernel:
 *
 *   - a write that does not keep the place known (one at an offset, a
 *     cold one, one through a twin, one of the other kind -- at the
 *     position where the place known is the end, or the reverse), a read
 *     or an lseek at the position, a copy out of the file at its position
 *     forget the file's place, inside the write's in-flight count if it
 *     is one (tdax_landing_forget: a load while nothing is known);
 *   - any other change of the size or the bytes (truncate, fallocate, a
 *     copy into the file, a clone, a demotion) moves the process's resize
 *     count for its duration (tdax_landing_resize_begin/_end);
 *   - a lease granted again after it was lost, and a fork (the child's
 *     parent may write on), move the lease grant count (lease.h);
 *   - a duplicate of the descriptor still in unregistered mode (its file
 *     registered through another one since) writes with no count to see,
 *     and a stdio stream on the open file reads inside the C library: no
 *     place becomes known while the one exists, nor (at the position) for
 *     the file's entry once the other was made;
 *   - the supervisor of --intercept syscall sees a program's writes of a
 *     descriptor it placed, not its reads, seeks and copies: no place is
 *     known there.
 *
 * A write under its file's position lock (coherent_ops.c) uses the known
 * place only if it was known before its write, the lease held and no
 * resize began from then until after it, and it moves the place on with a
 * compare-and-swap that a forget in between makes fail. Otherwise it reads
 * its end back with lseek, as before, and makes it known if nothing else
 * could have moved the place around its write: the lease held throughout,
 * no other write or resize in flight. (A read at the position by another
 * thread during a write at the same position is the application's race:
 * neither knows where the write lands.) The test build checks every known
 * place against the kernel's (a wrong one aborts the process).
 */
#ifndef TDAX_LANDING_H
#define TDAX_LANDING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/files.h"
#include "preload/fdtable.h"

/* The place known of each file entry of the region, in this process. */
struct tdax_landing {
	_Atomic uint64_t end_plus1; /* where the next write lands, + 1; 0: not known */
	/* Valid with end_plus1, written under the file's position lock: */
	uint64_t grants;            /* the lease grant count when it became known */
	uint64_t resizes;           /* the resize count then */
	uint32_t gen;               /* the entry's generation */
	/* Places found out in a row that no write used (forgotten first, as
	 * an lseek before every write does): past a few, only one attempt
	 * in 16 -- each looks through the process's descriptors. */
	uint32_t unused;
	bool at_end;                /* the file's end (O_APPEND), not the position */
	/* gen + 1 of the entry once a stdio stream was made on a descriptor
	 * of it: the position is never known again for that entry. */
	_Atomic uint32_t streamed;
};
extern struct tdax_landing *tdax_landings; /* max_files entries; NULL while tdax is off */

/* Allocate the table (at attach); false if it cannot be had. */
bool tdax_landing_init(uint32_t max_files);

#ifdef TDAX_TEST_BUILD
/* Positive control for the tests (TDAX_TEST_LANDING_BLIND=1): no change
 * makes a known place forgotten, and none is checked against the kernel's. */
extern bool tdax_landing_blind;
#endif

/* A change of file idx that does not keep its place known is about to
 * reach the kernel (a write's in-flight count taken). */
static inline void tdax_landing_forget(uint32_t idx)
{
#ifdef TDAX_TEST_BUILD
	if (tdax_landing_blind)
		return;
#endif
	/* Sequentially consistent, as the in-flight count taken before it
	 * and the pending mark's store and look (landing.c): one of the two
	 * sides sees the other. (A plain load on x86.) */
	_Atomic uint64_t *e = &tdax_landings[idx].end_plus1;
	if (atomic_load(e))
		atomic_exchange(e, 0);
}

/* A read, lseek or copy at fd's file position is about to reach the
 * kernel: the position of its open file moves. */
static inline void tdax_landing_moved(int fd)
{
	const struct tdax_fd *e = tdax_fd_get(fd);
	if (e && e->file_plus1 != TDAX_FD_UNREGISTERED && tdax_landings)
		tdax_landing_forget(e->file_plus1 - 1);
}

/* A stdio stream was made on fd: it reads and seeks inside the C library. */
void tdax_landing_streamed(int fd);

/* A call that may change some file's size or bytes other than by a write
 * is about to reach the kernel; _end once its effect is accounted for. */
void tdax_landing_resize_begin(void);
void tdax_landing_resize_end(void);

/* What a write at the position under the position lock saw before it. */
struct tdax_landing_look {
	uint64_t end_plus1; /* the place known then, 0 if none */
	uint64_t grants, resizes;
	uint64_t seen;      /* the file's size as tdax writers left it (rt.size_seen) */
	bool at_end;        /* an append (O_APPEND, RWF_APPEND) */
	bool quiet;         /* no other tdax write, cold write or resize on its way */
	bool covered;       /* every change since the last real sync logged (rt.uncovered 0) */
	bool held;          /* the lease held (looked at, lease.h) */
};
void tdax_landing_look(int fd, const struct tdax_fd *e, const struct tdax_file_rt *rt, bool at_end,
		       struct tdax_landing_look *l);

/* After the write of r > 0 bytes: its end, if the known place holds (then
 * known on as that end), or -1 (read it back). */
int64_t tdax_landing_next(const struct tdax_fd *e, const struct tdax_landing_look *l, size_t r);

/*
 * After a write of r bytes whose end was read back from the kernel: make
 * the end known if nothing but the write could have moved it since the
 * look (alone: no cold write started since, coherent.h). False if it was
 * an append to a covered file that landed elsewhere than where tdax's
 * writes had left the end while nothing of tdax's changed it: a writer
 * tdax does not see did. (The sync's guard compares the size alone, which
 * this append made agree; a file not covered has a real sync coming.)
 */
bool tdax_landing_learned(const struct tdax_fd *e, const struct tdax_file_rt *rt,
			  const struct tdax_landing_look *l, uint64_t end, size_t r, bool alone);

#endif
