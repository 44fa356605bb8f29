/*
 * manage -- which descriptors tdax manages (manage.h): the choice when a
 * descriptor is made (open, exec, dup), the file's registration -- at once,
 * or when the file first needs an entry (unregistered.h) -- and the
 * file's mode (mode.h; the table of modes is the hooks', interpose.c).
 */
#define _GNU_SOURCE
#include "preload/manage.h"
#include "preload/views.h"
#include "core/sys.h"
#include "core/testaid.h"
#include "core/trace.h"
#include "preload/coherent.h"
#include "preload/fdtable.h"
#include "preload/lease.h"
#include "preload/mode.h"
#include "preload/rules.h"
#include "preload/state.h"
#include "preload/tracking.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/statfs.h>
#include <unistd.h>

/* A registered file's mode: bypass mode's entries (coherent until the
 * file is promoted, bypass.h) when the process runs in it. */
static enum tdax_mode choose_mode(void)
{
	return tdax_rt.bypass ? TDAX_MODE_BYPASS : TDAX_MODE_COHERENT;
}

static bool registered(const struct tdax_fd *e)
{
	return e->file_plus1 != TDAX_FD_UNREGISTERED;
}

void tdax_manage_dup(int from, int to)
{
	if (to < 0 || !tdax_fds || to == from)
		return;
	const struct tdax_fd *e = tdax_fd_get(from);
	if (to >= TDAX_MAX_FDS) {
		/* Beyond the table: writes through it would go unseen. */
		if (e && !registered(e))
			tdax_manage_again(from);
		if ((e = tdax_fd_get(from)))
			tdax_coherent_kernel_only(e->file_plus1 - 1, TDAX_FB_UNREGISTERED);
		return;
	}
	tdax_fd_forget(to);
	if (!e)
		return;
	if (e->twin_plus1)
		tdax_twin_ref(e->twin_plus1);
	if (registered(e))
		tdax_fd_hold(e->file_plus1 - 1);
	tdax_fds[to] = *e;
	/* The same open file: one lease for it, the original's (lease.h). */
	atomic_store(&tdax_fds[to].opened_in, 0);
	atomic_store(&tdax_fds[to].lease, TDAX_LEASE_NONE);
	tdax_fd_used(to);
}

/*
 * File systems where a sync costs nothing or tdax has no business
 * (tdax_fs_unmanaged). The devices found not to be one are remembered (a few, per process), so an
 * open of a file there costs no fstatfs. A device number that comes back
 * as another file system (an unmount, and a mount that reuses it) is at
 * worst one tdax manages needlessly; an excluded one is never remembered,
 * since managing a file must never stop while another process manages it.
 */
#define KNOWN_DEVS 8
static _Atomic uint64_t known_devs[KNOWN_DEVS]; /* st_dev + 1; 0: free */
static _Atomic uint32_t known_next;

static bool fs_excluded(int fd, dev_t dev)
{
	for (int i = 0; i < KNOWN_DEVS; i++)
		if (atomic_load_explicit(&known_devs[i], memory_order_relaxed) == (uint64_t)dev + 1)
			return false;
	struct statfs sf;
	if (fstatfs(fd, &sf) != 0 || tdax_fs_unmanaged((long)sf.f_type))
		return true;
	uint32_t slot = atomic_fetch_add_explicit(&known_next, 1, memory_order_relaxed) % KNOWN_DEVS;
	atomic_store_explicit(&known_devs[slot], (uint64_t)dev + 1, memory_order_relaxed);
	return false;
}

/*
 * What managing a file needs of it -- type, mode, device, inode, size --
 * from statx, without its times: since Linux 6.13 (multigrain timestamps)
 * a look at a file's mtime or ctime (fstat asks for them) makes its next
 * write take a fine-grained time and dirty its inode once more (for ext4 a
 * journal update), and every open for writing looks (SQLite's rollback
 * journal: one a transaction). The rest of *st is zero. 0, or -1 with
 * errno.
 */
