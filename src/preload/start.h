/*
 * start -- a process under tdax starts with nothing of the device: no
 * mapping, no libpmem2, no thread, no table. It attaches when it first has
 * something tdax must see -- a regular file opened for writing (now or
 * inherited across exec), a truncate, rename or unlink, which may concern
 * another process's records -- so that the shells, build tools and helpers
 * a service starts pay (almost) nothing for tdax.
 */
#ifndef TDAX_START_H
#define TDAX_START_H

#include <stdbool.h>

#include "preload/manage.h"
#include "preload/state.h"

/* Attach to the device if this process has not (once; every other thread
 * waits for the first). True if tdax is on now. */
bool tdax_attach(void);

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

/* The same, for a truncate or unlink of dirfd/path (follow: its last link
 * is followed). */
static inline bool tdax_on_for_path(int dirfd, const char *path, bool follow)
{
	return tdax_on() || (tdax_rt.waiting && !tdax_inside &&
			     tdax_manage_wants_path(dirfd, path, follow) && tdax_attach());
}

#endif
