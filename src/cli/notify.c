/*
 * notify -- the supervisor of tdax run --intercept syscall (intercept.h):
 * `tdax serve-syscalls`, running with libtdax.so preloaded, receives each
 * call the filter traps (SECCOMP_IOCTL_NOTIF_RECV) and makes it itself,
 * through the C library, so that the hooks handle it as the command's own:
 * a write is logged (or not) by the policy, a sync answered from the
 * device or made real, a rename recorded before it is done.
 *
 * Descriptors. The command's opens for writing are made here; the
 * descriptor of a file tdax manages (not one on tmpfs, say) is installed in
 * the command (SECCOMP_IOCTL_NOTIF_ADDFD) at a free number at
 * TDAX_INTERCEPT_FD_BASE or above, kept here (the same open
 * file: position, flags, lease) until the command closes or replaces that
 * number, executes, or ends; a number at the base the supervisor did not
 * place (a forked child's, one duplicated up) is borrowed with pidfd_getfd
 * and kept the same way. Only those numbers' writes and syncs are trapped.
 * A write through a lower number of a file is unseen, so such a file's
 * syncs are made real (`unseen`): a duplicate made below the base, a file
 * open for writing at a low number when a process is first seen (inherited
 * across exec), a file that finds no free number under RLIMIT_NOFILE.
 * Buffers are read with process_vm_readv; the answer is the call's result.
 *
 * A call on something that is not a file (a socket, a pipe), or one the
 * supervisor cannot make as the command would, goes back to the kernel
 * unchanged (SECCOMP_USER_NOTIF_FLAG_CONTINUE): names are changed here only
 * for a process whose user, groups, capabilities and security label are
 * the supervisor's, and whose umask it takes
 * (it takes the umask per thread: CLONE_FS is unshared), so that tdax never
 * acts with rights the command does not have. Such a process's renames
 * are then unseen, as another program's are (docs/durability.md). A call
 * the supervisor cannot follow at all (not_followed) makes every sync real.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/aio_abi.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cli/intercept.h"
#include "cli/out.h"
#include "cli/supervise.h"
#include "core/fsioctl.h"
#include "core/testaid.h"
#include "core/util.h"

#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif

enum { SERVERS = 2, MAX_PROCS = 32768, MAX_WRITE = 64 << 20 };

/* The open flags the kernel's openat keeps (VALID_OPEN_FLAGS; O_LARGEFILE
 * as the kernel spells it, which glibc's headers make 0 on x86-64). */
#define OPENAT_FLAGS                                                                                   \
	(O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | O_NONBLOCK | O_DSYNC | O_SYNC | \
	 FASYNC | O_DIRECT | 0100000 | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC | O_PATH | O_TMPFILE)

/* A descriptor of the command's, borrowed: shared by the threads serving
 * it; closed when the last user lets go of one the command dropped. */
struct borrowed {
	int fd;
	bool file; /* a regular file or a directory: the hooks' business */
	bool viewed; /* mapped shared and read-only by the command (views, below) */
	int users;
	bool dropped;
};

/* A process that made a trapped call: its thread group, a pidfd to it (to
 * borrow descriptors, and to see that the number is not a later process's)
 * and what it has lent, by its descriptor number. */
struct proc {
	pid_t tgid;
	int pidfd;
	struct borrowed **fds; /* by number, at the base and above only */
	int nfds;
	int next; /* where to look for a free number to place a file (-1: the top) */
	/* Why the supervisor cannot make its calls (NULL: it can): a thread
	 * with a descriptor table of its own, a root or mount namespace of its
	 * own (its paths name other files). */
	const char *split;
};

static int listener;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* procs[0, nprocs) are allocated (a slot whose tgid is 0 is free), each
 * once: a call holds its process's across the lock. At most max_procs. */
static struct proc *procs[MAX_PROCS];
static int nprocs, max_procs = MAX_PROCS;
static uid_t my_uid;
static gid_t my_gid;
/* The supervisor's file size limit is the command's, from the start (a
 * process that sets another is split): the writes it makes for the
 * command end where the command's would. Is there one (not infinite)? */
static bool fsize_limited;

/* ---- the command's processes and descriptors -------------------------- */

/* The values of the lines starting with keys[0..n) in the /proc file at
 * path into vals (lens bytes each); 0, or -1 if the file or a key is
 * missing. */
static int proc_lines(const char *path, const char *const keys[], char *const vals[], const size_t lens[],
		      int n)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (got <= 0)
		return -1;
	buf[got] = '\0';
	for (int i = 0; i < n; i++) {
		size_t k = strlen(keys[i]);
		char *l = buf;
		while (l && strncmp(l, keys[i], k))
			l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL;
		if (!l)
			return -1;
		l += k;
		l += strspn(l, " \t");
		snprintf(vals[i], lens[i], "%.*s", (int)strcspn(l, "\n"), l);
	}
	return 0;
}

static int proc_line(const char *path, const char *key, char *out, size_t len)
{
	return proc_lines(path, &key, &out, &len, 1);
}

/* A line of /proc/TID/status ("Tgid:", "Uid:", ...) into out; 0 or -1. */
static int status_line(pid_t tid, const char *key, char *out, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	return proc_line(path, key, out, len);
}

/* The open flags (octal) of a process's descriptor n. */
static int fdinfo_flags(pid_t tgid, int n, char *out, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", (int)tgid, n);
	return proc_line(path, "flags:", out, len);
}

static void let_go(struct borrowed *b)
{
	if (b && --b->users == 0 && b->dropped) {
		close(b->fd);
		free(b);
	}
}

static void unseen(int fd);

/* Set once a call went to the kernel unseen that the supervisor could not
 * follow (not_followed): every file it keeps gets real syncs. */
static _Atomic bool blind;

static void drop(struct borrowed **slot)
{
	struct borrowed *b = *slot;
	*slot = NULL;
	if (b && b->viewed)
		unseen(b->fd); /* its view outlives the number: no mprotect could find it */
	if (b) {
		b->dropped = true;
		b->users++;
		let_go(b);
	}
}

static void drop_range(struct proc *p, unsigned first, unsigned last)
{
	for (unsigned i = first; i <= last && i < (unsigned)p->nfds; i++)
		drop(&p->fds[i]);
}

/* p has ended: its mappings with it. */
static void forget_proc(struct proc *p)
{
	for (int n = 0; n < p->nfds; n++)
		if (p->fds[n])
			p->fds[n]->viewed = false;
	drop_range(p, 0, UINT32_MAX);
	free(p->fds);
	close(p->pidfd);
	*p = (struct proc){ 0 };
}

static bool ended(const struct proc *p)
{
	struct pollfd pf = { .fd = p->pidfd, .events = POLLIN };
	return poll(&pf, 1, 0) == 1;
}

/* Writes to fd's file are made where tdax cannot see them: the hooks
 * stop answering its syncs from the device (a writable shared mapping is
 * how they learn it: interpose_map.c's mmap marks the file before it maps,
 * whether the mapping can be made or not). */
static void unseen(int fd)
{
	void *m = mmap(NULL, 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m != MAP_FAILED)
		munmap(m, 1);
}

/*
 * Views. A shared mapping of a placed file that cannot write it (bbolt's,
 * LMDB's) leaves its syncs lightweight: every write still comes through a
 * trapped call. A mapping can be made writable later only by mprotect or
 * pkey_mprotect with PROT_WRITE (an mremap keeps the protection), which
 * the filter traps whatever the address (glibc makes such calls for each
 * thread's stack and malloc arena: a cgo program, such as Debian's etcd,
 * as it starts threads). The supervisor does not see where a view landed,
 * so such a call looks at the caller's mappings (/proc/PID/maps): one that
 * reaches a shared mapping of a file, by any of the command's processes (a
 * forked child has its parent's mappings), makes every viewed file's syncs
 * real before the call goes back to the kernel (one by a process not known
 * here makes every file's: not_followed). A view mapped at a fixed
 * address (MAP_FIXED) is taken as writable at once: it could land in a
 * range another thread's mprotect is about to change. Not covered: an
 * mprotect across a hole that another thread's view fills between the
 * look and the call (mprotect changes what it finds before the hole).
 */