static int filled(int rc, const struct statx *stx, struct stat *st)
{
	if (rc == 0)
		*st = (struct stat){ .st_mode = stx->stx_mode, .st_ino = stx->stx_ino,
				     .st_size = (off_t)stx->stx_size,
				     .st_dev = makedev(stx->stx_dev_major, stx->stx_dev_minor) };
	return rc;
}

#define LOOK_MASK (STATX_TYPE | STATX_MODE | STATX_INO | STATX_SIZE)

static int look_fd(int fd, struct stat *st)
{
	struct statx stx;
	return filled(tdax_statx_fd(fd, LOOK_MASK, &stx), &stx, st);
}

static int look_path(const char *path, struct stat *st)
{
	struct statx stx;
	return filled(tdax_sys_statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, LOOK_MASK, &stx), &stx, st);
}

/*
 * Has the file open as fd an entry (in a region this process attached)?
 * The stat first: most inode numbers are in no entry. Where one is, the
 * file's identity decides (two system calls): an entry that stays after
 * its file was removed by a program without tdax (a stream's, files.h)
 * keeps the inode number, which the file system gives again to a file it
 * makes next -- often at once, in the same directory or not -- and that
 * new file has no entry (an append loop without syncs, made where a synced
 * one had been removed, paid the registered path for its whole life: 0.85
 * of itself). Such entries go now if they hold nothing (the next open of
 * that number pays the stat alone), and so does the file's own entry if
 * its stream is over and no descriptor of this process holds it
 * (files.h): the file then waits for its first sync as a new one does.
 * unknown: the answer when the identity cannot be read.
 */
static bool has_entry(int fd, const struct stat *st, bool unknown)
{
	struct tdax_device *dev = tdax_rt.dev;
	if (!dev || !tdax_files_may_have(dev, (uint64_t)st->st_ino))
		return false;
	struct tdax_ident id;
	uint32_t idx, gen;
	if (tdax_ident_of_fd(fd, &id) != 0)
		return unknown;
	if (tdax_files_find(dev, &id, &idx, &gen) != 0) {
		tdax_files_let_go_others(dev, &id);
		return false;
	}
	return atomic_load(&tdax_rt.opens[idx]) || !tdax_files_let_go_quiet(dev, idx, gen);
}

/* A file the operator's rules leave out (rules.h) is managed all the same
 * while another process has it registered: writes to it must not go
 * unseen by the records that process may keep of it. */
static bool qualifies(int fd, int flags, struct stat *st)
{
	return fd >= 0 && fd < TDAX_MAX_FDS && (flags & O_ACCMODE) != O_RDONLY && look_fd(fd, st) == 0 &&
	       S_ISREG(st->st_mode) && !fs_excluded(fd, st->st_dev) &&
	       (tdax_rules_allow(fd) || has_entry(fd, st, false));
}

bool tdax_manage_wants(int fd, int flags)
{
	struct stat st;
	return qualifies(fd, flags, &st);
}

bool tdax_manage_wants_path(int dirfd, const char *path, bool follow)
{
	int fd = tdax_sys_openat(dirfd, path, O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW), 0);
	if (fd < 0)
		return false;
	struct stat st;
	bool yes = qualifies(fd, O_WRONLY, &st);
	tdax_sys_close(fd);
	return yes;
}

/* Where an inherited descriptor is (one just opened is at 0). */
static uint64_t position(int fd)
{
	long pos = tdax_syscall(SYS_lseek, fd, 0, SEEK_CUR);
	return pos < 0 ? 0 : (uint64_t)pos;
}

