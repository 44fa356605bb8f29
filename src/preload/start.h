/*
 * start -- a process under tdax starts with nothing of the device: no
 * mapping, no libpmem2, no thread, no table. It attaches when it first has
 * something tdax must see -- a regular file opened for writing, a
 * truncate, rename or unlink, which may concern
 * another process's records -- so that the shells, build tools and helpers
 * a service starts pay (almost) nothing for tdax. A regular file opened for
 * writing and inherited across exec makes it attach at its first write or
 * sync through that descriptor.
 */
#ifndef TDAX_START_H
#define TDAX_START_H

#include <stdbool.h>

#include "preload/fdtable.h"
#include "preload/manage.h"
#include "preload/state.h"

/* Attach to the device if this process has not (once; every other thread
 * waits for the first). True if tdax is on now. Never in a vfork child
 * (tdax_vfork_shares): false there. */
bool tdax_attach(void);

/* tdax_attach from the open that made descriptor fd: every other
 * descriptor is adopted, fd is left to its opener (tdax_manage with the
 * open's flags: an O_CREAT of a new file is a create record). */
bool tdax_attach_opening(int fd);

/*
 * May a vfork child share this process's memory? Only while the process
 * has nothing of tdax a child could change -- not attached, not attaching,
 * one thread (no other thread can attach while the child runs) -- and the
 * exec functions are looked up already (a vfork child must not). If so,
 * the child is recorded as one: it never attaches and leaves the inherited
 * descriptors' marks alone, so its calls are the kernel's until it execs.
 */
bool tdax_vfork_shares(void);

/* tdax's part of a fork (the pthread_atfork handlers): before it, in the
 * parent after it, in the child. */
void tdax_fork_prepare(void);
void tdax_fork_parent(void);
void tdax_fork_child(void);
/* After a fork that runs no pthread_atfork handler (_Fork, a raw one by
 * syscall(2) or clone(2) without CLONE_VM), tdax_fork_prepare made before
 * it: the child's or the parent's part (pid < 0: it failed; > 0: the
 * parent's leases are shared with the child now, lease.h). pid. */
pid_t tdax_fork_done(pid_t pid);

/* The application's threads (start.c): one is about to be made by
 * pthread_create (false: tdax does not count them in this process), it
 * runs (first, on the thread), it could not be made. */
bool tdax_app_thread_coming(void);
void tdax_app_thread_started(void);
void tdax_app_thread_not_made(void);

/* The process ends (atexit; a Go program's runtime.exit, interpose_go.c):
 * the last write-back, its records released, the trace flushed. */
void tdax_at_exit(void);

/* Is tdax on, attaching first if the process was waiting for a reason to?
 * For the hooks whose call may concern records: rename (a file's or a
 * directory's) attaches always; tdax_on_for_path below, only for a file
 * that tdax could manage. */
static inline bool tdax_on_attached(void);

/* On, or waiting for a reason to attach. */
static inline bool tdax_on_or_waiting(void)
{
	return tdax_on() || (tdax_rt.waiting && !tdax_inside);
}

static inline bool tdax_on_attached(void)
{
	return tdax_on() || (tdax_rt.waiting && !tdax_inside && tdax_attach());
}

/* A descriptor inherited across exec that tdax would manage: the process
 * attaches at its first write or sync through it (a program started with
 * stdout on a file need not attach if it never writes). */
bool tdax_inherited(int fd);
/* fd is closed: no longer an inherited one. */
void tdax_inherited_closed(int fd);

/* fd's entry if tdax manages it, attaching first if fd is inherited. */
static inline const struct tdax_fd *tdax_managed(int fd)
{
	if (tdax_on())
		return tdax_fd_get(fd);
	if (__builtin_expect(tdax_rt.inherited, 0) && !tdax_inside && tdax_inherited(fd) && tdax_attach())
		return tdax_fd_get(fd);
	return NULL;
}

/* The same, for a truncate or unlink of dirfd/path (follow: its last link
 * is followed). */
static inline bool tdax_on_for_path(int dirfd, const char *path, bool follow)
{
	return tdax_on() || (tdax_rt.waiting && !tdax_inside &&
			     tdax_manage_wants_path(dirfd, path, follow) && tdax_attach());
}

#endif