static _Atomic bool any_view;

static void viewed(struct borrowed *b)
{
	pthread_mutex_lock(&lock);
	b->viewed = true;
	any_view = true;
	pthread_mutex_unlock(&lock);
}

/* Does [addr, addr + len) of process tgid reach a shared mapping of a
 * file? In doubt (its maps unreadable), it does. */
static bool reaches_shared(pid_t tgid, uint64_t addr, uint64_t len)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)tgid);
	FILE *m = fopen(path, "re");
	if (!m)
		return true;
	bool reaches = false;
	while (!reaches && fgets(line, sizeof(line), m)) {
		unsigned long long from, to;
		char perms[8];
		if (sscanf(line, "%llx-%llx %7s", &from, &to, perms) == 3)
			reaches = perms[3] == 's' && from < addr + len && addr < to;
		while (!strchr(line, '\n') && fgets(line, sizeof(line), m))
			; /* the rest of a long line */
	}
	fclose(m);
	return reaches;
}

static void views_writable(void)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; any_view && i < nprocs; i++)
		for (int n = 0; procs[i]->tgid && n < procs[i]->nfds; n++) {
			struct borrowed *b = procs[i]->fds[n];
			if (b && b->viewed) {
				unseen(b->fd);
				b->viewed = false;
			}
		}
	any_view = false;
	pthread_mutex_unlock(&lock);
}

/* The file of descriptor fd of the process of pidfd, if a regular one:
 * its syncs real from now on (unseen). */
static void unseen_theirs(int pidfd, int fd)
{
	int mine = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	struct stat st;
	if (mine >= 0 && fstat(mine, &st) == 0 && S_ISREG(st.st_mode))
		unseen(mine);
	if (mine >= 0)
		close(mine);
}

/* A process seen for the first time may hold files open for writing at
 * numbers below the base (inherited across exec, or from its parent):
 * writes through those are not trapped, so their files' syncs must be
 * real. */
static void unseen_below_base(pid_t tgid, int pidfd)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fdinfo", (int)tgid);
	DIR *d = opendir(path);
	for (struct dirent *e; d && (e = readdir(d));) {
		int n = atoi(e->d_name);
		char flags[32];
		if (e->d_name[0] < '0' || e->d_name[0] > '9' || n >= TDAX_INTERCEPT_FD_BASE)
			continue;
		if (fdinfo_flags(tgid, n, flags, sizeof(flags)) != 0 ||
		    (strtoul(flags, NULL, 8) & O_ACCMODE) == O_RDONLY)
			continue;
		unseen_theirs(pidfd, n);
	}
	if (d)
		closedir(d);
}

/* A process of the command sandboxed itself (landlock_restrict_self). */
static _Atomic bool landlocked;

/* The supervisor's root and mount namespace (cmd_serve_syscalls). */
static struct {
	uint64_t mnt_id, ino, ns;
} my_root;

/* Where path (a root, or a /proc/PID/root) leads: its mount and inode, and
 * the mount namespace of that process; 0 or -1. */
static int root_of(const char *root, const char *ns, uint64_t *mnt_id, uint64_t *ino, uint64_t *ns_ino)
{
	struct statx sx;
	struct stat st;
	if (statx(AT_FDCWD, root, 0, STATX_INO | STATX_MNT_ID, &sx) != 0 || !(sx.stx_mask & STATX_MNT_ID) ||
	    stat(ns, &st) != 0)
		return -1;
	*mnt_id = sx.stx_mnt_id;
	*ino = sx.stx_ino;
	*ns_ino = st.st_ino;
	return 0;
}

/* Does process tgid resolve paths as the supervisor does (its root and
 * mount namespace)? In doubt, no. */
static bool same_root(pid_t tgid)
{
	char root[64], ns[64];
	uint64_t mnt_id, ino, ns_ino;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)tgid);
	snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)tgid);
	return root_of(root, ns, &mnt_id, &ino, &ns_ino) == 0 && mnt_id == my_root.mnt_id && ino == my_root.ino &&
	       ns_ino == my_root.ns;
}

/* The live process with thread group tgid, or a free slot, made if
 * there is room (under lock). */
static struct proc *find_proc(pid_t tgid, struct proc **free_slot)
{
	for (int i = 0; i < nprocs; i++) {
		struct proc *p = procs[i];
		if (p->tgid && ended(p))
			forget_proc(p); /* its number may be a new process's */
		if (p->tgid == tgid)
			return p;
		if (!p->tgid && free_slot && !*free_slot)
			*free_slot = p;
	}
	if (free_slot && !*free_slot && nprocs < max_procs && (procs[nprocs] = calloc(1, sizeof(struct proc))))
		*free_slot = procs[nprocs++];
	return NULL;
}

/* The thread group of each thread seen (a Go program calls from many):
 * reading /proc/TID/status costs ~15 us, more than the call. */
static struct {
	pid_t tid, tgid;
} threads[1024];

/* The process of thread tid (under lock): found, or made; NULL if it
 * cannot be followed (not_followed), *tgid its thread group if known
 * (else 0). tid is a live thread (the caller waits in its call). */
static struct proc *proc_of(pid_t tid, pid_t *tgid)
{
	struct proc *free_slot = NULL, *p;
	/* A process's first thread has its number: a live process with
	 * thread group tid is the caller's. */
	if ((p = find_proc(tid, &free_slot)))
		return *tgid = tid, p;
	unsigned h = (unsigned)tid % (sizeof(threads) / sizeof(threads[0]));
	char line[64];
	*tgid = 0;
	if (threads[h].tid == tid) {
		snprintf(line, sizeof(line), "/proc/%d/task/%d", (int)threads[h].tgid, (int)tid);
		if (access(line, F_OK) == 0) /* still a thread of that group */
			*tgid = threads[h].tgid;
	}
	if (!*tgid) {
		if (status_line(tid, "Tgid:", line, sizeof(line)) != 0)
			return NULL;
		*tgid = (pid_t)atoi(line);
		threads[h].tid = tid;
		threads[h].tgid = *tgid;
	}
	if ((p = find_proc(*tgid, &free_slot)) || !free_slot)
		return p;
	int pidfd = (int)syscall(SYS_pidfd_open, *tgid, 0);
	if (pidfd < 0)
		return NULL;
	*free_slot = (struct proc){ .tgid = *tgid, .pidfd = pidfd, .next = -1 };
	if (!same_root(*tgid))
		free_slot->split = "a root or mount namespace of its own";
	else if (landlocked)
		free_slot->split = "a Landlock sandbox (one of the command's is)";
	unseen_below_base(*tgid, pidfd);
	return free_slot;
}

/* The place of the command's descriptor fd in p's table (grown), under
 * lock; NULL if out of range or memory. */
static struct borrowed **slot(struct proc *p, int fd)
{
	if (fd < 0 || fd > (1 << 20))
		return NULL;
	if (fd >= p->nfds) {
		int n = fd + 64;
		struct borrowed **grown = realloc(p->fds, (size_t)n * sizeof(*grown));
		if (!grown)
			return NULL;
		memset(grown + p->nfds, 0, (size_t)(n - p->nfds) * sizeof(*grown));
		p->fds = grown;
		p->nfds = n;
	}
	return &p->fds[fd];
}

/* mine, as a borrowed descriptor with no user yet; NULL (mine closed) if
 * it cannot be looked at. */
static struct borrowed *wrap(int mine)
{
	struct borrowed *b = malloc(sizeof(*b));
	struct stat st;
	if (!b || fstat(mine, &st) != 0) {
		free(b);
		close(mine);
		return NULL;
	}
	*b = (struct borrowed){ .fd = mine, .file = S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) };
	return b;
}

/* Keep mine as the command's descriptor fd (under lock); mine is closed
 * if it cannot be kept. */
