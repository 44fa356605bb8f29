/*
 * interpose_fd -- the hooks that keep the descriptor table true (fdtable.h):
 * every call that closes a descriptor number or hands one out, and the
 * calls that start I/O tdax cannot follow (POSIX aio, libaio, io_uring),
 * which send the files they touch to the kernel's sync for good.
 *
 * A call that only makes a new descriptor forgets the number's entry and
 * is otherwise the real call: errno and result untouched.
 */
#define _GNU_SOURCE
#include <aio.h>
#include <sched.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "preload/fault.h"
#include "preload/manage.h"
#include "preload/mode.h"
#include "preload/promoted.h"
#include "preload/fdtable.h"
#include "preload/interpose.h"
#include "preload/lease.h"
#include "preload/start.h"
#include "preload/state.h"
#include "preload/writeback.h"

static int fresh(int fd)
{
	tdax_fd_forget(fd);
	return fd;
}

/* ---- closing -------------------------------------------------------- */

EXPORT int close(int fd)
{
	if (tdax_ownfd_is(fd)) {
		errno = EBADF; /* not open, as far as the application knows */
		return -1;
	}
	tdax_promoted_settle_fd(fd);
	tdax_lease_drop(fd);
	tdax_fd_forget(fd);
	tdax_inherited_closed(fd);
	return TDAX_REAL(close)(fd);
}

/* (__close, __dup2, __fcntl, __clone, __vfork: the C library's other
 * public names of these calls, GLIBC_2.2.5.) */
EXPORT_ALIAS(__close, close);

EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	if (first > last) {
		errno = EINVAL;
		return -1;
	}
	if (flags & CLOSE_RANGE_UNSHARE)
		tdax_go_blind(); /* a table of the caller's own: as unshare(CLONE_FILES) */
	if (!(flags & CLOSE_RANGE_CLOEXEC)) {
		tdax_promoted_settle_range(first, last);
		tdax_lease_drop_range(first, last);
	}
	return tdax_ownfd_close_range(first, last, flags);
}

EXPORT void closefrom(int lowfd)
{
	if (lowfd < 0)
		lowfd = 0;
	tdax_promoted_settle_range((unsigned)lowfd, ~0u);
	tdax_lease_drop_range((unsigned)lowfd, ~0u);
	if (tdax_ownfd_close_range((unsigned)lowfd, ~0u, 0) != 0) {
		/* No close_range in this kernel: libc's way, then forget. */
		REAL(closefrom)(lowfd);
		tdax_fd_forget_range((unsigned)lowfd, ~0u);
	}
}

/* A stream closes its descriptor inside libc: forget the number first (a
 * write through it after this point is the application's race). */
EXPORT int fclose(FILE *f)
{
	if (f) {
		tdax_promoted_settle_fd(fileno(f));
		tdax_lease_drop(fileno(f));
		tdax_fd_forget(fileno(f));
	}
	return REAL(fclose)(f);
}

/* ---- duplicating ---------------------------------------------------- */

EXPORT int dup(int fd)
{
	if (tdax_ownfd_is(fd)) {
		errno = EBADF;
		return -1;
	}
	tdax_promoted_settle_fd(fd); /* a promoted file has one descriptor */
	int r = TDAX_REAL(dup)(fd);
	if (r >= 0)
		tdax_manage_dup(fd, r);
	return r;
}

EXPORT int dup2(int fd, int to)
{
	if (tdax_ownfd_is(fd)) {
		errno = EBADF;
		return -1;
	}
	tdax_ownfd_evict(to);
	tdax_promoted_settle_fd(fd);
	tdax_promoted_settle_fd(to);
	if (to != fd)
		tdax_lease_drop(to);
	int r = TDAX_REAL(dup2)(fd, to);
	if (r >= 0 && r != fd)
		tdax_manage_dup(fd, r);
	return r;
}

EXPORT_ALIAS(__dup2, dup2);

EXPORT int dup3(int fd, int to, int flags)
{
	if (tdax_ownfd_is(fd)) {
		errno = EBADF;
		return -1;
	}
	tdax_ownfd_evict(to);
	tdax_promoted_settle_fd(fd);
	tdax_promoted_settle_fd(to);
	if (to != fd)
		tdax_lease_drop(to);
	int r = TDAX_REAL(dup3)(fd, to, flags);
	if (r >= 0)
		tdax_manage_dup(fd, r);
	return r;
}

