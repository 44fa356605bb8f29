/*
 * interpose_syscall -- syscall(2), the libc function that skips the other
 * wrappers. A call the hooks care about (a write, a sync, a close, a
 * rename, ...) is sent to the same hook its wrapper has; everything else
 * goes straight to the kernel. tdax's own calls never come here (sys.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sched.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>

#include "preload/fdtable.h"
#include "preload/promoted.h"
#include "preload/interpose.h"
#include "preload/landing.h"
#include "preload/lease.h"
#include "preload/manage.h"
#include "preload/start.h"
#include "preload/state.h"
#include "core/fsioctl.h"
#include "core/sys.h"

/* A descriptor tdax serve-syscalls borrowed from the command it serves
 * (cli/notify.c): the command writes and syncs the file only through the
 * supervisor, so it is managed as if opened here. (Anywhere else a
 * descriptor of another process's is not: its owner's writes are unseen.) */
static void borrowed(int fd)
{
	int flags = (int)tdax_syscall(SYS_fcntl, fd, F_GETFL);
	if (flags >= 0 && (flags & O_ACCMODE) != O_RDONLY && tdax_on_or_waiting() &&
	    (tdax_on() || (tdax_manage_wants(fd, flags) && tdax_attach_opening(fd))))
		tdax_manage(fd, NULL, flags);
	else
		tdax_fd_forget(fd);
}

/* A fork by the system call, which runs no pthread_atfork handler: tdax's
 * part of one around it (start.h). The child returns here, on a copy of
 * this stack. */
static long forked(long nr, long a, long b, long c, long d, long e, long f)
{
	tdax_fork_prepare();
	long pid = tdax_syscall(nr, a, b, c, d, e, f);
	return tdax_fork_done((pid_t)pid);
}

