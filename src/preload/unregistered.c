/*
 * unregistered -- unregistered mode (unregistered.h): the kernel's calls,
 * and a look after each change at whether the file got an entry meanwhile.
 *
 * Why a look is enough. Another process may register the file and answer
 * its syncs from the log; then a write made here must make its next sync a
 * real one. Every registration makes the entry uncovered (its first sync is
 * real) before it bumps the device's count of registrations (files.h). So
 * after its real call, this mode reads the count: if it has not moved since
 * the last look, no entry was made since, and a sync made after this call
 * returns is either real (the entry is yet to come) or comes after a real
 * one. If it moved and the index says the file may have an entry, the
 * descriptor joins it (manage.h) before the call returns, which makes the
 * file uncovered. A truncate or allocation looks first: a record beyond the
 * new size must be checkpointed before the kernel cuts the file.
 */
#define _GNU_SOURCE
#include "preload/unregistered.h"
#include "core/files.h"
#include "core/testaid.h"
#include "preload/coherent.h"
#include "preload/dirsync.h"
#include "preload/manage.h"
#include "preload/tracking.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* The file's entry, registered now in place (the descriptor joins the
 * entry another process made, or makes one), or NULL: it could not be
 * registered and the descriptor is the kernel's. A registered file is in
 * coherent mode (the only one yet): the calls below go on there. */
static const struct tdax_fd *register_now(int fd)
{
	tdax_manage_again(fd);
	const struct tdax_fd *e = tdax_fd_get(fd);
	return e && e->mode != TDAX_MODE_UNREGISTERED ? e : NULL;
}

/* Did the file get an entry since the last look? Then the descriptor
 * joins it: its entry, in another mode, is returned; else NULL. errno is
 * left as the call before the look set it. */
static const struct tdax_fd *joined(int fd, const struct tdax_fd *e)
{
	struct tdax_device *dev = tdax_rt.dev;
	uint32_t plus1 = __atomic_load_n(&e->file_plus1, __ATOMIC_ACQUIRE);
	if (plus1 != TDAX_FD_UNREGISTERED) {
		/* Another thread registered the descriptor's file while this
		 * call was the kernel's, after its look (a sync of the entry
		 * may have been answered since without it): in no record, so
		 * the next sync is real. */
		int err = errno;
		if (plus1)
			tdax_coherent_changed(fd, e, TDAX_FB_METADATA);
		errno = err;
		return plus1 && e->mode != TDAX_MODE_UNREGISTERED ? e : NULL;
	}
	/* The count is read once: the one compared is the one kept. */
	uint32_t now = (uint32_t)tdax_files_registrations(dev);
	if (__builtin_expect(now == __atomic_load_n(&e->gen, __ATOMIC_RELAXED), 1))
		return NULL;
	if (!tdax_files_may_have(dev, e->ino)) {
		__atomic_store_n(&tdax_fds[fd].gen, now, __ATOMIC_RELAXED);
		return NULL;
	}
	int err = errno;
	const struct tdax_fd *r = register_now(fd);
	errno = err;
	return r;
}

/* The write hooks' look, after a kernel's call they made with cancellation
 * on (unregistered.h): registering takes locks (state.h). */
void tdax_unregistered_join(int fd, const struct tdax_fd *e)
{
	TDAX_NO_CANCEL;
	joined(fd, e);
}

#ifdef TDAX_TEST_BUILD
void tdax_unregistered_test_pause(void)
{
	TDAX_TEST_HOLD_WHILE("UNREGISTERED_PAUSE_IF");
}
#endif

/* After the kernel's call: the same look as after a write; rc is the call's. */
static int looked_after(int fd, const struct tdax_fd *e, int rc)
{
	joined(fd, e);
	return rc;
}

/* Policy always: every file's first sync registers it, and the first sync
 * of a small file this descriptor's open made is answered from the log --
 * its creation and what it holds become records (coherent.h). */
static const struct tdax_fd *register_always(int fd, const struct tdax_fd *e)
{
	bool made = e->flags & TDAX_FD_MADE;
	bool created = tdax_manage_again(fd);
	const struct tdax_fd *r = tdax_fd_get(fd);
	if (!r || r->mode == TDAX_MODE_UNREGISTERED)
		return NULL;
	uint32_t idx = r->file_plus1 - 1;
	char path[TDAX_FILE_PATH_MAX];
	if (made && created && tdax_coherent_cover_made(fd, idx, r->gen)) {
		memcpy(path, tdax_file_at(tdax_rt.dev, idx)->path, sizeof(path)); /* (a rename may rewrite it) */
		path[sizeof(path) - 1] = '\0';
		tdax_dirsync_made_logged(r->dev, r->ino, path);
	}
	return r;
}