static struct borrowed *keep(struct proc *p, int fd, int mine)
{
	struct borrowed **s = slot(p, fd), *b = s ? wrap(mine) : NULL;
	if (!b) {
		if (!s)
			close(mine);
		return NULL;
	}
	drop(s);
	if (blind && b->file)
		unseen(b->fd);
	return *s = b;
}

/* The command's descriptor fd, borrowed (let_go when done): NULL with
 * errno if it has none by that number (EBADF) or it cannot be borrowed. */
static struct borrowed *borrow(struct proc *p, int fd)
{
	struct borrowed **s = slot(p, fd);
	if (!s) {
		errno = fd < 0 ? EBADF : ENOMEM;
		return NULL;
	}
	if (!*s) {
		int mine = (int)syscall(SYS_pidfd_getfd, p->pidfd, fd, 0);
		if (mine < 0 || !keep(p, fd, mine))
			return NULL;
	}
	(*s)->users++;
	return *s;
}

/* ---- one trapped call -------------------------------------------------- */

struct call {
	struct seccomp_notif *req;
	struct proc *p;    /* under lock only for lookups */
	pid_t tgid;        /* p's when found: a slot let go meanwhile is not the caller's */
	pid_t pid;         /* the calling thread */
	uint64_t *a;       /* its arguments */
	struct borrowed *held[2];
	int dirs[2];       /* descriptors opened for this call, closed after */
	bool unreadable;   /* its memory could not be read at all (moved) */
	bool partly;       /* made in part (a big write's pieces): its result stands */
};

static void not_followed(struct call *c, const char *why);

/* The caller's descriptor fd (held[i] until the call is done), or NULL with
 * errno: EBADF, none by that number; ESRCH, the caller is gone; any other
 * (the supervisor out of descriptors or memory): not followed. */
static struct borrowed *take(struct call *c, int i, int fd)
{
	pthread_mutex_lock(&lock);
	if (c->p->tgid != c->tgid) {
		errno = ESRCH; /* the caller was killed in its call, and its slot is another's now */
	} else if (fd >= 0 && fd < TDAX_INTERCEPT_FD_BASE) {
		/* Not kept: its close is not trapped, the number may be another
		 * file's next time. Closed when the call is done. */
		int mine = (int)syscall(SYS_pidfd_getfd, c->p->pidfd, fd, 0);
		struct borrowed *b = mine >= 0 ? wrap(mine) : NULL;
		if (b) {
			b->users = 1;
			b->dropped = true;
			c->held[i] = b;
		}
	} else {
		c->held[i] = borrow(c->p, fd);
	}
	pthread_mutex_unlock(&lock);
	int err = errno;
	if (!c->held[i] && err != EBADF && err != ESRCH) {
		not_followed(c, strerror(err));
		errno = err;
	}
	return c->held[i];
}

/* Let go of what take(c, i, ...) held, before the call is done. */
static void give_back(struct call *c, int i)
{
	pthread_mutex_lock(&lock);
	let_go(c->held[i]);
	c->held[i] = NULL;
	pthread_mutex_unlock(&lock);
}

/* Read len bytes of the caller's memory at addr into buf: 0 or -EFAULT. */
/* A read or write of the caller's memory moved n bytes of len: 0, or
 * -EFAULT. One the kernel refused outright (EPERM: a process made not
 * dumpable, whose memory only a privileged supervisor may read) marks the
 * call unreadable: serve leaves it, and the process, to the kernel. */
static long moved(struct call *c, ssize_t n, size_t len)
{
	if (n < 0 && errno != EFAULT)
		c->unreadable = true;
	return n == (ssize_t)len ? 0 : -EFAULT;
}

static long peek(struct call *c, void *buf, uint64_t addr, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
	return moved(c, process_vm_readv(c->pid, &l, 1, &r, 1, 0), len);
}

static long poke(struct call *c, const void *buf, uint64_t addr, size_t len)
{
	struct iovec l = { (void *)buf, len }, r = { (void *)(uintptr_t)addr, len };
	return moved(c, process_vm_writev(c->pid, &l, 1, &r, 1, 0), len);
}

/* If path starts with the name prefix (a whole component), what follows
 * it; else NULL. */
static const char *after(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);
	return !strncmp(path, prefix, n) && (path[n] == '\0' || path[n] == '/') ? path + n : NULL;
}

/*
 * The path as the caller means it. Names that mean "this process" to the
 * kernel -- /proc/self, /proc/thread-self, /dev/fd, /dev/stdin, /dev/stdout,
 * /dev/stderr -- would mean the supervisor here (its own descriptor 1 for
 * the caller's /dev/stdout: a write, or a truncate by name, of the wrong
 * file), so they are spelled with the caller's numbers. Another way to
 * such a name (a symbolic link to it, an odd spelling) is caught where the
 * supervisor opens (open_for). 0, or -ENAMETOOLONG.
 */
static long their_path(const struct call *c, char path[PATH_MAX])
{
	static const char *const std[] = { "/dev/stdin", "/dev/stdout", "/dev/stderr" };
	char was[PATH_MAX];
	const char *rest;
	int n = -1;
	memcpy(was, path, strlen(path) + 1);
	if ((rest = after(was, "/proc/self")))
		n = snprintf(path, PATH_MAX, "/proc/%d%s", (int)c->tgid, rest);
	else if ((rest = after(was, "/proc/thread-self")))
		n = snprintf(path, PATH_MAX, "/proc/%d/task/%d%s", (int)c->tgid, (int)c->pid, rest);
	else if ((rest = after(was, "/dev/fd")))
		n = snprintf(path, PATH_MAX, "/proc/%d/fd%s", (int)c->tgid, rest);
	for (int i = 0; i < 3 && n < 0; i++)
		if ((rest = after(was, std[i])))
			n = snprintf(path, PATH_MAX, "/proc/%d/fd/%d%s", (int)c->tgid, i, rest);
	return n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* A NUL-terminated path of the caller's (PATH_MAX at most), as the caller
 * means it (their_path): 0 or -errno. */
static long peek_path(struct call *c, uint64_t addr, char out[PATH_MAX])
{
	size_t got = 0;
	while (got < PATH_MAX) {
		size_t page = 4096 - ((addr + got) & 4095), want = PATH_MAX - got < page ? PATH_MAX - got : page;
		if (peek(c, out + got, addr + got, want) != 0)
			return -EFAULT;
		if (memchr(out + got, '\0', want))
			return their_path(c, out);
		got += want;
	}
	return -ENAMETOOLONG;
}

/* A per-thread buffer of len bytes (grown, never shrunk; its bytes not
 * kept), page-aligned: a write of an O_DIRECT file is made from it, which
 * the kernel refuses from memory less aligned than its blocks. */
static char *buffer(size_t len)
{
	static __thread char *buf;
	static __thread size_t cap;
	if (len > cap) {
		void *b;
		if (posix_memalign(&b, 4096, len) != 0)
			return NULL;
		free(buf);
		buf = b;
		cap = len;
	}
	return buf;
}

/* The bytes of a write (addr, len) or of an iovec array, past its first
 * skip ones: into a buffer; *len is what was gathered (at most MAX_WRITE:
 * the rest comes in the next call), *whole the write's length. */
static long gather(struct call *c, uint64_t addr, size_t *len, int iovcnt, size_t skip, size_t *whole,
		   char **out)
{
	struct iovec remote[IOV_MAX], *rv = remote;
	size_t total = 0;
	int n = 0;
	if (iovcnt < 0) {
		remote[n++] = (struct iovec){ (void *)(uintptr_t)addr, *len };
		total = *len;
	} else {
		if (iovcnt > IOV_MAX)
			return -EINVAL;
		if (iovcnt && peek(c, remote, addr, (size_t)iovcnt * sizeof(remote[0])) != 0)
			return -EFAULT;
		for (n = 0; n < iovcnt; n++)
			total += remote[n].iov_len;
	}
	*whole = total;
	for (total -= skip; n && skip >= rv->iov_len; n--)
		skip -= rv++->iov_len;
	if (n) {
		rv->iov_base = (char *)rv->iov_base + skip;
		rv->iov_len -= skip;
	}
	if (total > MAX_WRITE) {
		size_t keep = MAX_WRITE;
		int i = 0;
		for (; i < n && rv[i].iov_len <= keep; i++)
			keep -= rv[i].iov_len;
		if (i < n)
			rv[i++].iov_len = keep;
		n = i;
		total = MAX_WRITE;
	}
	char *buf = buffer(total ? total : 1);
	if (!buf)
		return -ENOMEM;
	/* The kernel copies a write's bytes until one cannot be read and
	 * writes those (EFAULT if none): process_vm_readv stops at the first
	 * element it cannot read whole, which is then read a page at a time. */
	struct iovec local = { buf, total };
	ssize_t got = total ? process_vm_readv(c->pid, &local, 1, rv, (unsigned long)n, 0) : 0;
	moved(c, got, total);
	size_t have = got > 0 ? (size_t)got : 0;
	if (have < total) {
		int k = 0;
		for (size_t at = 0; at + rv[k].iov_len <= have; k++)
			at += rv[k].iov_len;
		uint64_t from = (uint64_t)(uintptr_t)rv[k].iov_base, end = from + rv[k].iov_len;
		while (from < end) {
			size_t page = (size_t)(4096 - (from & 4095));
			size_t chunk = end - from < page ? (size_t)(end - from) : page;
			if (peek(c, buf + have, from, chunk) != 0)
				break;
			have += chunk;
			from += chunk;
		}
	}
	if (total && !have)
		return -EFAULT;
	*len = have;
	*out = buf;
	return 0;
}

static long result(long r)
{
	return r < 0 ? -errno : r;
}

/* The caller's user, groups and umask, if this process may act for it:
 * its umask taken into this thread. */
static void split(struct call *c, const char *why);

enum { LABEL_MAX = 1024 };

/* The supervisor's own groups, capabilities and security label, read once
 * at its start (it never changes them): a read of a /proc status costs
 * ~15 us. */
static struct {
	char groups[1024], caps[64], label[LABEL_MAX];
	bool known;
} me;

/*
 * The security label of task id ("self" or a thread's number) as a Linux
 * security module sees it (/proc/ID/attr/current: AppArmor's profile,
 * SELinux's context, Smack's label) into out: "" where no module gives
 * one (EINVAL: this machine's case). false if it cannot be read whole.
 */
static bool label_of(const char *id, char out[LABEL_MAX])
{
	const char *attr = TDAX_TEST_ENV("LSM_ATTR"); /* test aid: another file of /proc/ID */
	char path[96];
	snprintf(path, sizeof(path), "/proc/%s/%s", id, attr ? attr : "attr/current");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, out, LABEL_MAX - 1) : -1;
	int err = errno;
	if (fd >= 0)
		close(fd);
	out[n > 0 ? n : 0] = '\0';
	return (n >= 0 && n < LABEL_MAX - 1) || (n < 0 && err == EINVAL);
}

