/*
 * manage -- which of the process's descriptors tdax manages: a regular
 * file opened for writing, on a file system where a sync costs something,
 * that the device's file table can register. Its entry in the fdtable then
 * says which file it is; the file's mode (mode.h) says how its writes
 * and syncs are served. A file that has no entry yet is registered when
 * it first needs one (a sync stream begins): until then its descriptors are in
 * unregistered mode (unregistered.h), the kernel's with one look per write.
 */
#ifndef TDAX_MANAGE_H
#define TDAX_MANAGE_H

#include <stdbool.h>

#include "preload/fdtable.h"
#include "preload/state.h"

/* Does fd (open with these flags) qualify? No device needed: it is what
 * makes a process attach (start.h). */
bool tdax_manage_wants(int fd, int flags);

/* Does dirfd/path (its last link followed if follow) name a file that
 * would qualify if opened for writing? */
bool tdax_manage_wants_path(int dirfd, const char *path, bool follow);

/* fd was just opened (or inherited across exec) with these open flags:
 * manage it if it qualifies. Forgets whatever entry the number had before,
 * managed or not. path_or_null names it in warnings. True if the file's
 * creation is a record now (tdax_coherent_created). */
bool tdax_manage(int fd, const char *path_or_null, int flags);

/* Is e's file entry still the one it was made for? (Not when the entry
 * was let go: tdax_files_let_go.) One load of the entry. A descriptor of
 * a file with no entry (unregistered.h) looks for itself. */
static inline bool tdax_manage_current(const struct tdax_fd *e)
{
	/* 0: the descriptor was closed meanwhile (by another thread): nothing to redo. */
	uint32_t plus1 = __atomic_load_n(&e->file_plus1, __ATOMIC_RELAXED);
	return !plus1 || plus1 == TDAX_FD_UNREGISTERED ||
	       tdax_file_at(tdax_rt.dev, plus1 - 1)->gen == e->gen;
}

/* fd's entry is not current, or fd's file has none yet (unregistered.h):
 * register its file (again), in place, or give fd to the kernel; the
 * next sync is real. True if this made the file's entry (no other
 * descriptor anywhere had one). */
bool tdax_manage_again(int fd);

/* to is now a duplicate of from (dup, dup2, F_DUPFD): it shares from's
 * entry. A number beyond the table makes the file kernel-only (writes
 * through it would go unseen). */
void tdax_manage_dup(int from, int to);

/* A stdio stream is open on fd: it writes through glibc's internal calls,
 * which tdax does not see, so a registered file goes to the kernel for good. */
void tdax_manage_stdio(int fd);

#endif