EXPORT long syscall(long nr, ...)
{
	/* All six: a caller that passed fewer leaves registers (and a stack
	 * slot) that are read and ignored, as libc's own syscall(2) does. */
	va_list ap;
	va_start(ap, nr);
	long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
	long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
	va_end(ap);
	/* Calls that read a file, its size or its position: a promoted
	 * file is demoted first (bypass.h), as their libc hooks do. */
	if (nr == SYS_read || nr == SYS_pread64 || nr == SYS_readv || nr == SYS_preadv ||
	    nr == SYS_preadv2 || nr == SYS_lseek || nr == SYS_fstat || nr == SYS_mmap ||
	    nr == SYS_sendfile || nr == SYS_copy_file_range || nr == SYS_splice)
		tdax_promoted_settle_fd((int)(nr == SYS_mmap ? e : a));
	if (nr == SYS_sendfile || nr == SYS_splice || nr == SYS_copy_file_range)
		tdax_promoted_settle_fd((int)(nr == SYS_sendfile ? b : c));
	/* Calls at the file position move it (landing.h; the copies' own
	 * hooks below tell theirs). */
	if (nr == SYS_read || nr == SYS_readv || nr == SYS_lseek || (nr == SYS_preadv2 && d == -1))
		tdax_landing_moved((int)a);
	/* The raw ABI of the positional calls splits the offset in two longs
	 * (low, high); on 64-bit the low one is all of it. */
	switch (nr) {
	case SYS_write:
		return write((int)a, (const void *)b, (size_t)c);
	case SYS_pwrite64:
		return pwrite((int)a, (const void *)b, (size_t)c, (off_t)d);
	case SYS_writev:
		return writev((int)a, (const struct iovec *)b, (int)c);
	case SYS_pwritev:
		return pwritev((int)a, (const struct iovec *)b, (int)c, (off_t)d);
	case SYS_pwritev2:
		return pwritev2((int)a, (const struct iovec *)b, (int)c, (off_t)d, (int)f);
	case SYS_fsync:
		return fsync((int)a);
	case SYS_fdatasync:
		return fdatasync((int)a);
	case SYS_sync:
		sync();
		return 0;
	case SYS_syncfs:
		return syncfs((int)a);
	case SYS_ftruncate:
		return ftruncate((int)a, (off_t)b);
	case SYS_truncate:
		return truncate((const char *)a, (off_t)b);
	case SYS_fallocate:
		return fallocate((int)a, (int)b, (off_t)c, (off_t)d);
	case SYS_copy_file_range:
		return copy_file_range((int)a, (off_t *)b, (int)c, (off_t *)d, (size_t)e, (unsigned)f);
	case SYS_sendfile:
		return sendfile((int)a, (int)b, (off_t *)c, (size_t)d);
	case SYS_splice:
		return splice((int)a, (off_t *)b, (int)c, (off_t *)d, (size_t)e, (unsigned)f);
	/* Attributes, which an fsync promises (interpose_attr.c). The
	 * kernel's utimensat and futimesat take a NULL path for the
	 * descriptor itself, glibc's utimensat does not. */
	case SYS_chmod:
		return chmod((const char *)a, (mode_t)b);
	case SYS_fchmod:
		return fchmod((int)a, (mode_t)b);
	case SYS_fchmodat:
		return fchmodat((int)a, (const char *)b, (mode_t)c, 0);
	case SYS_chown:
		return chown((const char *)a, (uid_t)b, (gid_t)c);
	case SYS_fchown:
		return fchown((int)a, (uid_t)b, (gid_t)c);
	case SYS_lchown:
		return lchown((const char *)a, (uid_t)b, (gid_t)c);
	case SYS_fchownat:
		return fchownat((int)a, (const char *)b, (uid_t)c, (gid_t)d, (int)e);
	case SYS_utimensat:
		if (!b && !d)
			return futimens((int)a, (const struct timespec *)c);
		if (b)
			return utimensat((int)a, (const char *)b, (const struct timespec *)c, (int)d);
		break;
	case SYS_utime:
		return utime((const char *)a, (const struct utimbuf *)b);
	case SYS_utimes:
		return utimes((const char *)a, (const struct timeval *)b);
	case SYS_futimesat:
		return futimesat((int)a, (const char *)b, (const struct timeval *)c);
	case SYS_setxattr:
		return setxattr((const char *)a, (const char *)b, (const void *)c, (size_t)d, (int)e);
	case SYS_lsetxattr:
		return lsetxattr((const char *)a, (const char *)b, (const void *)c, (size_t)d, (int)e);
	case SYS_fsetxattr:
		return fsetxattr((int)a, (const char *)b, (const void *)c, (size_t)d, (int)e);
	case SYS_removexattr:
		return removexattr((const char *)a, (const char *)b);
	case SYS_lremovexattr:
		return lremovexattr((const char *)a, (const char *)b);
	case SYS_fremovexattr:
		return fremovexattr((int)a, (const char *)b);
	case SYS_close:
		return close((int)a);
	case SYS_close_range:
		return close_range((unsigned)a, (unsigned)b, (int)c);
	case SYS_dup:
		return dup((int)a);
	case SYS_dup2:
		return dup2((int)a, (int)b);
	case SYS_dup3:
		return dup3((int)a, (int)b, (int)c);
	case SYS_fcntl:
		return fcntl((int)a, (int)b, c);
	case SYS_open:
		return open((const char *)a, (int)b, (mode_t)c);
	case SYS_openat:
		return openat((int)a, (const char *)b, (int)c, (mode_t)d);
	case SYS_creat:
		return creat((const char *)a, (mode_t)b);
	case SYS_openat2:
		return tdax_openat2((int)a, (const char *)b, (const struct open_how *)c, (size_t)d);
	case SYS_open_by_handle_at:
		return open_by_handle_at((int)a, (struct file_handle *)b, (int)c);
	case SYS_rename:
		return rename((const char *)a, (const char *)b);
	case SYS_renameat:
		return renameat((int)a, (const char *)b, (int)c, (const char *)d);
	case SYS_renameat2:
		return renameat2((int)a, (const char *)b, (int)c, (const char *)d, (unsigned)e);
	case SYS_unlink:
		return unlink((const char *)a);
	case SYS_unlinkat:
		return unlinkat((int)a, (const char *)b, (int)c);
	case SYS_mmap:
		return (long)mmap((void *)a, (size_t)b, (int)c, (int)d, (int)e, (off_t)f);
	case SYS_mprotect:
		return mprotect((void *)a, (size_t)b, (int)c);
	case SYS_pkey_mprotect:
		return pkey_mprotect((void *)a, (size_t)b, (int)c, (int)d);
	case SYS_mremap:
		return (long)mremap((void *)a, (size_t)b, (size_t)c, (int)d, (void *)e);
	case SYS_munmap:
		return munmap((void *)a, (size_t)b);
	case SYS_io_uring_setup:
		tdax_go_blind();
		return tdax_syscall(nr, a, b, c, d, e, f);
	case SYS_ioctl:
		if ((unsigned)b == FICLONE || (unsigned)b == FICLONERANGE || tdax_fs_ioctl_changes((unsigned long)b))
			return ioctl((int)a, (unsigned long)b, (void *)c);
		break;
	case SYS_unshare:
		return unshare((int)a);
	case SYS_fork:
		return forked(nr, a, b, c, d, e, f);
	case SYS_clone:
		tdax_tables_split((unsigned long)a);
		if (!(a & CLONE_VM) && !b) /* a fork: a copy of the memory, this stack */
			return forked(nr, a, b, c, d, e, f);
		return tdax_syscall(nr, a, b, c, d, e, f);
	case SYS_clone3: {
		/* Its flags are the first field of its clone_args, the child's
		 * stack the sixth (one the kernel cannot read fails there). */
		uint64_t args[6];
		struct iovec mine = { args, sizeof(args) }, theirs = { (void *)a, sizeof(args) };
		if (b >= (long)sizeof(args) &&
		    tdax_syscall(SYS_process_vm_readv, getpid(), &mine, 1, &theirs, 1, 0) == sizeof(args)) {
			tdax_tables_split(args[0]);
			if (!(args[0] & CLONE_VM) && !args[5])
				return forked(nr, a, b, c, d, e, f);
		}
		return tdax_syscall(nr, a, b, c, d, e, f);
	}
	case SYS_io_submit:
		tdax_aio_submitting(b, (struct iocb *const *)c);
		return tdax_syscall(nr, a, b, c, d, e, f);
	case SYS_execve:
		return execve((const char *)a, (char *const *)b, (char *const *)c);
	case SYS_execveat:
		return execveat((int)a, (const char *)b, (char *const *)c, (char *const *)d, (int)e);
	case SYS_sendmsg:
		return sendmsg((int)a, (const struct msghdr *)b, (int)c);
	case SYS_sendmmsg:
		return sendmmsg((int)a, (struct mmsghdr *)b, (unsigned)c, (int)d);
	/* Names in a directory, which a directory's sync promises (dirsync.h). */
	case SYS_mkdir:
		return mkdir((const char *)a, (mode_t)b);
	case SYS_mkdirat:
		return mkdirat((int)a, (const char *)b, (mode_t)c);
	case SYS_rmdir:
		return rmdir((const char *)a);
	case SYS_link:
		return link((const char *)a, (const char *)b);
	case SYS_linkat:
		return linkat((int)a, (const char *)b, (int)c, (const char *)d, (int)e);
	case SYS_symlink:
		return symlink((const char *)a, (const char *)b);
	case SYS_symlinkat:
		return symlinkat((const char *)a, (int)b, (const char *)c);
	case SYS_mknod:
		return mknod((const char *)a, (mode_t)b, (dev_t)c);
	case SYS_mknodat:
		return mknodat((int)a, (const char *)b, (mode_t)c, (dev_t)d);
	case SYS_rt_sigaction:
		if (b)
			tdax_lease_signal_claimed((int)a);
		return tdax_syscall(nr, a, b, c, d, e, f);
	}
	long r = tdax_syscall(nr, a, b, c, d, e, f);
	if (nr == SYS_pidfd_getfd && r >= 0 && tdax_rt.supervisor) {
		borrowed((int)r);
		return r;
	}
	/* Anything else that returns a descriptor makes a new one (pidfd_open,
	 * memfd_create, a socket, ...): its number's entry is stale. */
	if (r >= 0 && (nr == SYS_pidfd_open ||
		       nr == SYS_pidfd_getfd || nr == SYS_userfaultfd || nr == SYS_memfd_create ||
		       nr == SYS_socket || nr == SYS_accept || nr == SYS_accept4 ||
		       nr == SYS_eventfd2 || nr == SYS_epoll_create1 || nr == SYS_fanotify_init))
		tdax_fd_forget((int)r);
	return r;
}