/* Does fcntl cmd change what tdax keeps of the descriptor: its number,
 * its flags, a lease or the signals of one? (Locks, the commonest, do not.) */
static bool fcntl_noted(int cmd)
{
	switch (cmd) {
	case F_DUPFD: case F_DUPFD_CLOEXEC: case F_SETFL: case F_SETLEASE: case F_SETSIG:
	case F_SETOWN: case F_SETOWN_EX:
		return true;
	}
	return false;
}

/* fd's entry takes its open file's flags (O_APPEND, O_DIRECT) again. */
static void flags_again(int fd)
{
	int fl = TDAX_REAL(fcntl)(fd, F_GETFL);
	struct tdax_fd *m = &tdax_fds[fd];
	if (fl < 0)
		return;
	m->flags = (uint16_t)(m->flags & ~(TDAX_FD_APPEND | TDAX_FD_NOLOG)) | ((fl & O_APPEND) ? TDAX_FD_APPEND : 0) |
		   ((fl & O_DIRECT) ? TDAX_FD_NOLOG : 0);
	if (m->twin_plus1) /* the twin writes as the descriptor would */
		TDAX_REAL(fcntl)(tdax_twin_fd(m->twin_plus1), F_SETFL, fl & (O_APPEND | O_DIRECT | O_NOATIME));
}

static int do_fcntl(int fd, int cmd, void *arg)
{
	if (tdax_ownfd_is(fd)) {
		errno = EBADF;
		return -1;
	}
	if (!fcntl_noted(cmd))
		return TDAX_REAL(fcntl)(fd, cmd, arg);
	tdax_promoted_settle_fd(fd); /* one descriptor, its flags, tdax's lease */
	if (cmd == F_SETLEASE || cmd == F_SETSIG || cmd == F_SETOWN || cmd == F_SETOWN_EX)
		tdax_lease_app_uses(fd); /* the application's own lease or signal: not tdax's to touch */
	int r = TDAX_REAL(fcntl)(fd, cmd, arg);
	if (r < 0 || fd < 0 || fd >= TDAX_MAX_FDS || !tdax_fds)
		return r;
	int err = errno;
	const struct tdax_fd *e = tdax_fd_get(fd);
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		tdax_manage_dup(fd, r);
		break;
	case F_SETFL:
		/* The flags are the open file's: every descriptor of the file
		 * here may share it (a dup, or a supervisor's borrowed ones). */
		for (int n = e ? tdax_fd_naming(e->dev, e->ino, 0) : -1; n >= 0; n = tdax_fd_naming(e->dev, e->ino, n + 1))
			flags_again(n);
		break;
	}
	errno = err;
	return r;
}

EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(fd, cmd, arg);
}

EXPORT_ALIAS(__fcntl, fcntl);

EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(fd, cmd, arg);
}

/* ---- calls that make a new descriptor -------------------------------- */

EXPORT int socket(int domain, int type, int proto)
{
	return fresh(REAL(socket)(domain, type, proto));
}

EXPORT int socketpair(int domain, int type, int proto, int sv[2])
{
	int r = REAL(socketpair)(domain, type, proto, sv);
	if (r == 0) {
		tdax_fd_forget(sv[0]);
		tdax_fd_forget(sv[1]);
	}
	return r;
}

EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return fresh(REAL(accept)(fd, addr, len));
}

EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	return fresh(REAL(accept4)(fd, addr, len, flags));
}

EXPORT int pipe(int fds[2])
{
	int r = REAL(pipe)(fds);
	if (r == 0) {
		tdax_fd_forget(fds[0]);
		tdax_fd_forget(fds[1]);
	}
	return r;
}

EXPORT int pipe2(int fds[2], int flags)
{
	int r = REAL(pipe2)(fds, flags);
	if (r == 0) {
		tdax_fd_forget(fds[0]);
		tdax_fd_forget(fds[1]);
	}
	return r;
}

EXPORT int eventfd(unsigned int initval, int flags)
{
	return fresh(REAL(eventfd)(initval, flags));
}

EXPORT int memfd_create(const char *name, unsigned int flags)
{
	return fresh(REAL(memfd_create)(name, flags));
}

EXPORT int epoll_create(int size)
{
	return fresh(REAL(epoll_create)(size));
}