/*
 * The path recovery will use: absolute and canonical, as /proc names the
 * descriptor. That readlink costs ~2 us here, a tenth of what tdax adds
 * to a SQLite transaction in rollback-journal mode, which makes a new
 * journal at the same path in each. So each thread remembers the last
 * path it read and the name the file was opened by: an open by the same
 * name tries that path first, and takes it if it leads to this very file
 * now (a stat that does not follow a last link: same device and inode).
 * A path that leads to the file is one recovery finds it by; it was
 * canonical when read, and stays so unless a directory on it is replaced
 * by a link to itself. ver is odd while the path is written (a signal
 * handler's open on the same thread may come in between).
 */
static __thread struct {
	uint64_t name; /* tdax_name_hash of the name; 0: none */
	volatile uint32_t ver;
	char path[TDAX_FILE_PATH_MAX + 1];
} last_path TDAX_TLS;

static bool path_of(int fd, const char *name, const struct stat *st, char path[TDAX_FILE_PATH_MAX + 1])
{
	uint64_t key = name && st ? tdax_name_hash(name) : 0;
	uint32_t v = last_path.ver;
	if (key && !(v & 1) && last_path.name == key) {
		atomic_signal_fence(memory_order_acquire);
		memcpy(path, last_path.path, TDAX_FILE_PATH_MAX + 1);
		atomic_signal_fence(memory_order_acquire);
		path[TDAX_FILE_PATH_MAX] = '\0';
		struct stat now;
		if (last_path.ver == v &&
		    look_path(path, &now) == 0 && now.st_dev == st->st_dev &&
		    now.st_ino == st->st_ino)
			return true;
	}
	if (tdax_fd_path(fd, path, TDAX_FILE_PATH_MAX + 1) < 0)
		return false;
	if (key && !(v & 1) && last_path.ver == v) { /* (odd: this handler interrupted a write) */
		last_path.ver = v + 1;
		atomic_signal_fence(memory_order_release);
		last_path.name = key;
		memcpy(last_path.path, path, strlen(path) + 1);
		atomic_signal_fence(memory_order_release);
		last_path.ver = v + 2;
	}
	return true;
}

/* Register the file open as fd (path_or_null names it in warnings; st,
 * if not NULL, is its look_fd): 0 with *idx, *gen, *created, or -1 (the
 * file stays with the kernel). */
static int register_fd(int fd, const char *path_or_null, const struct stat *st, uint32_t *idx, uint32_t *gen,
		       bool *created)
{
	char path[TDAX_FILE_PATH_MAX + 1];
	if (!path_of(fd, path_or_null, st, path)) {
		tdax_fallback(TDAX_FB_UNREGISTERED, path_or_null ? path_or_null : "(a descriptor /proc cannot name)");
		return -1;
	}
	struct tdax_err e;
	if (tdax_files_register(tdax_rt.dev, fd, path, idx, gen, created, &e) != 0) {
		tdax_fallback(TDAX_FB_UNREGISTERED, path);
		return -1;
	}
	/* A view of it was made writable here when the process had no
	 * descriptor of it (views.h): the kernel's, as if mapped writable. */
	struct tdax_ident id = tdax_file_ident(tdax_file_at(tdax_rt.dev, *idx));
	if (tdax_views_tainted(&id))
		tdax_coherent_kernel_only(*idx, TDAX_FB_MMAP);
	if (tdax_tracing && tdax_rt.named[*idx] != *gen) {
		tdax_rt.named[*idx] = *gen;
		tdax_trace_name(*idx, path);
	}
	return 0;
}

static bool manage_fresh(int fd, const char *path_or_null, int flags);

bool tdax_manage(int fd, const char *path_or_null, int flags)
{
	if (fd < 0 || fd >= TDAX_MAX_FDS)
		return false;
	/* Whatever the number was before, it is this now. If it was this file
	 * already (adopted when the process attached on this very open), the
	 * entry is held meanwhile: forgetting must not let it go. */
	const struct tdax_fd *was = tdax_fd_get(fd);
	uint32_t held = was && registered(was) ? was->file_plus1 : 0, held_gen = was ? was->gen : 0;
	if (held)
		tdax_fd_hold(held - 1);
	tdax_fd_forget(fd);
	bool logged = manage_fresh(fd, path_or_null, flags);
	if (held)
		tdax_fd_unhold(held - 1, held_gen);
	return logged;
}