static void know_myself(void)
{
	const char *keys[] = { "Groups:", "CapEff:" };
	char *vals[] = { me.groups, me.caps };
	size_t lens[] = { sizeof(me.groups), sizeof(me.caps) };
	me.known = proc_lines("/proc/self/status", keys, vals, lens, 2) == 0 && label_of("self", me.label);
}

static bool may_act_for(struct call *c)
{
	char path[64], uid[128], gid[128], groups[1024], mask[32], caps[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)c->pid);
	const char *keys[] = { "Uid:", "Gid:", "Groups:", "Umask:", "CapEff:" };
	char *vals[] = { uid, gid, groups, mask, caps };
	size_t lens[] = { sizeof(uid), sizeof(gid), sizeof(groups), sizeof(mask), sizeof(caps) };
	if (!me.known || proc_lines(path, keys, vals, lens, 5) != 0)
		return false;
	char want_uid[128], want_gid[128];
	snprintf(want_uid, sizeof(want_uid), "%u\t%u\t%u\t%u", my_uid, my_uid, my_uid, my_uid);
	snprintf(want_gid, sizeof(want_gid), "%u\t%u\t%u\t%u", my_gid, my_gid, my_gid, my_gid);
	if (strcmp(uid, want_uid) || strcmp(gid, want_gid) || strcmp(groups, me.groups))
		return false;
	/* The same user with other capabilities (a root service that dropped
	 * some, a binary with file capabilities): what the supervisor may do
	 * for it is not what it may do itself. Left to the kernel. */
	if (strcmp(caps, me.caps)) {
		split(c, "capabilities other than the supervisor's");
		return false;
	}
	/* Confined otherwise (an AppArmor profile, an SELinux domain): the
	 * supervisor's opens would not be. Left to the kernel too. */
	char id[16], label[LABEL_MAX];
	snprintf(id, sizeof(id), "%d", (int)c->pid);
	bool readable = label_of(id, label);
	if (!readable || strcmp(label, me.label)) {
		split(c, readable ? "a security label (LSM) other than the supervisor's"
				  : "its security label (/proc/PID/attr/current) cannot be read");
		return false;
	}
	umask((mode_t)strtoul(mask, NULL, 8));
	return true;
}

/* A directory descriptor for the caller's dirfd (AT_FDCWD: its working
 * directory) as this process can use it; -1 with errno. */
static int their_dir(struct call *c, int i, int dirfd, const char *path)
{
	if (path[0] == '/')
		return AT_FDCWD;
	if (dirfd != AT_FDCWD) {
		struct borrowed *b = take(c, i, dirfd);
		return b ? b->fd : -1;
	}
	char cwd[64];
	snprintf(cwd, sizeof(cwd), "/proc/%d/cwd", (int)c->pid);
	c->dirs[i] = open(cwd, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return c->dirs[i];
}

/* A free number at the base or above for a file of p's (under lock): from
 * the top of its RLIMIT_NOFILE (at most 65536: the kernel's table grows to
 * the highest number) down, one neither kept here nor open there; -1 if
 * none (the limit is at the base or below). */
static int free_number(struct proc *p)
{
	struct rlimit rl;
	if (prlimit(p->tgid, RLIMIT_NOFILE, NULL, &rl) != 0)
		return -1;
	int top = rl.rlim_cur < 65536 ? (int)rl.rlim_cur : 65536;
	if (p->next < TDAX_INTERCEPT_FD_BASE || p->next >= top)
		p->next = top - 1;
	for (int tries = top - TDAX_INTERCEPT_FD_BASE; tries > 0; tries--) {
		int n = p->next--;
		if (p->next < TDAX_INTERCEPT_FD_BASE)
			p->next = top - 1;
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)p->tgid, n);
		if ((n >= p->nfds || !p->fds[n]) && access(path, F_OK) != 0 && errno == ENOENT)
			return n;
	}
	return -1;
}

/* The type (S_IFMT) of fd's file if it lies on a file system tdax has
 * business on (a file on tmpfs, whose syncs cost nothing, is the kernel's:
 * trapping its writes cost etcd on tmpfs a fifth of its puts), 0 if on
 * another; -1 if it cannot be looked at. */
static int managed_type(int fd)
{
	struct stat st;
	struct statfs sf;
	if (fstat(fd, &st) != 0 || fstatfs(fd, &sf) != 0)
		return -1;
	return tdax_fs_unmanaged((long)sf.f_type) ? 0 : (int)(st.st_mode & S_IFMT);
}

/* Install mine in the caller: a managed file at a free number at the base
 * or above (kept: the caller's descriptor there, under the filter), any
 * other, or a file there is no such number for (its writes will be
 * unseen), at the lowest free number, not kept. The number, or -errno. */