EXPORT int epoll_create1(int flags)
{
	return fresh(REAL(epoll_create1)(flags));
}

EXPORT int timerfd_create(int clock, int flags)
{
	return fresh(REAL(timerfd_create)(clock, flags));
}

EXPORT int signalfd(int fd, const sigset_t *mask, int flags)
{
	return fresh(REAL(signalfd)(fd, mask, flags));
}

EXPORT int inotify_init(void)
{
	return fresh(REAL(inotify_init)());
}

EXPORT int inotify_init1(int flags)
{
	return fresh(REAL(inotify_init1)(flags));
}

EXPORT int posix_openpt(int flags)
{
	return fresh(REAL(posix_openpt)(flags));
}

/* Temporary files libc opens by itself: not managed (their syncs are the
 * kernel's), but their numbers must not keep an old entry. */
EXPORT int mkstemp(char *tmpl)
{
	return fresh(REAL(mkstemp)(tmpl));
}

EXPORT int mkstemp64(char *tmpl)
{
	return fresh(REAL(mkstemp)(tmpl));
}

EXPORT int mkostemp(char *tmpl, int flags)
{
	return fresh(REAL(mkostemp)(tmpl, flags));
}

EXPORT int mkostemp64(char *tmpl, int flags)
{
	return fresh(REAL(mkostemp)(tmpl, flags));
}

EXPORT int mkstemps(char *tmpl, int suffixlen)
{
	return fresh(REAL(mkstemps)(tmpl, suffixlen));
}

EXPORT int mkstemps64(char *tmpl, int suffixlen)
{
	return fresh(REAL(mkstemps)(tmpl, suffixlen));
}

EXPORT int mkostemps(char *tmpl, int suffixlen, int flags)
{
	return fresh(REAL(mkostemps)(tmpl, suffixlen, flags));
}

EXPORT int mkostemps64(char *tmpl, int suffixlen, int flags)
{
	return fresh(REAL(mkostemps)(tmpl, suffixlen, flags));
}

EXPORT FILE *tmpfile(void)
{
	FILE *f = REAL(tmpfile)();
	if (f)
		tdax_fd_forget(fileno(f));
	return f;
}

EXPORT FILE *tmpfile64(void)
{
	return tmpfile();
}

EXPORT DIR *opendir(const char *name)
{
	DIR *d = REAL(opendir)(name);
	if (d)
		tdax_fd_forget(dirfd(d));
	return d;
}

/* Call fn for each descriptor a message passes (SCM_RIGHTS). */
static void each_passed(const struct msghdr *msg, void (*fn)(int fd))
{
	if (!msg->msg_controllen)
		return;
	for (const struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR((struct msghdr *)msg, (struct cmsghdr *)c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			const int *fds = (const int *)CMSG_DATA(c);
			size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < n; i++)
				fn(fds[i]);
		}
}

/* Descriptors passed over a Unix socket are new numbers here... */
EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	ssize_t r = REAL(recvmsg)(fd, msg, flags);
	if (r >= 0)
		each_passed(msg, tdax_fd_forget);
	return r;
}

EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *timeout)
{
	int r = REAL(recvmmsg)(fd, v, n, flags, timeout);
	for (int i = 0; i < r; i++)
		each_passed(&v[i].msg_hdr, tdax_fd_forget);
	return r;
}

/* ... and the open files of those sent are another process's too. */
static void sent(int fd)
{
	tdax_promoted_settle_fd(fd);
	tdax_lease_sent(fd);
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (tdax_fds)
		each_passed(msg, sent);
	return REAL(sendmsg)(fd, msg, flags);
}

EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	for (unsigned i = 0; tdax_fds && i < n; i++)
		each_passed(&v[i].msg_hdr, sent);
	return REAL(sendmmsg)(fd, v, n, flags);
}

/* ---- asynchronous I/O ----------------------------------------------- */

/* A write tdax will not see completing: the file goes to the kernel's
 * sync path for good, before the write is submitted. */
static void async_write(int fd)
{
	const struct tdax_fd *e = tdax_managed(fd);
	if (e)
		tdax_mode_of(e)->lost_sight(fd, e, TDAX_FB_ASYNC);
}

EXPORT int aio_write(struct aiocb *cb)
{
	async_write(cb->aio_fildes);
	return REAL(aio_write)(cb);
}

