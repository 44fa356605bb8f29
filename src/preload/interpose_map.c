/*
 * interpose_map -- the hooks of memory mappings of files: mmap, and the
 * calls that change what a mapping can do or where it lies (mprotect,
 * pkey_mprotect, mremap, munmap). A shared writable mapping of a managed
 * file is a path tdax cannot follow (mode.h: lost_sight); one that cannot
 * write is a view (views.h), followed until it could.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <sys/mman.h>

#include "core/sys.h"
#include "preload/checkpoint.h"
#include "preload/coherent.h"
#include "preload/fdtable.h"
#include "preload/interpose.h"
#include "preload/mode.h"
#include "preload/promoted.h"
#include "preload/start.h"
#include "preload/state.h"
#include "preload/views.h"

/* A managed descriptor of the view's file in this process: the one it
 * was made from if it still names that file, else another; -1 if none. */
static int descriptor_of(const struct tdax_view *v)
{
	uint64_t size;
	const struct tdax_fd *e = tdax_managed(v->fd);
	if (e && e->dev == v->dev && e->ino == v->ino && tdax_fd_still(v->fd, e, &size))
		return v->fd;
	int fd = tdax_fd_naming(v->dev, v->ino, 0);
	while (fd >= 0 && !tdax_fd_still(fd, &tdax_fds[fd], &size))
		fd = tdax_fd_naming(v->dev, v->ino, fd + 1);
	return fd;
}

/* The taken views' files go to the kernel, as a writable shared mapping's
 * does at mmap: through a descriptor of the file the process has, else by
 * its entry (checkpointed through a descriptor tdax opens and closes: the
 * process has no writable one of the file; a read-only one, which tdax
 * does not manage, would lose its POSIX locks), else the file is tainted
 * (views.h). */
static void lose_sight(const struct tdax_views_taken *t)
{
	for (int i = 0; i < t->n; i++) {
		const struct tdax_view *v = &t->v[i];
		int fd = descriptor_of(v);
		const struct tdax_fd *e = fd >= 0 ? tdax_managed(fd) : NULL;
		uint32_t idx, gen;
		if (e)
			tdax_mode_of(e)->lost_sight(fd, e, TDAX_FB_MMAP);
		else if (tdax_on() && tdax_files_find(tdax_rt.dev, &v->id, &idx, &gen) == 0) {
			tdax_coherent_kernel_only(idx, TDAX_FB_MMAP);
			tdax_checkpoint_file(idx);
		}
		if (!e)
			tdax_views_taint(&v->id);
	}
}
/* [addr, addr + len) may become writable. */
static void may_write(void *addr, size_t len)
{
	struct tdax_views_taken t;
	tdax_views_take((uintptr_t)addr, len, &t);
	if (t.n)
		lose_sight(&t);
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	tdax_promoted_settle_fd(fd); /* any mapping reads the kernel's copy */
	const struct tdax_fd *e = tdax_managed(fd);
	bool shared = (flags & MAP_TYPE) != MAP_PRIVATE;
	if (e && shared && (prot & PROT_WRITE)) {
		tdax_mode_of(e)->lost_sight(fd, e, TDAX_FB_MMAP);
		e = NULL;
	}
	void *p = TDAX_REAL(mmap)(addr, len, prot, flags, fd, off);
	if (p == MAP_FAILED)
		return p;
	if (flags & MAP_FIXED)
		tdax_views_unmapped((uintptr_t)p, len); /* what was there is gone */
	/* The mapping cannot write now; a shared one could later, from the
	 * first mprotect on (views.h). No room to follow it: taken as
	 * writable now (before any store can be made through it). */
	struct tdax_ident id;
	if (e && (tdax_ident_of_fd(fd, &id) != 0 ||
		  !tdax_views_add(fd, e->dev, e->ino, &id, (uintptr_t)p, len, shared)) &&
	    shared && (e = tdax_managed(fd)))
		tdax_mode_of(e)->lost_sight(fd, e, TDAX_FB_MMAP);
	return p;
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}

EXPORT int mprotect(void *addr, size_t len, int prot)
{
	if (prot & PROT_WRITE)
		may_write(addr, len);
	return (int)tdax_syscall(SYS_mprotect, addr, len, prot);
}

EXPORT int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	if (prot & PROT_WRITE)
		may_write(addr, len);
	return (int)tdax_syscall(SYS_pkey_mprotect, addr, len, prot, pkey);
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	struct tdax_views_taken t;
	tdax_views_take_moved((uintptr_t)old, old_len, flags, &t);
	if (t.n)
		lose_sight(&t);
	return tdax_views_mremap(old, old_len, new_len, flags, new_addr);
}

EXPORT int munmap(void *addr, size_t len)
{
	return tdax_views_munmap(addr, len);
}
