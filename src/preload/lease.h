/*
 * lease -- tdax's write lease on the open file behind a managed
 * descriptor, so that a lightweight sync needs no look at the file.
 *
 * The sync path's guard (coherent.c) asks the kernel for the file's size
 * and identity at every lightweight sync (a statx, ~0.5 us): a size tdax
 * writers did not leave means a writer tdax did not see. A write lease
 * (fcntl F_SETLEASE, F_WRLCK) is granted only while no other open of the
 * file exists, and the kernel holds any new open -- by any process, with
 * or without tdax -- until the holder lets the lease go. So while tdax
 * holds one, every writer of the file is this process: the guard has
 * nothing to find, and the sync answers after one load.
 *
 * - Taken after the TDAX_LEASE_AFTER_SYNCS-th lightweight sync that
 *   needed the guard, by a descriptor this process opened itself (never
 *   one inherited, received or dup'ed:
 *   another process may hold the same open file, which no lease would
 *   show), and not while a child of fork that shares its open file lives
 *   (leases go at fork: were this process to die first, a lease left with
 *   the child's open file would have nobody to answer a break).
 * - Broken: the kernel signals the write-back thread (F_SETOWN_EX to its
 *   thread id, F_SETSIG), whose handler marks the descriptor first and
 *   lets the lease go after (through pidfd_getfd: the thread has a
 *   descriptor table of its own). The application's threads never see the
 *   signal. The waiting open goes on at once.
 * - Trusted for TDAX_LEASE_TRUST_MS after each look (fcntl F_GETLEASE),
 *   so that a lost signal cannot make it lie: the kernel itself takes a
 *   lease whose holder did not answer away only after lease-break-time
 *   (at least a second), and until then the other open waits.
 * - Handed on (an exec or spawn that inherits the descriptor, a descriptor
 *   sent over a socket, a fork by a child that inherited it): the file's
 *   entry says so (rt.handed_on) for every process, and no lease of it is
 *   trusted again while the entry lives.
 */
#ifndef TDAX_LEASE_H
#define TDAX_LEASE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/files.h"
#include "preload/fdtable.h"

/* How long a look that found the lease held is trusted (coarse clock). */
#define TDAX_LEASE_TRUST_MS 10u

/* The process's lease epoch, noted in each descriptor it opens
 * (tdax_fd.opened_in). Starts at 1; moves at every fork (parent and child)
 * and hand-over: lease.c keeps which epochs may be leased. */
extern _Atomic uint32_t tdax_lease_epoch;

/* Moves before every lease this process is granted is marked held, and at
 * every fork: a lease held at two looks with the same count was held all
 * the time between (landing.h). */
extern _Atomic uint64_t tdax_lease_grants;

/* Is fd the only open of its file now? One load while no lease is held. */
bool tdax_lease_check(int fd, const struct tdax_file_rt *rt);
static inline bool tdax_lease_sole(int fd, const struct tdax_fd *e, const struct tdax_file_rt *rt)
{
	return atomic_load_explicit(&e->lease, memory_order_acquire) == TDAX_LEASE_HELD &&
	       tdax_lease_check(fd, rt);
}

/* A lease costs four fcntl calls and spares a statx at each sync after
 * it: a descriptor takes one at its TDAX_LEASE_AFTER_SYNCS-th sync through
 * the guard, so that a file synced once or twice and closed -- SQLite's
 * rollback journal, one a transaction -- goes without. */
#define TDAX_LEASE_AFTER_SYNCS 3u

/* After a lightweight sync through the guard: take a lease on fd if it
 * may have one (now and then, not at every sync). */
void tdax_lease_try(int fd, const struct tdax_file_rt *rt);

/* The number fd (first..last) is about to be closed or reused: let its
 * lease go (while a dup or a child keeps the open file, the lease would
 * stay with it). */
void tdax_lease_drop(int fd);
void tdax_lease_drop_range(unsigned first, unsigned last);

/* A descriptor of the open file this process holds a lease on for file
 * entry idx (generation gen), in the write-back thread's own table (a new
 * open would break the lease); -1 if none. The caller checks that it is
 * the file still, and closes it. */
int tdax_lease_borrow(uint32_t idx, uint32_t gen);

/* Breaks of leases on promoted files wait for the write-back thread
 * (bypass.h): the next one's descriptor (-1: none); finish lets the lease
 * go -- false if fd had no break waiting. */
int tdax_lease_next_break(void);
bool tdax_lease_finish_break(int fd);

/* The application's descriptor fd as a number of the calling thread's
 * table (the write-back thread's is its own: a copy, which the caller
 * closes when it differs from fd); -1 if it cannot be had. */
int tdax_lease_reach(int fd);

/* The write-back thread, as it starts: the handler, its signal, pidfd. */
void tdax_lease_thread_start(void);

/* Before fork, in the parent: every lease goes (the child will share the
 * open files: no lease on them while it lives, see tdax_lease_forked), and
 * descriptors without a file entry yet cannot be leased later (the child
 * may hand them on, and no entry would say). */
void tdax_lease_before_fork(void);
/* After fork, in the parent: the child's pid. */
void tdax_lease_forked(pid_t child);
/* In the child of a fork: the parent's leases are the parent's, and what
 * it inherited is never its to lease. */
void tdax_lease_after_fork(void);

/* The process's descriptors are handed to another program: every one that
 * is (all, or those without close-on-exec) is marked in its entry, every
 * lease goes, and the epoch moves. */
void tdax_lease_hand_on(bool all);

/* fd is sent to another process (SCM_RIGHTS). */
void tdax_lease_sent(int fd);

/* Every lease goes (exit); with `never`, none is taken again. */
void tdax_lease_release_all(bool never);

/* The application sets a lease, a signal or an owner on fd itself: tdax's
 * lease of it goes, and it takes none again. */
void tdax_lease_app_uses(int fd);

/* The application sets the disposition of signal sig: if it is tdax's,
 * leases stop in this process first. */
void tdax_lease_signal_claimed(int sig);

#endif