/* A descriptor this process opens itself may be leased (lease.h); one it
 * was given (inherited across exec, adopted) may be shared with anyone. */
static uint32_t opened_in(const char *path_or_null)
{
	return path_or_null ? atomic_load(&tdax_lease_epoch) : 0;
}

/* The entry's flags an open's flags give. */
static uint16_t fd_flags(int flags)
{
	return ((flags & O_APPEND) ? TDAX_FD_APPEND : 0) | ((flags & O_DIRECT) ? TDAX_FD_NOLOG : 0);
}

/* O_SYNC (which includes O_DSYNC's bit) or O_DSYNC, as the entry says it. */
static uint16_t sync_flags(int flags)
{
	return (flags & O_SYNC) == O_SYNC ? TDAX_FD_SYNC : (flags & O_DSYNC) ? TDAX_FD_DSYNC : 0;
}

/*
 * Can fd wait for its file's registration (unregistered.h)? Not when the
 * file has an entry already (the descriptor joins it), nor when every
 * write is to be traced (a trace has every write of every file opened for
 * writing), the process cannot see its own writes (io_uring), or the file
 * is made at the name of a removed one whose stream it takes up
 * (tracking.h: heirs). The count of registrations is read before the
 * index: an entry made after the look moves it.
 *
 * A descriptor opened with O_SYNC or O_DSYNC waits too: its first write
 * is a sync, and registers the file then (unregistered.c). Opened and
 * never written (LMDB's meta descriptor under MDB_NOSYNC), it costs the
 * file's other descriptors nothing: registered at the open, their every
 * write paid the policy's bookkeeping (LMDB without syncs ran at 0.93 of
 * itself without tdax, 0.98 since).
 *
 * Policy always logs every write of a file from its first sync on: what is
 * written before that is promised nothing, so a file never synced
 * (SQLite's rollback journal with synchronous=OFF, a temporary file) costs
 * what it costs without tdax. A file the open made waits only if it can be
 * read back (O_RDWR, through the page cache): its first sync logs its
 * creation and what it holds (unregistered.c). One made write-only is
 * registered at once, its creation and every write logged, as is every
 * file opened with O_DIRECT (whose writes are never logged, each counted
 * so) or in bypass mode (which promotes at the open).
 */
static bool may_wait(int fd, enum tdax_heir heir, int flags, bool made, const struct stat *st,
		     uint32_t *count)
{
	*count = (uint32_t)tdax_files_registrations(tdax_rt.dev);
	bool always_waits = !tdax_rt.bypass && !(flags & O_DIRECT) && (!made || (flags & O_ACCMODE) == O_RDWR);
	return (tdax_rt.policy != TDAX_POLICY_ALWAYS || always_waits) &&
	       !tdax_tracing && !tdax_rt.blind && heir == TDAX_HEIR_NONE &&
	       !has_entry(fd, st, true); /* (unreadable: the registration says why) */
}

/*
 * After a registered file's entry for fd is stored: the process may have
 * gone blind since this thread looked (another thread's io_uring,
 * tdax_go_blind). That thread stores the flag, then reads every entry;
 * this one stored the entry and reads the flag now: one of the two sees
 * the other, and the file goes to the kernel's sync path either way. (An
 * entry that waits unregistered needs no second look: its registration
 * comes back here.)
 */
static void blind_since(int fd, uint32_t idx, uint32_t gen)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (__atomic_load_n(&tdax_rt.blind, __ATOMIC_RELAXED))
		tdax_coherent_unmanage(fd, idx, gen, TDAX_FB_ASYNC);
}

