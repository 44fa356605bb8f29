/*
 * fuse -- prototype: a FUSE file system in front of a directory (what a
 * `tdax mount` would be) as a way to see every process's file calls, raw
 * or not, static or not. A child serves a mount of a scratch directory on
 * the disk (libfuse3, its high-level API, multi-threaded loop): each write
 * is made into the directory's file through the page cache, as tdax's
 * coherent mode makes it, and each fsync is answered by the daemon (tdax
 * would answer it from its log). The parent times 128 B appends and
 * fdatasync through the mount against the same appends made to the
 * directory itself, and the daemon's count says every call reached it.
 *
 * Needs /dev/fuse (and, for a user, fusermount3: the fuse3 package).
 * Usage: tdax-proto-fuse [N] [DIR] (DIR on the disk to measure; default
 * the current directory).
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int backing = -1; /* the directory behind the mount */

/* A path of the mount, as one relative to the directory. */
static const char *rel(const char *path)
{
	return path[1] ? path + 1 : ".";
}

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	int r = fi ? fstat((int)fi->fh, st) : fstatat(backing, rel(path), st, AT_SYMLINK_NOFOLLOW);
	return r ? -errno : 0;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
	int fd = openat(backing, rel(path), fi->flags & ~O_APPEND); /* (offsets come with each write) */
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int fs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int fd = openat(backing, rel(path), (fi->flags & ~O_APPEND) | O_CREAT, mode);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int fs_write(const char *path, const char *buf, size_t n, off_t at, struct fuse_file_info *fi)
{
	(void)path;
	ssize_t w = pwrite((int)fi->fh, buf, n, at);
	return w < 0 ? -errno : (int)w;
}

static int fs_read(const char *path, char *buf, size_t n, off_t at, struct fuse_file_info *fi)
{
	(void)path;
	ssize_t r = pread((int)fi->fh, buf, n, at);
	return r < 0 ? -errno : (int)r;
}

static long syncs_answered;

static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path, (void)datasync, (void)fi;
	__atomic_add_fetch(&syncs_answered, 1, __ATOMIC_RELAXED);
	return 0; /* tdax: a fence, the log holds the writes */
}

static int fs_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	close((int)fi->fh);
	return 0;
}

static int fs_unlink(const char *path)
{
	return unlinkat(backing, rel(path), 0) ? -errno : 0;
}

static const struct fuse_operations ops = {
	.getattr = fs_getattr, .open = fs_open, .create = fs_create, .write = fs_write,
	.read = fs_read, .fsync = fs_fsync, .release = fs_release, .unlink = fs_unlink,
};

/* The daemon: serve mnt until SIGTERM; 0 if it answered `syncs` syncs. */
static int serve(const char *mnt, long syncs)
{
	char *argv[] = { "tdax-proto-fuse", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	struct fuse *f = fuse_new(&args, &ops, sizeof(ops), NULL);
	if (!f || fuse_mount(f, mnt) != 0 || fuse_set_signal_handlers(fuse_get_session(f)) != 0)
		return 1;
	int r = fuse_loop_mt(f, 0);
	fuse_remove_signal_handlers(fuse_get_session(f));
	fuse_unmount(f);
	fuse_destroy(f);
	return r && r != SIGTERM ? 1 : syncs_answered == syncs ? 0 : 3; /* (SIGTERM: how it ends) */
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ns per 128 B append to path, and per fdatasync if syncs (else 0). */
static int appends(const char *path, int n, int syncs, double *write_ns, double *sync_ns)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	char b[128];
	memset(b, 'a', sizeof(b));
	if (fd < 0)
		return -1;
	double t0 = now();
	for (int i = 0; i < n; i++)
		if (write(fd, b, sizeof(b)) != (ssize_t)sizeof(b))
			return close(fd), -1;
	double t1 = now();
	for (int i = 0; i < syncs; i++)
		if (fdatasync(fd) != 0)
			return close(fd), -1;
	double t2 = now();
	*write_ns = (t1 - t0) / n * 1e9;
	*sync_ns = syncs ? (t2 - t1) / syncs * 1e9 : 0;
	struct stat st;
	int ok = fstat(fd, &st) == 0 && st.st_size == (off_t)n * 128;
	close(fd);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	char dir[] = "tdax-proto-fuse.XXXXXX", mnt[4096], under[4096], path[4200];
	if ((argc > 2 && chdir(argv[2]) != 0) || !mkdtemp(dir))
		return perror("fuse: scratch directory"), 1;
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	snprintf(under, sizeof(under), "%s/under", dir);
	if (mkdir(mnt, 0755) != 0 || mkdir(under, 0755) != 0 || (backing = open(under, O_PATH | O_DIRECTORY)) < 0)
		return perror("fuse: scratch directory"), 1;
	struct stat before, st;
	stat(mnt, &before);
	pid_t daemon = fork();
	if (daemon == 0)
		_exit(serve(mnt, n));
	for (int i = 0; i < 500 && stat(mnt, &st) == 0 && st.st_dev == before.st_dev; i++)
		usleep(10000);
	int rc = 1;
	double w_fuse, s_fuse, w_direct, s_direct;
	if (st.st_dev == before.st_dev) {
		fprintf(stderr, "fuse: the mount did not appear (is /dev/fuse there, fuse3 installed?)\n");
	} else {
		snprintf(path, sizeof(path), "%s/f", mnt);
		int a = appends(path, n, n, &w_fuse, &s_fuse);
		unlink(path);
		snprintf(path, sizeof(path), "%s/g", under);
		int b = appends(path, n, 0, &w_direct, &s_direct);
		unlink(path);
		if (a == 0 && b == 0) {
			rc = 0;
			printf("fuse: 128 B append %.1f us through the mount, %.2f us to the directory itself; "
			       "fdatasync answered by the daemon %.1f us\n",
			       w_fuse / 1e3, w_direct / 1e3, s_fuse / 1e3);
		} else {
			perror("fuse: appends");
		}
	}
	kill(daemon, SIGTERM);
	int status;
	if (waitpid(daemon, &status, 0) == daemon && rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		fprintf(stderr, "fuse: the daemon did not answer every sync (status %#x)\n", status);
		rc = 1;
	}
	rmdir(mnt);
	rmdir(under);
	rmdir(dir);
	return rc;
}