EXPORT int aio_write64(struct aiocb64 *cb)
{
	async_write(cb->aio_fildes);
	return REAL(aio_write64)(cb);
}

EXPORT int lio_listio(int mode, struct aiocb *const list[], int n, struct sigevent *sev)
{
	for (int i = 0; i < n; i++)
		if (list[i] && list[i]->aio_lio_opcode == LIO_WRITE)
			async_write(list[i]->aio_fildes);
	return REAL(lio_listio)(mode, list, n, sev);
}

EXPORT int lio_listio64(int mode, struct aiocb64 *const list[], int n, struct sigevent *sev)
{
	for (int i = 0; i < n; i++)
		if (list[i] && list[i]->aio_lio_opcode == LIO_WRITE)
			async_write(list[i]->aio_fildes);
	return REAL(lio_listio64)(mode, list, n, sev);
}

/* The kernel's AIO: the writes io_submit(2) is about to submit, up to the
 * first control block the kernel could not read either (it stops there,
 * with EFAULT: tdax looks first, and never faults where it would not). */
void tdax_aio_submitting(long n, struct iocb *const *iocbs)
{
	for (long i = 0; tdax_on() && i < n; i++) {
		struct iovec at = { (void *)&iocbs[i], sizeof(iocbs[i]) };
		if (!tdax_fault_readable(&at, 1) || !iocbs[i])
			return;
		struct iovec cb = { iocbs[i], sizeof(*iocbs[i]) };
		if (!tdax_fault_readable(&cb, 1))
			return;
		if (iocbs[i]->aio_lio_opcode == IOCB_CMD_PWRITE || iocbs[i]->aio_lio_opcode == IOCB_CMD_PWRITEV)
			async_write((int)iocbs[i]->aio_fildes);
	}
}

/* libaio's io_submit, which makes the system call itself (a raw one
 * through syscall(2): interpose_syscall.c). */
int io_submit(aio_context_t ctx, long n, struct iocb **iocbs);
EXPORT int io_submit(aio_context_t ctx, long n, struct iocb **iocbs)
{
	tdax_aio_submitting(n, iocbs);
	return REAL(io_submit)(ctx, n, iocbs);
}

/*
 * io_uring: its submissions name descriptors tdax never sees, so a process
 * that sets a ring up is blind to tdax from then on: every file it has or
 * opens for writing goes to the kernel's sync path (every file it has is
 * checkpointed first: a sync submitted through the ring is the kernel's,
 * and no record older than it may be replayed over what it made durable).
 * liburing's set-up calls are caught here; a raw io_uring_setup through
 * syscall(2) in interpose_syscall.c.
 */
void tdax_go_blind(void)
{
	if (tdax_rt.blind)
		return;
	/* Before the process has attached too: a ring set up first names the
	 * files it opens later as much as any (each is then managed blind,
	 * manage.c); there is nothing managed yet to let go. */
	__atomic_store_n(&tdax_rt.blind, true, __ATOMIC_SEQ_CST); /* (before the entries are read: manage.c) */
	if (!tdax_on())
		return;
	for (int fd = 0; fd < TDAX_MAX_FDS; fd++) {
		const struct tdax_fd *e = tdax_fd_get(fd);
		if (e)
			tdax_mode_of(e)->lost_sight(fd, e, TDAX_FB_ASYNC);
	}
}

struct io_uring;
struct io_uring_params;
int io_uring_setup(unsigned entries, struct io_uring_params *p);
int io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags);
int io_uring_queue_init_params(unsigned entries, struct io_uring *ring, struct io_uring_params *p);
int io_uring_queue_init_mem(unsigned entries, struct io_uring *ring, struct io_uring_params *p, void *buf,
			    size_t size);

/* liburing makes its system calls itself (not through syscall(2)): each
 * of its entry points that sets a ring up is hooked. A program cannot call
 * one without having linked liburing, so the next definition exists. */
EXPORT int io_uring_setup(unsigned entries, struct io_uring_params *p)
{
	tdax_go_blind();
	return REAL(io_uring_setup)(entries, p);
}

EXPORT int io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
	tdax_go_blind();
	return REAL(io_uring_queue_init)(entries, ring, flags);
}

EXPORT int io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
				      struct io_uring_params *p)
{
	tdax_go_blind();
	return REAL(io_uring_queue_init_params)(entries, ring, p);
}