static long install(struct call *c, int mine, unsigned flags, int at)
{
	struct seccomp_notif_addfd add = { .id = c->req->id, .srcfd = (unsigned)mine, .newfd_flags = flags };
	pthread_mutex_lock(&lock);
	bool ours = c->p->tgid == c->tgid && managed_type(mine) == S_IFREG; /* a file tdax manages */
	int n = at >= 0 ? at : ours ? free_number(c->p) : -1;
	if (n >= 0) {
		add.flags = SECCOMP_ADDFD_FLAG_SETFD;
		add.newfd = (unsigned)n;
	} else if (ours) {
		unseen(mine);
		ours = false;
	}
	long theirs = ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
	if (theirs < 0)
		theirs = -errno;
	if (theirs >= 0 && ours)
		keep(c->p, (int)theirs, mine); /* before the caller learns the number */
	else
		close(mine);
	pthread_mutex_unlock(&lock);
	return theirs;
}

/*
 * Open here, the open_how's way (how) or by a handle (h), never waiting:
 * a FIFO without a reader (a shell's redirection) would hold a server
 * until one came -- and that reader's own trapped calls would wait for the
 * server. So O_NONBLOCK is added (*added), the open of a file with
 * another's lease (EWOULDBLOCK: its break has begun) made again waiting
 * for the break. The descriptor, or -1 with errno.
 */
static int open_here(int dir, const char *path, struct open_how *how, struct file_handle *h, bool *added)
{
	int flags = (int)how->flags;
	for (*added = !(flags & O_NONBLOCK);; *added = false) {
		how->flags = (uint64_t)(unsigned)(*added ? flags | O_NONBLOCK : flags);
		int fd = h ? open_by_handle_at(dir, h, (int)how->flags)
			   : (int)syscall(SYS_openat2, dir, path, how, sizeof(*how));
		if (fd >= 0 || errno != EWOULDBLOCK || !*added)
			return fd;
	}
}

/* The result of open_here (fd, or -1 and errno), installed in the caller;
 * false to let the kernel make the open: one that would wait (ENXIO: it
 * waits in the caller, as without tdax), or of a file of /proc, which
 * means the process that opens it (a symbolic link to /proc/self). */
static bool opened(struct call *c, int fd, bool added, int flags, long *r)
{
	struct statfs sf;
	if (fd < 0 && errno == ENXIO && added)
		return false;
	if (fd < 0)
		return (*r = -errno), true;
	if (fstatfs(fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC) {
		close(fd);
		return false;
	}
	if (added && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
		*r = -errno;
		close(fd);
		return true;
	}
	*r = install(c, fd, (unsigned)(flags & O_CLOEXEC), -1);
	return true;
}

/* An open for writing, creating or truncating: made here (through the
 * hooks), installed in the caller. The number, or -errno. */
static bool open_for(struct call *c, int dirfd, uint64_t path_at, int flags, mode_t mode, long *r)
{
	char path[PATH_MAX];
	if ((*r = peek_path(c, path_at, path)) != 0)
		return true;
	int dir = their_dir(c, 0, dirfd, path);
	if (dir == -1)
		return (*r = -errno), true;
	/* Through a magic link (a /proc/PID/fd/N, cwd or root) only where the
	 * path names a process by its number (the caller's own: their_path):
	 * another way there -- a symbolic link to /dev/stdout, /proc//self --
	 * would reach the supervisor's. Such an open goes to the kernel, where
	 * it reaches the caller's, and nothing is followed from then on; one
	 * that fails so for another reason (a loop) fails there the same. The
	 * flags and mode are openat's, as it passes them on (openat2 refuses
	 * what openat drops: unknown flags, a mode without a creation). */
	bool creates = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE, added;
	struct open_how how = { .flags = (uint64_t)(unsigned)((flags | O_CLOEXEC) & OPENAT_FLAGS),
				.mode = creates ? mode & 07777 : 0,
				.resolve = strncmp(path, "/proc/", 6) || path[6] < '0' || path[6] > '9'
					   ? RESOLVE_NO_MAGICLINKS : 0 };
	int fd = open_here(dir, path, &how, NULL, &added);
	if (fd < 0 && errno == ELOOP && how.resolve) {
		int there = openat(dir, path, O_PATH | O_CLOEXEC | (flags & O_NOFOLLOW));
		if (there >= 0) {
			close(there);
			not_followed(c, "an open through a magic link");
		}
		return false;
	}
	return opened(c, fd, added, flags, r);
}

/* The caller passes its descriptor fd on: the receiver gets it at a low
 * number, where writes through it are unseen, so the file's syncs become
 * real. (Any number: a low one's file may have been placed in the sender's
 * parent.) */
static void passed_on(struct call *c, int fd)
{
	struct borrowed *b = take(c, 0, fd);
	if (b && b->file)
		unseen(b->fd);
	give_back(c, 0);
}

/* The descriptors a message at msg_at (a struct msghdr of the caller's)
 * passes (SCM_RIGHTS), passed_on; 0, or -ENOBUFS for a control buffer the
 * kernel would refuse too (above its optmem_max; the call then fails as it
 * would have). A message that cannot be read goes to the kernel, which
 * fails it the same way. */
static long passed_in(struct call *c, uint64_t msg_at)
{
	enum { MAX_CONTROL = 1 << 20 };
	struct msghdr m;
	if (peek(c, &m, msg_at, sizeof(m)) != 0 || !m.msg_control || m.msg_controllen < sizeof(struct cmsghdr))
		return 0;
	if (m.msg_controllen > MAX_CONTROL)
		return -ENOBUFS;
	char *ctl = buffer(m.msg_controllen);
	if (!ctl || peek(c, ctl, (uint64_t)(uintptr_t)m.msg_control, m.msg_controllen) != 0)
		return 0;
	m.msg_control = ctl;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		const unsigned char *at = CMSG_DATA(h), *end = (const unsigned char *)h + h->cmsg_len;
		if (end > (const unsigned char *)ctl + m.msg_controllen)
			end = (const unsigned char *)ctl + m.msg_controllen;
		for (int fd; at + sizeof(fd) <= end; at += sizeof(fd)) {
			memcpy(&fd, at, sizeof(fd));
			passed_on(c, fd);
		}
	}
	return 0;
}

/* Nothing of the caller's process is made here from now on (why: its
 * split), and nothing followed (not_followed). */
static void split(struct call *c, const char *why)
{
	pthread_mutex_lock(&lock);
	if (c->p->tgid == c->tgid)
		c->p->split = why;
	pthread_mutex_unlock(&lock);
	not_followed(c, why);
}

/*
 * An open for writing the supervisor may not make (another user or groups:
 * may_act_for) goes to the kernel, and the descriptor it gets is a low
 * number, its writes unseen -- harmless for a file nobody else's sync is
 * answered for, not for one tdax keeps: a served process's light sync
 * would not cover them (another writer's bytes, which a sync of the file
 * promises too). Does the open reach such a file -- a regular one, or one
 * it would create, on a file system tdax manages? Looked at here without
 * opening it (O_PATH); in doubt, yes.
 */
