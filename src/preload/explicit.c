/*
 * explicit -- the explicit mappings of include/tdax.h (SPEC "Explicit DAX",
 * thesis section 7.2): tdax_map, tdax_persist and tdax_unmap, exported by
 * libtdax.so. The table of mappings is mapped.h's.
 *
 * A mapping is the file's own shared mapping (its page cache): every other
 * process stays coherent with it, as with any write. tdax_persist copies
 * the bytes it names into the device log (coherent.h: records, as a logged
 * write makes) and fences; the kernel writes the page cache back later and
 * a checkpoint releases the records, as for any logged write. So a persist
 * costs what a logged write costs without its system call.
 *
 * - At tdax_map the file is registered, made durable with its name if no
 *   sync of it succeeded yet (one real fsync and one of its directory: a
 *   power cut must leave it where recovery looks for its records), and the
 *   ranges under the mapping are pinned: logged now and kept so
 *   (tracking.h) while the process lives or until tdax_unmap.
 * - Stores the application does not persist are not logged: while a
 *   mapping of a file lives in this process every sync of that file here
 *   is real (mapped.h), and after tdax_unmap the next one is too.
 * - A persist the log cannot answer (the range not logged, the log full,
 *   the file gone to the kernel, tdax off) is msync of the range, and a
 *   checkpoint of the file if it has records (an older record must never
 *   be replayed over the bytes the msync made durable).
 *
 * A program that links libtdax.so and is not run under tdax (start.h) has
 * every persist through the kernel.
 */
#define _GNU_SOURCE
#include "core/sys.h"
#include "core/util.h"
#include "preload/checkpoint.h"
#include "preload/coherent.h"
#include "preload/interpose.h"
#include "preload/mapped.h"
#include "preload/promoted.h"
#include "preload/start.h"
#include "preload/tracking.h"
#include "preload/unregistered.h"
#include "preload/wake.h"
#include "preload/writeback.h"
#include "tdax.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * Make fd's file tdax's for mapping m: registered, durable with its name
 * unless a sync of it succeeded since it was registered (a power cut must
 * leave the file where recovery looks for its records: recovery applies
 * the records of a file synced, rt.synced), its ranges pinned. False if
 * tdax does not manage it: its persists are the kernel's.
 */
static bool take(int fd, struct tdax_mapping *m)
{
	if (!tdax_on_attached())
		return false;
	const struct tdax_fd *e = tdax_managed(fd);
	if (e && tdax_unregistered(e)) {
		tdax_manage_again(fd);
		e = tdax_fd_get(fd);
	}
	if (!e || tdax_unregistered(e))
		return false;
	m->idx = e->file_plus1 - 1;
	m->gen = e->gen;
	struct tdax_file *f = tdax_file_at(tdax_rt.dev, m->idx);
	if (f->gen != m->gen || atomic_load(&f->rt.unmanaged))
		return false;
	if (!atomic_load(&f->rt.synced) && (tdax_coherent_checkpoint_fd(fd, m->idx, m->gen, false) != 0 ||
					    tdax_sync_parent_dir(f->path) != 0))
		return false;
	tdax_tracking_pin(m->idx, m->gen, m->off, m->len);
	return true;
}

EXPORT void *tdax_map(int fd, off_t offset, size_t length, int flags)
{
	long page = sysconf(_SC_PAGESIZE);
	struct stat st;
	if ((flags & ~TDAX_MAP_PIN) || length == 0 || offset < 0 || offset % page) {
		errno = EINVAL;
		return NULL;
	}
	tdax_promoted_settle_fd(fd); /* bypass mode: the kernel's copy (and size) first */
	if (tdax_sys_fstat(fd, &st) != 0)
		return NULL;
	if (S_ISREG(st.st_mode) && ((uint64_t)offset > (uint64_t)st.st_size ||
				    length > (uint64_t)st.st_size - (uint64_t)offset)) {
		errno = EINVAL; /* beyond the end: a store there would be SIGBUS */
		return NULL;
	}
	void *p = tdax_sys_mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
	if (p == MAP_FAILED)
		return NULL;
	if ((flags & TDAX_MAP_PIN) && mlock(p, length) != 0) {
		int err = errno;
		tdax_sys_munmap(p, length);
		errno = err;
		return NULL;
	}
	tdax_mapped_lock();
	struct tdax_mapping *m = tdax_mapped_add((uintptr_t)p, length, (uint64_t)offset);
	if (!m) {
		tdax_mapped_unlock();
		tdax_sys_munmap(p, length);
		errno = EMFILE;
		return NULL;
	}
	bool logged = m->logged = take(fd, m);
	tdax_mapped_unlock();
	if (logged) {
		/* The write-back thread's passes keep the pins
		 * (tdax_mapped_pin_every): wanted now, records or not. */
		tdax_wake_want();
		tdax_writeback_ensure();
	}
	return p;
}

/* The kernel's persist: msync of the pages under the range, then a
 * checkpoint of the file if it has records (an older record of these bytes
 * must not be replayed over what the msync made durable). */
static int real_persist(const struct tdax_mapping *m, const void *addr, size_t length, uint64_t off)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t from = (uintptr_t)addr & ~(page - 1);
	int rc = msync((void *)from, (uintptr_t)addr + length - from, MS_SYNC);
	if (!m->logged || !tdax_on())
		return rc;
	tdax_count(TDAX_ST_PERSISTS_REAL, 1);
	struct tdax_file *f = tdax_file_at(tdax_rt.dev, m->idx);
	if (rc == 0 && f->gen == m->gen && atomic_load(&f->rt.first_log_ns))
		rc = tdax_checkpoint_file(m->idx);
	/* The next one from the log, if the range can be logged again. */
	tdax_tracking_pin(m->idx, m->gen, off, length);
	return rc;
}

EXPORT int tdax_persist(const void *addr, size_t length)
{
	const struct tdax_mapping *m = tdax_mapped_find(addr, length);
	if (!m) {
		errno = EINVAL;
		return -1;
	}
	if (length == 0)
		return 0;
	uint64_t off = m->off + ((uintptr_t)addr - atomic_load_explicit(&m->addr, memory_order_relaxed));
	if (m->logged && tdax_on()) {
		tdax_count(TDAX_ST_PERSISTS, 1); /* (before the append: see coherent.c, log_counted) */
		if (tdax_coherent_persist(m->idx, m->gen, off, addr, length))
			return 0;
		tdax_count(TDAX_ST_PERSISTS, (uint64_t)-1);
	}
	return real_persist(m, addr, length, off);
}

EXPORT int tdax_unmap(void *addr, size_t length)
{
	tdax_mapped_lock();
	struct tdax_mapping *m = tdax_mapped_exact(addr, length);
	if (!m) {
		tdax_mapped_unlock();
		errno = EINVAL;
		return -1;
	}
	struct tdax_mapping was = { .len = m->len, .off = m->off, .idx = m->idx, .gen = m->gen, .logged = m->logged };
	tdax_mapped_remove(m);
	if (was.logged && tdax_on()) {
		/* Stores it did not persist are in the page cache alone: the
		 * file's next sync must be real, mapping or not. */
		struct tdax_file *f = tdax_file_at(tdax_rt.dev, was.idx);
		if (f->gen == was.gen)
			atomic_fetch_add(&f->rt.uncovered, 1);
		tdax_tracking_unpin(was.idx, was.gen, was.off, was.len);
		tdax_mapped_pin(was.idx, was.gen); /* another mapping of it here keeps its pins */
	}
	tdax_mapped_unlock();
	return tdax_sys_munmap(addr, length);
}
