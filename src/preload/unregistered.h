/*
 * unregistered -- the mode of a managed descriptor whose file has no entry
 * in the device (mode.h). A file opened for writing is registered only when
 * it has something for tdax to remember: a sync stream (its second sync
 * within the writeback window, tracking.h), a write that must be durable
 * (RWF_DSYNC, RWF_SYNC), or a path tdax cannot follow (a shared mapping,
 * asynchronous I/O, a stdio stream). Until then its descriptors are in
 * unregistered mode: their writes, truncates and allocations are the
 * kernel's alone, and a file that is never synced costs one load per write.
 * Registering is manage.h's; a registered file goes on in coherent mode.
 */
#ifndef TDAX_UNREGISTERED_H
#define TDAX_UNREGISTERED_H

#include "core/files.h"
#include "preload/mode.h"

/* Its table of entry points (mode.h). */
extern const struct tdax_mode_ops tdax_unregistered_mode;

/*
 * The write hooks' shortcut past the mode table, for the commonest call of
 * all: a plain write to a file tdax has nothing to remember of. The hooks
 * make the real call themselves and hand its result r here, so such a write
 * costs the kernel's, one load and one compare (its way through the table,
 * an iovec and two calls more, made a 128 B append loop 0.95 of itself
 * without tdax; this, 0.98). The look is unregistered.c's: did the file get
 * an entry since the last one?
 */
static inline bool tdax_unregistered(const struct tdax_fd *e)
{
	return e->mode == TDAX_MODE_UNREGISTERED;
}

static inline bool tdax_unregistered_moved(const struct tdax_fd *e)
{
	return (uint32_t)tdax_files_registrations(tdax_rt.dev) !=
	       __atomic_load_n(&e->gen, __ATOMIC_RELAXED);
}

/* Out of line: the descriptor joins the entry its file got (errno kept). */
void tdax_unregistered_join(int fd, const struct tdax_fd *e);

static inline ssize_t tdax_unregistered_wrote(int fd, const struct tdax_fd *e, ssize_t r)
{
	if (r > 0 && __builtin_expect(tdax_unregistered_moved(e), 0))
		tdax_unregistered_join(fd, e);
	return r;
}

#endif