static bool opens_a_kept_file(struct call *c, int dirfd, uint64_t path_at, int flags)
{
	char path[PATH_MAX];
	if (peek_path(c, path_at, path) != 0)
		return false; /* the kernel fails it */
	int dir = their_dir(c, 0, dirfd, path);
	if (dir == -1)
		return true;
	int fd = openat(dir, path, O_PATH | O_CLOEXEC | (flags & O_NOFOLLOW));
	bool made = fd < 0 && errno == ENOENT && (flags & O_CREAT);
	if (made) {
		char *slash = strrchr(path, '/'); /* the directory it would be made in */
		if (slash)
			slash[slash == path] = '\0';
		fd = openat(dir, slash ? path : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	if (fd < 0)
		return errno != ENOENT && errno != ENOTDIR;
	int type = managed_type(fd);
	close(fd);
	return type < 0 || type == (made ? S_IFDIR : S_IFREG);
}

/* Make the call: its result or -errno into *r; false to let the kernel
 * make it instead. */
static bool make(struct call *c, long *r)
{
	uint64_t *a = c->a;
	int nr = c->req->data.nr;
	struct borrowed *b = NULL, *b2 = NULL;
	char path[PATH_MAX], path2[PATH_MAX];
	size_t len;
	char *buf;
	switch (nr) {
	case SYS_write: case SYS_pwrite64: case SYS_writev: case SYS_pwritev: case SYS_pwritev2: {
		if (!(b = take(c, 0, (int)a[0])))
			return errno != EBADF ? false : (*r = -EBADF, true);
		if (!b->file)
			return false;
		/* A write larger than the supervisor's buffer (MAX_WRITE) is
		 * made a piece at a time, as whole as the kernel makes it: a
		 * short count only where the kernel's would be short. */
		bool vec = nr != SYS_write && nr != SYS_pwrite64;
		size_t done = 0, whole;
		for (;;) {
			len = vec ? 0 : (size_t)a[2];
			long e = gather(c, a[1], &len, vec ? (int)a[2] : -1, done, &whole, &buf);
			/* (pwritev2 at -1: at the file's position, as write) */
			off_t at = (off_t)a[3] == -1 && nr == SYS_pwritev2 ? -1 : (off_t)a[3] + (off_t)done;
			ssize_t w = -1;
			if (e == 0 && (nr == SYS_write || nr == SYS_writev))
				w = write(b->fd, buf, len);
			else if (e == 0 && nr == SYS_pwrite64)
				w = pwrite(b->fd, buf, len, at);
			else if (e == 0) {
				struct iovec one = { buf, len };
				w = pwritev2(b->fd, &one, 1, at, nr == SYS_pwritev2 ? (int)a[5] : 0);
			}
			if (e != 0 || w < 0) {
				c->partly = done > 0; /* (a short count, as the kernel's may be) */
				*r = done ? (long)done : e ? e : -errno;
				return true;
			}
			done += (size_t)w;
			if ((size_t)w < len || done >= whole)
				break;
		}
		*r = (long)done;
		return true;
	}
	case SYS_fsync: case SYS_fdatasync: case SYS_ftruncate: case SYS_fallocate:
		if (!(b = take(c, 0, (int)a[0])))
			return errno != EBADF ? false : (*r = -EBADF, true);
		if (!b->file)
			return false;
		*r = result(nr == SYS_fsync ? fsync(b->fd) : nr == SYS_fdatasync ? fdatasync(b->fd)
			    : nr == SYS_ftruncate ? ftruncate(b->fd, (off_t)a[1])
			    : fallocate(b->fd, (int)a[1], (off_t)a[2], (off_t)a[3]));
		return true;
	case SYS_copy_file_range: case SYS_sendfile: case SYS_splice: {
		/* (in, off_in*, out, off_out*) for copy_file_range and splice;
		 * (out, in, off*) for sendfile. */
		bool sf = nr == SYS_sendfile;
		int in = (int)(sf ? a[1] : a[0]), out = (int)(sf ? a[0] : a[2]);
		uint64_t in_at = sf ? a[2] : a[1], out_at = sf ? 0 : a[3];
		if (!(b = take(c, 0, in)) || !(b2 = take(c, 1, out)))
			return errno != EBADF ? false : (*r = -EBADF, true);
		if (!b2->file)
			return false;
		loff_t oi, oo;
		if ((in_at && (*r = peek(c, &oi, in_at, sizeof(oi)))) ||
		    (out_at && (*r = peek(c, &oo, out_at, sizeof(oo)))))
			return true;
		loff_t *pi = in_at ? &oi : NULL, *po = out_at ? &oo : NULL;
		if (nr == SYS_copy_file_range)
			*r = result(copy_file_range(b->fd, pi, b2->fd, po, (size_t)a[4], (unsigned)a[5]));
		else if (sf)
			*r = result(sendfile(b2->fd, b->fd, pi, (size_t)a[3]));
		else
			*r = result(splice(b->fd, pi, b2->fd, po, (size_t)a[4], (unsigned)a[5]));
		if (*r >= 0 && ((pi && poke(c, pi, in_at, sizeof(oi))) || (po && poke(c, po, out_at, sizeof(oo)))))
			*r = -EFAULT;
		return true;
	}
	case SYS_ioctl: { /* the filter's: one that changes the file's bytes */
		int changes = tdax_fs_ioctl_changes((unsigned long)a[1]);
		if (changes) {
			/* A file system's own (fsioctl.h): the files it changes
			 * off the log first (unseen), then the kernel makes it. */
			int32_t other;
			if ((b = take(c, 0, (int)a[0])) && b->file)
				unseen(b->fd);
			if (changes == 2 && peek(c, &other, a[2], sizeof(other)) == 0 && (b2 = take(c, 1, other)) &&
			    b2->file)
				unseen(b2->fd);
			return false;
		}
		/* FICLONE or FICLONERANGE: as a copy */
		bool range = (unsigned)a[1] == FICLONERANGE;
		struct file_clone_range cr;
		if (range && (*r = peek(c, &cr, a[2], sizeof(cr))) != 0)
			return true;
		if (!(b = take(c, 0, (int)a[0])) || !(b2 = take(c, 1, range ? (int)cr.src_fd : (int)a[2])))
			return errno != EBADF ? false : (*r = -EBADF, true);
		if (!b->file)
			return false;
		cr.src_fd = b2->fd;
		*r = result(range ? ioctl(b->fd, FICLONERANGE, &cr) : ioctl(b->fd, FICLONE, b2->fd));
		return true;
	}
	case SYS_rename: case SYS_renameat: case SYS_renameat2: {
		if (!may_act_for(c))
			return false;
		bool at = nr != SYS_rename;
		if ((*r = peek_path(c, at ? a[1] : a[0], path)) || (*r = peek_path(c, at ? a[3] : a[1], path2)))
			return true;
		int d1 = their_dir(c, 0, at ? (int)a[0] : AT_FDCWD, path);
		int d2 = d1 == -1 ? -1 : their_dir(c, 1, at ? (int)a[2] : AT_FDCWD, path2);
		if (d2 == -1)
			return (*r = -errno), true;
		*r = result(renameat2(d1, path, d2, path2, nr == SYS_renameat2 ? (unsigned)a[4] : 0));
		return true;
	}
	case SYS_unlink: case SYS_unlinkat: case SYS_truncate: {
		if (!may_act_for(c))
			return false;
		if ((*r = peek_path(c, nr == SYS_unlinkat ? a[1] : a[0], path)))
			return true;
		if (nr != SYS_truncate) {
			int d = their_dir(c, 0, nr == SYS_unlinkat ? (int)a[0] : AT_FDCWD, path);
			*r = d == -1 ? -errno : result(unlinkat(d, path, nr == SYS_unlinkat ? (int)a[2] : 0));
			return true;
		}
		/* By name, as the hook records it: absolute. */
		char cwd[64], abs[PATH_MAX];
		ssize_t n = 0;
		if (path[0] != '/') {
			snprintf(cwd, sizeof(cwd), "/proc/%d/cwd", (int)c->pid);
			if ((n = readlink(cwd, abs, sizeof(abs) - 1)) < 0)
				return (*r = -errno), true;
			abs[n++] = '/';
		}
		if ((size_t)snprintf(abs + n, sizeof(abs) - (size_t)n, "%s", path) >= sizeof(abs) - (size_t)n)
			return (*r = -ENAMETOOLONG), true;
		*r = result(truncate(abs, (off_t)a[1]));
		return true;
	}
	case SYS_open_by_handle_at: {
		/* An open for writing by a file handle (the filter's): made here
		 * too, for a caller with the supervisor's capabilities (the
		 * kernel asks for CAP_DAC_READ_SEARCH: may_act_for); another's
		 * is the kernel's, its writes unseen, as in opens_a_kept_file. */
		if (!may_act_for(c)) {
			split(c, "an open by handle by another user or groups than the supervisor's, made "
				 "by the kernel: its writes are unseen");
			return false;
		}
		union {
			struct file_handle h;
			char bytes[sizeof(struct file_handle) + MAX_HANDLE_SZ];
		} fh;
		if ((*r = peek(c, &fh.h, a[1], sizeof(fh.h))) != 0)
			return true;
		if (fh.h.handle_bytes > MAX_HANDLE_SZ)
			return (*r = -EINVAL), true;
		if ((*r = peek(c, &fh.h, a[1], sizeof(fh.h) + fh.h.handle_bytes)) != 0)
			return true;
		int dir = their_dir(c, 0, (int)a[0], "");
		struct open_how how = { .flags = (uint64_t)(unsigned)((int)a[2] | O_CLOEXEC) };
		bool added = false;
		int fd = dir == -1 ? -1 : open_here(dir, NULL, &how, &fh.h, &added);
		return opened(c, fd, added, (int)a[2], r);
	}
	case SYS_open: case SYS_openat: case SYS_creat: {
		int dirfd = nr == SYS_openat ? (int)a[0] : AT_FDCWD;
		uint64_t at = nr == SYS_openat ? a[1] : a[0];
		int flags = nr == SYS_creat ? O_CREAT | O_WRONLY | O_TRUNC : (int)(nr == SYS_openat ? a[2] : a[1]);
		mode_t mode = (mode_t)(nr == SYS_openat ? a[3] : a[nr == SYS_creat ? 1 : 2]);
		if (may_act_for(c))
			return open_for(c, dirfd, at, flags, mode, r);
		if (opens_a_kept_file(c, dirfd, at, flags))
			split(c, "an open for writing by another user or groups than the supervisor's, "
				 "made by the kernel: its writes are unseen");
		return false;
	}
	case SYS_dup2: case SYS_dup3: {
		int from = (int)a[0], to = (int)a[1];
		pthread_mutex_lock(&lock);
		if (c->p->tgid == c->tgid && to >= TDAX_INTERCEPT_FD_BASE && from != to)
			drop_range(c->p, (unsigned)to, (unsigned)to);
		pthread_mutex_unlock(&lock);
		if (from == to || from < TDAX_INTERCEPT_FD_BASE || !(b = take(c, 0, from)) || !b->file)
			return false;
		if (to < TDAX_INTERCEPT_FD_BASE) { /* a placed file reached from below */
			unseen(b->fd);
			return false;
		}
		int mine = dup(b->fd); /* through the hook: the same open file, managed */
		if (mine < 0)
			return false;
		*r = install(c, mine, nr == SYS_dup3 && (a[2] & O_CLOEXEC) ? O_CLOEXEC : 0, to);
		return true;
	}
	case SYS_fcntl:
		if ((int)a[1] == F_SETFL) {
			/* The open file's flags (O_APPEND: where a pwrite lands),
			 * set here so that the hooks take them up. */
			if (!(b = take(c, 0, (int)a[0])))
				return errno != EBADF ? false : (*r = -EBADF, true);
			*r = result(fcntl(b->fd, F_SETFL, (int)a[2]));
			return true;
		}
		__attribute__((fallthrough)); /* F_DUPFD, F_DUPFD_CLOEXEC */
	case SYS_dup:
		/* A duplicate at the lowest free number (or F_DUPFD's), below
		 * the base: writes through it are unseen. */
		if ((b = take(c, 0, (int)a[0])) && b->file)
			unseen(b->fd);
		return false;
	case SYS_close: case SYS_close_range: case SYS_execve: case SYS_execveat:
		if (nr == SYS_close_range && (a[2] & CLOSE_RANGE_UNSHARE)) {
			/* The caller's own copy of the table, the range closed there */
			split(c, "a thread with a descriptor table of its own");
			return false;
		}
		pthread_mutex_lock(&lock);
		if (c->p->tgid != c->tgid)
			; /* the caller was killed in its call: nothing of its to drop */
		else if (nr == SYS_close)
			drop_range(c->p, (unsigned)a[0], (unsigned)a[0]);
		else if (nr == SYS_close_range && !(a[2] & CLOSE_RANGE_CLOEXEC))
			drop_range(c->p, (unsigned)a[0], (unsigned)a[1]);
		else if (nr != SYS_close_range)
			drop_range(c->p, 0, UINT32_MAX); /* which were close-on-exec is not known */
		pthread_mutex_unlock(&lock);
		return false;
	case SYS_mmap:
		/* A shared mapping of a placed file: a writable one's writes
		 * are unseen; a read-only one is a view. */
		if ((b = take(c, 0, (int)a[4])) && b->file) {
			if ((a[2] & PROT_WRITE) || (a[3] & (MAP_FIXED | MAP_FIXED_NOREPLACE)))
				unseen(b->fd);
			else
				viewed(b);
		}
		return false;
	case SYS_mprotect: case SYS_pkey_mprotect: /* (with PROT_WRITE) */
		if (any_view && reaches_shared(c->tgid, a[0], a[1]))
			views_writable();
		return false;
	case SYS_sendmsg: case SYS_sendmmsg:
		/* A file sent over a Unix socket (SCM_RIGHTS). Sent by the
		 * kernel, after this (a thread that rewrites the message
		 * meanwhile only cheats itself). */
		for (uint64_t i = 0, n = nr == SYS_sendmsg ? 1 : a[2] < 1024 ? a[2] : 1024; i < n; i++) {
			uint64_t at = nr == SYS_sendmsg ? a[1] : a[1] + i * sizeof(struct mmsghdr);
			if ((*r = passed_in(c, at)) != 0)
				return true;
		}
		return false;
	case SYS_pidfd_getfd: {
		/* Another process's descriptor, taken to a low number here. */
		if (!(b = take(c, 0, (int)a[0])))
			return false;
		unseen_theirs(b->fd, (int)a[1]);
		give_back(c, 0);
		return false;
	}
	case SYS_unshare: case SYS_clone: case SYS_clone3: {
		/* A thread with a descriptor table of its own (the filter's
		 * unshare and clone; any clone3): a number borrowed from the
		 * process (pidfd_getfd) may be another file than the one the
		 * caller means. A mount namespace of its own (unshare): a path
		 * may be another file. (A clone into a new namespace makes a
		 * process, seen so at its first call: proc_of.) */
		uint64_t flags = a[0];
		if (nr == SYS_clone3 && (a[1] < sizeof(flags) || peek(c, &flags, a[0], sizeof(flags)) != 0))
			return false; /* the kernel fails it */
		if (nr == SYS_unshare && (flags & CLONE_NEWNS))
			split(c, "a root or mount namespace of its own");
		else if (nr == SYS_unshare || ((flags & CLONE_THREAD) && !(flags & CLONE_FILES)))
			split(c, "a thread with a descriptor table of its own");
		return false;
	}
	case SYS_setrlimit: case SYS_prlimit64: {
		/* A new file size limit (the filter's): the supervisor's writes
		 * would keep to the old one. The process it is for is left to
		 * the kernel; another's (prlimit64 of a pid) too, if seen. */
		pid_t to = nr == SYS_prlimit64 ? (pid_t)a[0] : 0, tg = 0;
		if (to && to != c->tgid && to != c->pid) {
			pthread_mutex_lock(&lock);
			struct proc *other = proc_of(to, &tg);
			if (other)
				other->split = "a file size limit of its own";
			pthread_mutex_unlock(&lock);
			not_followed(c, "a file size limit of its own");
		} else {
			split(c, "a file size limit of its own");
		}
		return false;
	}
	case SYS_landlock_restrict_self:
		/* A sandbox the supervisor is not in, for this process and every
		 * one it starts: no process seen from now on is served either
		 * (which one descends from this one is not known here). */
		landlocked = true;
		split(c, "a Landlock sandbox");
		return false;
	case SYS_chroot: case SYS_pivot_root: case SYS_setns:
		/* (setns: into a mount namespace, or one of a kind not said) */
		if (nr != SYS_setns || !a[1] || (a[1] & CLONE_NEWNS))
			split(c, "a root or mount namespace of its own");
		return false;
	case SYS_io_submit: {
		/* The kernel's AIO (io_submit(ctx, n, iocbs)): writes the
		 * supervisor would not see. A control block that writes a
		 * placed descriptor makes its file's syncs real first, up to the
		 * first one the kernel could not read either. Read before the
		 * kernel reads them: a thread that rewrites one meanwhile only
		 * cheats itself. */
		for (uint64_t i = 0, n = a[1] >> 63 ? 0 : a[1]; i < n; i++) {
			uint64_t at;
			struct iocb cb;
			if (peek(c, &at, a[2] + i * sizeof(at), sizeof(at)) != 0 || !at ||
			    peek(c, &cb, at, sizeof(cb)) != 0)
				break;
			if ((cb.aio_lio_opcode == IOCB_CMD_PWRITE || cb.aio_lio_opcode == IOCB_CMD_PWRITEV) &&
			    cb.aio_fildes >= TDAX_INTERCEPT_FD_BASE && (b = take(c, 0, (int)cb.aio_fildes)) && b->file)
				unseen(b->fd);
			give_back(c, 0);
		}
		return false;
	}
	case SYS_sync: case SYS_syncfs:
		/* The supervisor's own sync() checkpoints every file with
		 * records first (its hook, checkpoint.h); then the program's
		 * call, as it was. */
		sync();
		return false;
	case SYS_io_uring_setup: {
		/* Asynchronous writes the supervisor cannot follow: the hooks
		 * make every sync real from now on. */
		char params[120] = { 0 };
		long ring = syscall(SYS_io_uring_setup, 1, params);
		if (ring >= 0)
			close((int)ring);
		return false;
	}
	}
	return false;
}

/* The descriptor a trapped call writes through, maps or duplicates: a
 * placed one (or -1). */
static int placed_arg(const struct call *c)
{
	switch (c->req->data.nr) {
	case SYS_mmap:
		return (int)c->a[4];
	case SYS_copy_file_range: case SYS_splice:
		return (int)c->a[2];
	case SYS_write: case SYS_pwrite64: case SYS_writev: case SYS_pwritev: case SYS_pwritev2:
	case SYS_fsync: case SYS_fdatasync: case SYS_ftruncate: case SYS_fallocate: case SYS_sendfile:
	case SYS_dup: case SYS_dup2: case SYS_dup3: case SYS_fcntl:
		return (int)c->a[0] >= TDAX_INTERCEPT_FD_BASE ? (int)c->a[0] : -1;
	}
	return -1;
}

/*
 * Calls the supervisor cannot follow: one of a process it cannot tell
 * (MAX_PROCS live ones, its /proc entry unreadable, no pidfd), or on a
 * descriptor it cannot borrow (out of descriptors or memory). The call
 * goes to the kernel as it was made, where its writes -- and a duplicate's
 * or a mapping's later ones -- are unseen. So the supervisor goes blind,
 * once and for good: every file it keeps gets real syncs now, and every
 * file it keeps from then on too (keep); and the file of the call's own
 * descriptor, which may be kept nowhere (the process that placed it closed
 * it), if it can still be had. Said on stderr once: the command runs on,
 * its syncs at its disk's pace.
 */
static void not_followed(struct call *c, const char *why)
{
	pthread_mutex_lock(&lock);
	if (!blind) {
		blind = true;
		fprintf(stderr, "tdax: the supervisor cannot follow process %d (%s): every file's syncs "
				"are real from now on\n", (int)(c->tgid ? c->tgid : c->pid), why);
		for (int i = 0; i < nprocs; i++)
			for (int n = 0; procs[i]->tgid && n < procs[i]->nfds; n++)
				if (procs[i]->fds[n] && procs[i]->fds[n]->file)
					unseen(procs[i]->fds[n]->fd);
	}
	pthread_mutex_unlock(&lock);
	int fd = placed_arg(c);
	if (fd < 0)
		return;
	/* PIDFD_THREAD (Linux 6.9): the caller's thread, its group unknown. */
	int pidfd = (int)syscall(SYS_pidfd_open, c->tgid ? c->tgid : c->pid, c->tgid ? 0 : O_EXCL);
	if (pidfd >= 0) {
		unseen_theirs(pidfd, fd);
		close(pidfd);
	}
}

static void serve(struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	struct call c = { .req = req, .pid = (pid_t)req->pid, .a = (uint64_t *)req->data.args,
			  .dirs = { -1, -1 } };
	long r = 0;
	bool made = false;
	pthread_mutex_lock(&lock);
	c.p = proc_of(c.pid, &c.tgid);
	const char *why = c.p ? c.p->split
			  : !c.tgid ? "its /proc entry cannot be read"
			  : nprocs >= max_procs ? "the supervisor's table of processes is full" : strerror(errno);
	bool followed = c.p && !c.p->split;
	pthread_mutex_unlock(&lock);
	/* The thread is still the caller (not a later one with its number). */
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) != 0)
		; /* gone: its call with it */
	else if (followed)
		made = make(&c, &r);
	else
		not_followed(&c, why);
	if (c.unreadable) { /* make reads before it acts, but for a big write's later pieces */
		split(&c, "its memory cannot be read (it is not dumpable)");
		made = c.partly; /* what was written stays written, once */
	}
	pthread_mutex_lock(&lock);
	let_go(c.held[0]);
	let_go(c.held[1]);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < 2; i++)
		if (c.dirs[i] >= 0)
			close(c.dirs[i]);
	/* A write past the file size limit: the kernel signals the writer
	 * (the supervisor ignores SIGXFSZ), not just EFBIG. */
	if (made && r == -EFBIG && fsize_limited)
		syscall(SYS_tgkill, c.tgid ? c.tgid : c.pid, c.pid, SIGXFSZ);
	*resp = (struct seccomp_notif_resp){ .id = req->id };
	if (!made)
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	else if (r < 0)
		resp->error = (int)r;
	else
		resp->val = r;
	ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp); /* ENOENT: the caller is gone */
}

