/*
 * unregistered -- the mode of a managed descriptor whose file has no entry
 * in the device (mode.h). A file opened for writing is registered only when
 * it has something for tdax to remember: a sync stream (its second sync
 * within the writeback window, tracking.h), a write that must be durable
 * (RWF_DSYNC, RWF_SYNC, through a descriptor opened with O_DSYNC or
 * O_SYNC), or a path tdax cannot follow (a shared mapping,
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

/* Is e's descriptor in unregistered mode? */
static inline bool tdax_unregistered(const struct tdax_fd *e)
{
	return e->mode == TDAX_MODE_UNREGISTERED;
}

/*
 * The write hooks' shortcut past the mode table, for the commonest call of
 * all: a plain write to a file tdax has nothing to remember of. The hooks
 * make the real call themselves and hand its result r here, so such a write
 * costs the kernel's, one load and two compares (its way through the
 * table, an iovec and two calls more, made a 128 B append loop 0.95 of
 * itself without tdax; this, 0.98). The look is unregistered.c's: did the
 * file get an entry since the last one? Not for a descriptor opened with
 * O_SYNC or O_DSYNC: its write is a sync, and takes the mode's way (its
 * first one registers the file).
 *
 * Such a write holds nothing across the kernel's call, so the call stays a
 * cancellation point as it is without tdax, and the hook does not hold
 * cancellation off (state.h; that pair of calls was 1-2 % of a 128 B
 * pwrite loop's time in perf); the join, which may register, does. A
 * thread cancelled in the call skips the look, and the descriptor's next
 * call looks. For its caller the call did not happen (POSIX: as if
 * interrupted); glibc before 2.40 may act on a cancellation just after a
 * write went through, and then a lightweight sync of the file through
 * another descriptor, if the file was registered meanwhile,
 * does not cover those bytes until that next look.
 */
static inline bool tdax_unregistered_plain(const struct tdax_fd *e)
{
	return tdax_unregistered(e) && !(e->flags & (TDAX_FD_DSYNC | TDAX_FD_SYNC));
}

/* A registration anywhere since the last look, or this very descriptor
 * registered by another thread while the call was the kernel's (its gen
 * is the entry's then, which may equal the count by chance). */
static inline bool tdax_unregistered_moved(const struct tdax_fd *e)
{
	return __atomic_load_n(&e->file_plus1, __ATOMIC_ACQUIRE) != TDAX_FD_UNREGISTERED ||
	       (uint32_t)tdax_files_registrations(tdax_rt.dev) != __atomic_load_n(&e->gen, __ATOMIC_RELAXED);
}

#ifdef TDAX_TEST_BUILD
/* Test aid (core/testaid.h): while the file TDAX_TEST_UNREGISTERED_PAUSE_IF
 * names exists, a pwrite in unregistered mode waits before the kernel's
 * call -- the window in which another thread registers the file. */
void tdax_unregistered_test_pause(void);
#else
static inline void tdax_unregistered_test_pause(void)
{
}
#endif

/* Out of line: the descriptor joins the entry its file got (errno kept). */
void tdax_unregistered_join(int fd, const struct tdax_fd *e);

static inline ssize_t tdax_unregistered_wrote(int fd, const struct tdax_fd *e, ssize_t r)
{
	if (r > 0 && __builtin_expect(tdax_unregistered_moved(e), 0))
		tdax_unregistered_join(fd, e);
	return r;
}

#endif