/* A write durable when it returns (RWF_DSYNC, RWF_SYNC, or through a
 * descriptor opened with O_DSYNC or O_SYNC) is a sync's business: it
 * registers the file, and coherent mode makes it (through the twin the
 * registration gave the descriptor, manage.c). Not registered: the
 * kernel's write, synced by the kernel. */
static ssize_t write_(int fd, const struct tdax_fd *e, const struct iovec *iov, int n, off_t off,
		      int rwf)
{
	if ((rwf & (RWF_DSYNC | RWF_SYNC)) || (e->flags & (TDAX_FD_DSYNC | TDAX_FD_SYNC))) {
		const struct tdax_fd *r = tdax_rt.policy == TDAX_POLICY_ALWAYS ? register_always(fd, e)
					  : register_now(fd);
		if (r)
			return tdax_coherent_write(fd, r, iov, n, off, rwf);
	}
	return tdax_unregistered_wrote(fd, e, tdax_mode_real_write(fd, iov, n, off, rwf));
}

/* A sync that begins a stream (tracking.h) registers the file: the policy
 * can learn from it. A lone one -- a file synced once, when it is made or
 * before it is closed -- is the kernel's and leaves no entry. */
static int sync_(int fd, const struct tdax_fd *e, bool datasync)
{
	uint64_t now = tdax_coarse_ns();
	uint64_t prev = atomic_exchange_explicit(&tdax_fds[fd].synced_ns, now, memory_order_relaxed);
	const struct tdax_fd *r = tdax_rt.policy == TDAX_POLICY_ALWAYS ? register_always(fd, e)
				  : tdax_tracking_stream(prev, now) ? register_now(fd)
				  : joined(fd, e);
	if (r) {
		/* The stream that registered it goes on in its entry: this sync
		 * is its second (the policy counts its writebacks). */
		uint64_t none = 0;
		if (prev)
			atomic_compare_exchange_strong(&tdax_rt_of(r->file_plus1 - 1)->last_sync_ns, &none, prev);
		return tdax_coherent_sync(fd, r, datasync);
	}
	tdax_count_sync(false);
	return tdax_mode_real_sync(fd, datasync);
}

static int ftruncate_(int fd, const struct tdax_fd *e, off_t len)
{
	const struct tdax_fd *r = joined(fd, e);
	if (r)
		return tdax_coherent_ftruncate(fd, r, len);
	return looked_after(fd, e, tdax_mode_real_ftruncate(fd, len));
}

static int fallocate_(int fd, const struct tdax_fd *e, int mode, off_t off, off_t len)
{
	const struct tdax_fd *r = joined(fd, e);
	if (r)
		return tdax_coherent_fallocate(fd, r, mode, off, len);
	return looked_after(fd, e, tdax_mode_real_fallocate(fd, mode, off, len));
}

static void changed(int fd, const struct tdax_fd *e, enum tdax_fallback why)
{
	const struct tdax_fd *r = joined(fd, e);
	if (r)
		tdax_coherent_changed(fd, r, why);
}

/* Only an entry's lightweight fsync could forget them: one another process
 * made meanwhile is joined and told. */
static void attrs_changed(int fd, const struct tdax_fd *e)
{
	const struct tdax_fd *r = joined(fd, e);
	if (r)
		tdax_coherent_attrs_changed(r->file_plus1 - 1);
}

/* From now on the kernel alone sees what reaches the file: it needs an
 * entry that says so to every process, for as long as the path is open. */
static void lost_sight(int fd, const struct tdax_fd *e, enum tdax_fallback why)
{
	(void)e;
	const struct tdax_fd *r = register_now(fd);
	if (r)
		tdax_coherent_unmanage(fd, r->file_plus1 - 1, r->gen, why);
}

const struct tdax_mode_ops tdax_unregistered_mode = {
	.name = "unregistered",
	.write = write_,
	.sync = sync_,
	.ftruncate = ftruncate_,
	.fallocate = fallocate_,
	.changed = changed,
	.lost_sight = lost_sight,
	.attrs_changed = attrs_changed,
};