/* tdax_manage of a number that has no entry now. */
static bool manage_fresh(int fd, const char *path_or_null, int flags)
{
	struct stat st;
	uint32_t idx, gen, count;
	bool created;
	if (!qualifies(fd, flags, &st))
		return false;
	bool made = (flags & O_CREAT) && st.st_size == 0;
	enum tdax_heir heir = path_or_null && made ? tdax_tracking_heir(path_or_null) : TDAX_HEIR_NONE;
	if (may_wait(fd, heir, flags, made, &st, &count)) {
		tdax_fds[fd] = (struct tdax_fd){
			.file_plus1 = TDAX_FD_UNREGISTERED, .gen = count,
			.mode = TDAX_MODE_UNREGISTERED,
			.flags = fd_flags(flags) | sync_flags(flags) |
				 (made && (flags & O_ACCMODE) == O_RDWR ? TDAX_FD_MADE : 0),
			.dev = st.st_dev, .ino = st.st_ino,
			.pos = path_or_null ? 0 : position(fd),
			.opened_in = opened_in(path_or_null),
		};
		tdax_fd_used(fd);
		return false;
	}
	if (register_fd(fd, path_or_null, &st, &idx, &gen, &created) != 0)
		return false;
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	uint64_t seen = atomic_load(&rt->size_seen);
	/* A new entry of an empty file opened with O_CREAT: its creation is a
	 * record, nothing before the open is unknown (the registration's
	 * uncovered count goes). An entry found is a file that existed:
	 * O_CREAT changed nothing. Not for the heir of a stream that was not
	 * upgraded: its syncs are real anyway, and a record would cost a
	 * directory sync in the write-back for every such file (SQLite's
	 * rollback journal: one per transaction, 0.94 of its speed without
	 * tdax); it is made as any file is, and takes up the counts. */
	bool logged = created && made && heir != TDAX_HEIR_COLD &&
		      tdax_coherent_created(fd, idx, gen, (uint32_t)st.st_mode & 07777);
	if (logged) {
		atomic_fetch_sub(&rt->uncovered, 1);
	} else if (created || seen != (uint64_t)st.st_size) {
		/* New to tdax, or changed by someone tdax did not see. */
		atomic_store(&rt->size_seen, (uint64_t)st.st_size);
		atomic_fetch_add(&rt->uncovered, 1);
	}
	if (created && (heir == TDAX_HEIR_COLD || (heir == TDAX_HEIR_UPGRADED && logged)))
		tdax_tracking_inherit(idx, gen, path_or_null);
	if (tdax_tracing)
		tdax_trace_event(TDAX_TR_OPEN, idx, gen, 0, (uint16_t)(created ? TDAX_TRF_CREATE : 0));
	if (!logged && ((flags & O_TRUNC) || (created && (flags & O_CREAT))))
		tdax_coherent_uncover(idx, TDAX_FB_METADATA); /* the directory entry / size need the kernel */
	bool blind = tdax_rt.blind;
	if (blind)
		tdax_coherent_unmanage(fd, idx, gen, TDAX_FB_ASYNC);
	TDAX_TEST_HOLD_WHILE("MANAGE_PAUSE_IF");
	tdax_fd_hold(idx);
	uint16_t sync = sync_flags(flags);
	uint32_t twin = sync ? (uint32_t)tdax_twin_open(fd, flags) : 0;
	tdax_fds[fd] = (struct tdax_fd){
		.file_plus1 = idx + 1, .gen = gen,
		.mode = (uint8_t)choose_mode(),
		.flags = fd_flags(flags) | (twin ? sync : 0),
		.twin_plus1 = twin,
		.dev = st.st_dev, .ino = st.st_ino,
		.pos = path_or_null ? 0 : position(fd),
		.opened_in = opened_in(path_or_null),
	};
	tdax_fd_used(fd);
	if (!blind)
		blind_since(fd, idx, gen);
	return logged;
}

