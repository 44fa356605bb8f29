/*
 * watch -- the device region changing under a running application (watch.h).
 */
#define _GNU_SOURCE
#include "preload/watch.h"
#include "core/sys.h"
#include "preload/state.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Give the region up: the flag first (new calls pass through, a sync in
 * flight checks it before answering), then make every acknowledged write
 * durable the only way left. */
static void give_up(const char *what)
{
	if (atomic_exchange(&tdax_rt.lost, 1) == 1)
		return; /* given up already (2: the SIGBUS handler only set the flag) */
	tdax_syscall(SYS_sync); /* (the kernel's own: tdax calls none of its hooks) */
	tdax_warn("%s: the device region was %s while in use; every sync now goes to the kernel "
		  "(what was synced before is written back). Restart the application to use a region "
		  "again", tdax_rt.dev->path, what);
}

bool tdax_watch_sigbus(const void *addr)
{
	const struct tdax_device *dev = tdax_rt.dev;
	uintptr_t a = (uintptr_t)addr;
	if (!dev || a < (uintptr_t)dev->base || a >= (uintptr_t)dev->base + dev->size)
		return false;
	/* The region was truncated: put zero pages where it was, so the
	 * access in flight completes, and let the flag stop the rest. */
	int e = errno;
	tdax_sys_mmap(dev->base, dev->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	atomic_store(&tdax_rt.lost, 2);
	errno = e;
	return true;
}

bool tdax_watch_check(void)
{
	const struct tdax_device *dev = tdax_rt.dev;
	int lost = atomic_load(&tdax_rt.lost);
	if (lost == 1)
		return false;
	if (lost == 2) { /* the SIGBUS handler saw it: finish giving up here */
		give_up("truncated");
		return false;
	}
	struct stat st;
	if (tdax_sys_stat(dev->path, &st) != 0) {
		if (errno == ENOENT)
			give_up("removed");
		return errno != ENOENT;
	}
	if ((uint64_t)st.st_dev != dev->file_dev || (uint64_t)st.st_ino != dev->file_ino)
		give_up("replaced");
	else if (S_ISREG(st.st_mode) && (uint64_t)st.st_size < dev->size)
		give_up("truncated");
	else
		return true;
	return false;
}