static void *server(void *arg)
{
	(void)arg;
	struct seccomp_notif_sizes sz;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) != 0 || unshare(CLONE_FS) != 0)
		return NULL;
	struct seccomp_notif *req = calloc(1, sz.seccomp_notif);
	struct seccomp_notif_resp *resp = calloc(1, sz.seccomp_notif_resp);
	for (; req && resp;) {
		memset(req, 0, sz.seccomp_notif);
		if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) != 0) {
			if (errno == EINTR || errno == ENOENT)
				continue;
			break; /* every process of the command has ended */
		}
		serve(req, resp);
	}
	free(req);
	free(resp);
	return NULL;
}

int cmd_serve_syscalls(int argc, char **argv)
{
	if (argc != 3) {
		fputs("tdax serve-syscalls: started by 'tdax run --intercept syscall' only\n", stderr);
		return EXIT_USAGE;
	}
	listener = atoi(argv[1]);
	pid_t cmd = (pid_t)atoi(argv[2]);
	fcntl(listener, F_SETFD, FD_CLOEXEC);
	/* The caller waits while a server runs: the kernel then runs the
	 * server on the caller's CPU (Linux 6.6). Without it a trapped call
	 * costs a wake-up of another CPU: ~40 us on this VM, ~5 us with it. */
	ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
	/* A descriptor of every file the command places is kept here: as much
	 * room as the limits allow (a borrow that fails is not_followed). */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	const char *cap = TDAX_TEST_ENV("SUPERVISOR_PROCS"); /* test aid: a table this small */
	if (cap && atoi(cap) > 0 && atoi(cap) < MAX_PROCS)
		max_procs = atoi(cap);
	/* (If it cannot be known, no process is taken to share it: none served.) */
	root_of("/", "/proc/self/ns/mnt", &my_root.mnt_id, &my_root.ino, &my_root.ns);
	my_uid = getuid();
	my_gid = getgid();
	know_myself();
	fsize_limited = getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
	signal(SIGXFSZ, SIG_IGN); /* a write past it fails here: EFBIG, for the caller */
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* The signals the wait takes stay blocked in every thread (the
	 * mask came through the exec). */
	for (int i = 0; i < SERVERS; i++) {
		pthread_t t;
		if (pthread_create(&t, &attr, server, NULL) != 0 && i == 0) {
			fprintf(stderr, "tdax: cannot start the supervisor's threads: %s\n", strerror(errno));
			kill(cmd, SIGKILL);
		}
	}
	return tdax_supervise_wait(cmd, NULL);
}
