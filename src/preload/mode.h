/*
 * mode -- which data path serves a managed descriptor's file: one value per
 * file (enum tdax_mode, kept in the descriptor's fdtable entry) and one table
 * of entry points per mode (struct tdax_mode_ops). The hooks decode a call,
 * look the descriptor up and hand the call to its mode; they know no mode.
 * A descriptor tdax does not manage has no entry: its calls are the real
 * ones, untouched (the passthrough path of the hooks).
 *
 * Adding a mode adds a file with its table, a value here, its place in
 * tdax_modes (interpose.c) and the choice (manage.c); no other hook changes.
 * (One hook knows a mode by name, for cost: the write hooks make a plain
 * write of an unregistered file themselves, unregistered.h.) A mode need
 * not have kernel_before/kernel_after.
 */
#ifndef TDAX_MODE_H
#define TDAX_MODE_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "preload/fdtable.h"
#include "preload/state.h"

enum tdax_mode {
	TDAX_MODE_COHERENT = 0, /* the page cache holds the file; upgraded ranges are logged (coherent.h) */
	TDAX_MODE_UNREGISTERED, /* the file has no entry yet: the kernel's, watched (unregistered.h) */
	TDAX_MODE_BYPASS,       /* coherent until promoted, then the device's alone (bypass.h) */
	TDAX_MODES
};

/* A mode's entry per operation on a managed descriptor fd with entry e.
 * Each returns what the application's call returns, errno included. */
struct tdax_mode_ops {
	const char *name;
	/* write, writev, pwrite, pwritev, pwritev2: iov (n > 0 entries) at
	 * off, or at the file position when off is -1; rwf: pwritev2's flags. */
	ssize_t (*write)(int fd, const struct tdax_fd *e, const struct iovec *iov, int n, off_t off,
			 int rwf);
	/*
	 * A write the kernel alone makes (write, writev, pwrite, pwritev with
	 * no flags), made by the hook itself between these two: what a write
	 * costs beyond the kernel's is mostly the call frames its system call
	 * returns through (their returns are mispredicted after the kernel's
	 * deep path), so the commonest write returns through none of the
	 * mode's. kernel_before says whether the write at off (-1: the file
	 * position) of len bytes is one, and prepares it (*at: what
	 * kernel_after needs); kernel_after takes the real call's result r
	 * and returns the call's (errno kept). Otherwise the hook calls write.
	 */
	bool (*kernel_before)(int fd, const struct tdax_fd *e, off_t off, size_t len, uint64_t *at);
	ssize_t (*kernel_after)(int fd, const struct tdax_fd *e, off_t off, uint64_t at, ssize_t r);
	int (*sync)(int fd, const struct tdax_fd *e, bool datasync);
	int (*ftruncate)(int fd, const struct tdax_fd *e, off_t len);
	int (*fallocate)(int fd, const struct tdax_fd *e, int mode, off_t off, off_t len);
	/* The kernel changed the file behind the mode's back (posix_fallocate,
	 * copy_file_range, sendfile, splice into it): after the real call. */
	void (*changed)(int fd, const struct tdax_fd *e, enum tdax_fallback why);
	/* A path the mode cannot follow reaches the file for good (a shared
	 * mapping): before the real call. */
	void (*lost_sight)(int fd, const struct tdax_fd *e, enum tdax_fallback why);
	/* The file's attributes changed (mode, owner, times, extended
	 * attributes), which an fsync makes durable: after the real call. */
	void (*attrs_changed)(int fd, const struct tdax_fd *e);
};

/* Indexed by enum tdax_mode (interpose.c: the hooks' table). */
extern const struct tdax_mode_ops *const tdax_modes[TDAX_MODES];

static inline const struct tdax_mode_ops *tdax_mode_of(const struct tdax_fd *e)
{
	return tdax_modes[e->mode];
}

/* ---- the real calls a mode's entries end in ------------------------ */

/* The real write of a mode's call: at off, or at the file position when
 * off is -1; with pwritev2's flags when there are some. */
static inline ssize_t tdax_mode_real_write(int fd, const struct iovec *iov, int n, off_t off, int rwf)
{
	if (rwf)
		return TDAX_REAL(pwritev2)(fd, iov, n, off, rwf);
	if (off == -1) /* (another negative offset: the kernel's EINVAL below) */
		return n == 1 ? TDAX_REAL(write)(fd, iov[0].iov_base, iov[0].iov_len)
			      : TDAX_REAL(writev)(fd, iov, n);
	return n == 1 ? TDAX_REAL(pwrite)(fd, iov[0].iov_base, iov[0].iov_len, off)
		      : TDAX_REAL(pwritev)(fd, iov, n, off);
}

/* The real fdatasync (datasync) or fsync. */
static inline int tdax_mode_real_sync(int fd, bool datasync)
{
	return datasync ? TDAX_REAL(fdatasync)(fd) : TDAX_REAL(fsync)(fd);
}

static inline int tdax_mode_real_ftruncate(int fd, off_t len)
{
	return TDAX_REAL(ftruncate)(fd, len);
}

static inline int tdax_mode_real_fallocate(int fd, int mode, off_t off, off_t len)
{
	return TDAX_REAL(fallocate)(fd, mode, off, len);
}

#endif
