/*
 * voldisk -- a "volatile disk" for power-cut tests: a FUSE file system with
 * one file, `disk`, backed by an image on the host. Writes stay in this
 * process's memory until an fsync of `disk` reaches it, as in a disk's
 * volatile write cache; then they go to the image, which is what survives.
 *
 * Writing "eio" to `ctl` makes the disk fail: every later fsync returns
 * EIO and what it should have written is lost (the write-back error of
 * "fsyncgate"). Writing "cut" to the file `ctl` is the power cut: the cached writes are
 * lost (mode lose-all) or a random subset of them reaches the image first
 * (mode keep-random, like a cache that had written some back), and from
 * then on every write is discarded, so nothing the dying system flushes
 * lands. Put ext4 on a loop device over `disk`; after the cut, unmount,
 * start voldisk again on the same image, mount, and see what survived.
 *
 * `disk` is opened direct_io, so the kernel keeps no cache of it: every
 * write of the loop device reaches this process.
 *
 * usage: tdax-voldisk IMAGE MOUNTPOINT [lose-all|keep-random] [SEED]
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK 4096

static int image = -1;
static off_t size;
static char **cache;     /* cached (unflushed) blocks, by block number */
static size_t nblocks, ncached;
static int dead, keep_random, failing;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int vd_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (strcmp(path, "/") == 0) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else if (strcmp(path, "/disk") == 0) {
		st->st_mode = S_IFREG | 0600;
		st->st_nlink = 1;
		st->st_size = size;
	} else if (strcmp(path, "/ctl") == 0) {
		st->st_mode = S_IFREG | 0200;
		st->st_nlink = 1;
	} else {
		return -ENOENT;
	}
	return 0;
}

static int vd_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off, (void)fi, (void)flags;
	if (strcmp(path, "/") != 0)
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, "disk", NULL, 0, 0);
	fill(buf, "ctl", NULL, 0, 0);
	return 0;
}

static int vd_open(const char *path, struct fuse_file_info *fi)
{
	if (strcmp(path, "/disk") && strcmp(path, "/ctl"))
		return -ENOENT;
	fi->direct_io = 1;
	return 0;
}

static int vd_truncate(const char *path, off_t len, struct fuse_file_info *fi)
{
	(void)fi, (void)len;
	return strcmp(path, "/ctl") == 0 ? 0 : -EPERM;
}

/* Read one block as the disk would return it: cached, else from the image. */
static void block_read(size_t b, char *out)
{
	if (cache[b]) {
		memcpy(out, cache[b], BLOCK);
		return;
	}
	if (pread(image, out, BLOCK, (off_t)b * BLOCK) != BLOCK)
		memset(out, 0, BLOCK);
}

static int vd_read(const char *path, char *buf, size_t n, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	if (strcmp(path, "/disk"))
		return -EINVAL;
	if (off >= size)
		return 0;
	if ((off_t)n > size - off)
		n = (size_t)(size - off);
	char blk[BLOCK];
	pthread_mutex_lock(&lock);
	for (size_t done = 0; done < n;) {
		size_t b = (size_t)(off + (off_t)done) / BLOCK, in = (size_t)(off + (off_t)done) % BLOCK;
		size_t k = BLOCK - in < n - done ? BLOCK - in : n - done;
		block_read(b, blk);
		memcpy(buf + done, blk + in, k);
		done += k;
	}
	pthread_mutex_unlock(&lock);
	return (int)n;
}

static int flush_all(void)
{
	for (size_t b = 0; b < nblocks; b++) {
		if (!cache[b])
			continue;
		if (pwrite(image, cache[b], BLOCK, (off_t)b * BLOCK) != BLOCK)
			return -EIO;
		free(cache[b]);
		cache[b] = NULL;
	}
	ncached = 0;
	return fdatasync(image) ? -EIO : 0;
}