/*
 * A descriptor opened with O_SYNC or O_DSYNC that waited in unregistered
 * mode (its writes the kernel's, each synced by it) gets the twin it
 * writes through from now on (fdtable.h), before its mode says it is
 * registered; without one, the kernel goes on syncing every write itself.
 */
static void twin_up(int fd, struct tdax_fd *e)
{
	uint16_t sync = __atomic_load_n(&e->flags, __ATOMIC_RELAXED) & (TDAX_FD_DSYNC | TDAX_FD_SYNC);
	if (!sync)
		return;
	int fl = (int)tdax_syscall(SYS_fcntl, fd, F_GETFL);
	uint32_t twin = fl < 0 ? 0 : (uint32_t)tdax_twin_open(fd, fl);
	if (twin)
		__atomic_store_n(&e->twin_plus1, twin, __ATOMIC_RELAXED);
	else
		__atomic_fetch_and(&e->flags, (uint16_t)~sync, __ATOMIC_RELAXED);
}

/*
 * The entry was let go under the descriptor (another process closed the
 * file, files.h; or room was made in a full table): register the file
 * again, in place -- other threads may be using the entry, which never
 * reads as unmanaged on the way -- and make the next sync real, since
 * what this descriptor wrote since counted in no entry. The same for a
 * descriptor in unregistered mode whose file needs an entry now: it joins
 * the file's entry, or makes one. Nothing to register: the descriptor goes
 * to the kernel. True if this made the file's entry.
 */
bool tdax_manage_again(int fd)
{
	uint32_t idx, gen;
	bool created;
	struct tdax_fd *e = &tdax_fds[fd];
	uint32_t old = e->file_plus1;
	if (!old)
		return false;
	if (register_fd(fd, NULL, NULL, &idx, &gen, &created) != 0) {
		tdax_fd_forget(fd);
		return false;
	}
	tdax_fd_hold(idx);
	uint32_t old_gen = e->gen;
	__atomic_store_n(&e->gen, gen, __ATOMIC_RELAXED);
	if (!__atomic_compare_exchange_n(&e->file_plus1, &old, idx + 1, false, __ATOMIC_RELEASE,
					 __ATOMIC_RELAXED)) {
		tdax_fd_unhold(idx, gen); /* another thread of the process was first */
		return false;
	}
	if (old == TDAX_FD_UNREGISTERED) {
		twin_up(fd, e);
		/* Its writes did not keep the estimate of where the next one lands. */
		atomic_store_explicit(&e->pos, position(fd), memory_order_relaxed);
		__atomic_store_n(&e->mode, (uint8_t)choose_mode(), __ATOMIC_RELEASE); /* last: it reads the entry */
	} else {
		/* Let go under the descriptor: whatever the old entry knew of
		 * the open file's hand-overs went with it. */
		atomic_store(&e->opened_in, 0);
		tdax_fd_unhold(old - 1, old_gen);
	}
	/* Its mode (choose_mode), and what it wrote unseen: the next sync is
	 * real. A new entry is uncovered already (files.h), and nothing fell
	 * back: a file registered when it first needs an entry. */
	uint64_t size;
	if (!created || old != TDAX_FD_UNREGISTERED)
		tdax_coherent_changed(fd, e, TDAX_FB_METADATA);
	else if (tdax_file_size(fd, &size) == 0)
		atomic_store(&tdax_rt_of(idx)->size_seen, size);
	return created;
}

void tdax_manage_stdio(int fd)
{
	const struct tdax_fd *e = tdax_fd_get(fd);
	if (e && !registered(e))
		tdax_manage_again(fd); /* the file needs an entry that says so */
	struct tdax_ident id;
	uint32_t idx, gen;
	if (tdax_ident_of_fd(fd, &id) == 0 && tdax_files_find(tdax_rt.dev, &id, &idx, &gen) == 0)
		tdax_coherent_unmanage(fd, idx, gen, TDAX_FB_STDIO);
}
