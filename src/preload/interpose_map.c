/*
 * interpose_map -- the hooks of memory mappings of files: mmap, and the
 * calls that change what a mapping can do or where it lies (mprotect,
 * pkey_mprotect, mremap, munmap). A shared writable mapping of a managed
 * file is a path tdax cannot follow (mode.h: lost_sight); one that cannot
 * write is a view (views.h), followed until it could.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <sys/mman.h>

#include "core/sys.h"
#include "preload/fdtable.h"
#include "preload/interpose.h"
#include "preload/manage.h"
#include "preload/mode.h"
#include "preload/promoted.h"
#include "preload/start.h"
#include "preload/state.h"
#include "preload/views.h"

/* The taken views' files go to the kernel, as a writable shared mapping's
 * does at mmap: each through the view's duplicate of its descriptor,
 * managed for it and then forgotten. */
static void lose_sight(const struct tdax_views_taken *t)
{
	for (int i = 0; i < t->n; i++) {
		int fd = tdax_views_fd(t->slot[i]);
		int flags = (int)tdax_syscall(SYS_fcntl, fd, F_GETFL);
		if (flags < 0)
			continue;
		tdax_manage(fd, NULL, flags);
		const struct tdax_fd *e = tdax_managed(fd);
		if (e)
			tdax_mode_of(e)->lost_sight(fd, e, TDAX_FB_MMAP);
		tdax_fd_forget(fd);
	}
	tdax_views_let_go(t);
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
	if (e && !tdax_views_add(fd, e->dev, e->ino, (uintptr_t)p, len, shared) && shared &&
	    (e = tdax_managed(fd)))
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