/* liburing 2.5 and later. */
EXPORT int io_uring_queue_init_mem(unsigned entries, struct io_uring *ring, struct io_uring_params *p,
				   void *buf, size_t size)
{
	tdax_go_blind();
	return REAL(io_uring_queue_init_mem)(entries, ring, p, buf, size);
}

/*
 * A descriptor table a thread does not share: after unshare(CLONE_FILES),
 * or in a clone(2) child with CLONE_VM and without CLONE_FILES, the same
 * number may name different files in different threads of one memory,
 * and tdax keeps one table per memory -- a write would be logged for
 * another file, a sync answered for it. So the process goes blind first,
 * as for an io_uring (tdax's own write-back thread unshares its table
 * with a raw call: fdtable.c). syscall(2)'s unshare, clone and clone3 come
 * here too (interpose_syscall.c).
 */
void tdax_tables_split(unsigned long flags)
{
	if ((flags & CLONE_VM) && !(flags & CLONE_FILES))
		tdax_go_blind();
}

EXPORT int unshare(int flags)
{
	if (flags & CLONE_FILES)
		tdax_go_blind();
	return REAL(unshare)(flags);
}

/* The function a child of clone() without CLONE_VM runs, and its argument
 * (in the parent's stack, which the child has a copy of). */
struct forked_child {
	int (*fn)(void *);
	void *arg;
};

static int run_forked_child(void *p)
{
	const struct forked_child *child = p;
	tdax_fork_done(0);
	int r = child->fn(child->arg);
	/* Its end is the process's (a thread's exit, no exit handler): the
	 * write-back thread a write here started must not outlive it. (No
	 * more: its records are a killed process's, and the stack is the
	 * application's choice, sized for fn.) */
	tdax_writeback_stop();
	return r;
}

EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	/* The optional three, read whether passed or not (as libc's clone
	 * does: it reads the registers and the stack slot either way). */
	va_list ap;
	va_start(ap, arg);
	pid_t *ptid = va_arg(ap, pid_t *);
	void *tls = va_arg(ap, void *);
	pid_t *ctid = va_arg(ap, pid_t *);
	va_end(ap);
	tdax_tables_split((unsigned long)(unsigned)flags);
	if (flags & CLONE_VM)
		return REAL(clone)(fn, stack, flags, arg, ptid, tls, ctid);
	/* A fork (the child's memory a copy), which runs no pthread_atfork
	 * handler: tdax's part of one around it, the child's before fn. */
	struct forked_child child = { fn, arg };
	tdax_fork_prepare();
	int pid = REAL(clone)(run_forked_child, stack, flags, &child, ptid, tls, ctid);
	return (int)tdax_fork_done(pid); /* (the parent's: the child never returns from clone) */
}

EXPORT_ALIAS(__clone, clone);

/*
 * vfork: the child shares the parent's memory until it execs, so every
 * close, dup2 or close_range it makes on the way (CPython's subprocess
 * does all three) would change the parent's descriptor table and make the
 * parent forget, or worse mistake, its own descriptors. So a process that
 * has attached gets a fork: the same for every program that uses vfork as
 * POSIX allows (exec or _exit in the child), at the cost of copying page
 * tables (a shell's every command: ~0.1 ms). One that has not attached,
 * with one thread, has nothing a child could change but its marks, and
 * the child is kept from those (tdax_vfork_shares): it gets the real
 * vfork.
 *
 * The hook itself must leave no frame: the child returns from vfork on
 * the caller's stack and calls on, over anything the hook kept there,
 * before the parent returns. So vfork is a stub that asks which function
 * to run, then jumps to it (x86-64; elsewhere, always a fork).
 */
EXPORT pid_t vfork(void);

__attribute__((visibility("hidden"))) void *tdax_vfork_target(void);
__attribute__((visibility("hidden"))) void *tdax_vfork_target(void)
{
	return tdax_vfork_shares() ? (void *)TDAX_REAL(vfork) : (void *)fork;
}

#if defined(__x86_64__)
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"\tsub $8, %rsp\n" /* the ABI's alignment for the call */
	"\tcall tdax_vfork_target\n"
	"\tadd $8, %rsp\n"
	"\tjmp *%rax\n"
	".size vfork, .-vfork\n");
#else
EXPORT pid_t vfork(void)
{
	return fork();
}

EXPORT_ALIAS(__vfork, vfork);
#endif