static void cut(void)
{
	for (size_t b = 0; b < nblocks; b++) {
		if (!cache[b])
			continue;
		if (keep_random && (rand() & 1) &&
		    pwrite(image, cache[b], BLOCK, (off_t)b * BLOCK) != BLOCK)
			fprintf(stderr, "voldisk: writing a kept block failed\n");
		free(cache[b]);
		cache[b] = NULL;
	}
	fdatasync(image);
	ncached = 0;
	dead = 1;
}

static int vd_write(const char *path, const char *buf, size_t n, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	pthread_mutex_lock(&lock);
	if (strcmp(path, "/ctl") == 0) {
		if (n >= 3 && memcmp(buf, "cut", 3) == 0)
			cut();
		else if (n >= 3 && memcmp(buf, "eio", 3) == 0)
			failing = 1;
		pthread_mutex_unlock(&lock);
		return (int)n;
	}
	if (dead || off >= size) {
		pthread_mutex_unlock(&lock);
		return dead ? (int)n : -ENOSPC;
	}
	if ((off_t)n > size - off)
		n = (size_t)(size - off);
	for (size_t done = 0; done < n;) {
		size_t b = (size_t)(off + (off_t)done) / BLOCK, in = (size_t)(off + (off_t)done) % BLOCK;
		size_t k = BLOCK - in < n - done ? BLOCK - in : n - done;
		if (!cache[b]) {
			char *blk = malloc(BLOCK);
			block_read(b, blk); /* before it is in the cache: the rest of the block */
			cache[b] = blk;
			ncached++;
		}
		memcpy(cache[b] + in, buf + done, k);
		done += k;
	}
	pthread_mutex_unlock(&lock);
	return (int)n;
}

static int vd_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)datasync, (void)fi;
	if (strcmp(path, "/disk"))
		return 0;
	pthread_mutex_lock(&lock);
	int rc = 0;
	if (failing) { /* the cached writes never make it */
		for (size_t b = 0; b < nblocks; b++) {
			free(cache[b]);
			cache[b] = NULL;
		}
		ncached = 0;
		rc = -EIO;
	} else if (!dead) {
		rc = flush_all();
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

/* The loop device turns discards and write-zeroes into fallocate: the
 * range reads as zeros afterwards, through the cache like any write. */
static int vd_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	(void)mode;
	static const char zero[BLOCK];
	for (off_t done = 0; done < len;) {
		size_t k = len - done < BLOCK ? (size_t)(len - done) : BLOCK;
		int rc = vd_write(path, zero, k, off + done, fi);
		if (rc < 0)
			return rc;
		done += (off_t)k;
	}
	return 0;
}

/* Unmounted without a cut: a clean power-off, the cache is written. */
static void vd_destroy(void *data)
{
	(void)data;
	if (!dead && !failing && flush_all() != 0)
		fprintf(stderr, "voldisk: writing the cache at unmount failed\n");
}

static const struct fuse_operations ops = {
	.destroy = vd_destroy,
	.getattr = vd_getattr, .readdir = vd_readdir, .open = vd_open, .read = vd_read,
	.write = vd_write, .fsync = vd_fsync, .truncate = vd_truncate, .fallocate = vd_fallocate,
};

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: tdax-voldisk IMAGE MOUNTPOINT [lose-all|keep-random] [SEED]\n");
		return 2;
	}
	image = open(argv[1], O_RDWR);
	struct stat st;
	if (image < 0 || fstat(image, &st) != 0 || st.st_size < BLOCK) {
		fprintf(stderr, "voldisk: %s: cannot open the image (make it with truncate -s SIZE)\n", argv[1]);
		return 1;
	}
	size = st.st_size & ~(off_t)(BLOCK - 1);
	nblocks = (size_t)size / BLOCK;
	cache = calloc(nblocks, sizeof(*cache));
	keep_random = argc > 3 && strcmp(argv[3], "keep-random") == 0;
	srand(argc > 4 ? (unsigned)atoi(argv[4]) : 1);
	char *fargv[] = { argv[0], argv[2], "-f", "-s", "-o", "allow_other", NULL };
	return fuse_main(6, fargv, &ops, NULL);
}
