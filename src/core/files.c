/*
 * files -- registration and validation of file identity entries.
 */
#define _GNU_SOURCE
#include "core/files.h"
#include "core/sys.h"
#include "core/crc32c.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

static uint32_t ident_crc(const struct tdax_file *f)
{
	uint32_t c = tdax_crc32c(0, &f->gen, offsetof(struct tdax_file, crc) -
				 offsetof(struct tdax_file, gen));
	return tdax_crc32c(c, f->path, strnlen(f->path, sizeof(f->path)));
}

int tdax_ident_of_fd(int fd, struct tdax_ident *id)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -1;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		return -1;
	}
	/* The file system's id, not the device number: a device can come back
	 * under another number after a reboot (loop devices, NVMe enumeration),
	 * ext4 and xfs derive f_fsid from their UUID. */
	struct statfs sf;
	uint64_t fsid = 0;
	if (fstatfs(fd, &sf) == 0)
		memcpy(&fsid, &sf.f_fsid, sizeof(fsid) < sizeof(sf.f_fsid) ? sizeof(fsid) : sizeof(sf.f_fsid));
	int g = 0;
	id->dev = fsid ? fsid : (uint64_t)st.st_dev;
	id->ino = st.st_ino;
	id->igen = 0;
	id->flags = 0;
	if (ioctl(fd, FS_IOC_GETVERSION, &g) == 0) {
		id->igen = (uint32_t)g;
		id->flags = TDAX_FILE_HAS_IGEN;
	}
	return 0;
}

bool tdax_ident_same(const struct tdax_ident *a, const struct tdax_ident *b)
{
	if (a->dev != b->dev || a->ino != b->ino)
		return false;
	return !(a->flags & b->flags & TDAX_FILE_HAS_IGEN) || a->igen == b->igen;
}

bool tdax_file_valid(const struct tdax_file *f)
{
	return atomic_load(&f->state) == TDAX_FILE_ACTIVE && f->crc == ident_crc(f) &&
	       memchr(f->path, '\0', sizeof(f->path)) != NULL;
}

/* Cheap comparisons first: the checksum is computed only on a match. */
static bool entry_is(const struct tdax_file *f, const struct tdax_ident *id)
{
	struct tdax_ident e = { f->dev, f->ino, f->igen, f->flags };
	return f->ino == id->ino && atomic_load(&f->state) == TDAX_FILE_ACTIVE &&
	       tdax_ident_same(&e, id) && tdax_file_valid(f);
}

static int find_locked(struct tdax_device *dev, const struct tdax_ident *id, uint32_t *idx,
		       uint32_t *gen, int64_t *free_slot)
{
	for (uint32_t i = 0; i < dev->sb->max_files; i++) {
		struct tdax_file *f = tdax_file_at(dev, i);
		if (entry_is(f, id)) {
			*idx = i;
			*gen = f->gen;
			return 0;
		}
		if (free_slot && *free_slot < 0 && atomic_load(&f->state) != TDAX_FILE_ACTIVE)
			*free_slot = i;
	}
	return -1;
}

int tdax_files_find(struct tdax_device *dev, const struct tdax_ident *id, uint32_t *idx,
		    uint32_t *gen)
{
	return find_locked(dev, id, idx, gen, NULL);
}

/* Set path and identity checksum of an entry and persist it. */
static void set_path(struct tdax_device *dev, struct tdax_file *f, const char *path)
{
	/* Callers refuse longer paths: the entry keeps its NUL (tdax_file_valid). */
	TDAX_ASSERT(strlen(path) < TDAX_FILE_PATH_MAX);
	/* Recovery skips the entry while its identity changes. */
	TDAX_ASSERT(atomic_load(&f->state) == TDAX_FILE_CLAIMING);
	memset(f->path, 0, sizeof(f->path));
	memcpy(f->path, path, strlen(path));
	f->crc = ident_crc(f);
	tdax_persist(dev, f, offsetof(struct tdax_file, rt));
	tdax_persist(dev, f->path, sizeof(f->path));
}

int tdax_files_rename(struct tdax_device *dev, uint32_t idx, uint32_t gen, const char *path)
{
	if (path[0] != '/' || strlen(path) >= TDAX_FILE_PATH_MAX)
		return -1;
	struct tdax_file *f = tdax_file_at(dev, idx);
	tdax_pidlock_acquire(dev->reglock);
	int rc = -1;
	if (f->gen == gen && atomic_load(&f->state) == TDAX_FILE_ACTIVE) {
		/* Invalid while the path changes: recovery skips it, and it has
		 * no live records to skip. */
		atomic_store(&f->state, TDAX_FILE_CLAIMING);
		tdax_persist(dev, f, TDAX_CACHELINE);
		set_path(dev, f, path);
		atomic_store(&f->state, TDAX_FILE_ACTIVE);
		tdax_persist(dev, f, TDAX_CACHELINE);
		rc = 0;
	}
	tdax_pidlock_release(dev->reglock);
	return rc;
}

void tdax_files_forget(struct tdax_device *dev, uint32_t idx, uint32_t gen)
{
	struct tdax_file *f = tdax_file_at(dev, idx);
	tdax_pidlock_acquire(dev->reglock);
	if (f->gen == gen && atomic_load(&f->state) == TDAX_FILE_ACTIVE) {
		atomic_store(&f->state, TDAX_FILE_FREE);
		tdax_persist(dev, f, TDAX_CACHELINE);
	}
	tdax_pidlock_release(dev->reglock);
}

/* Is the file of entry f still at its path? Raw system calls: under the
 * preload these must not go through tdax's own hooks. */
static bool still_there(const struct tdax_file *f)
{
	int fd = (int)tdax_syscall(SYS_openat, AT_FDCWD, f->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT && errno != ENOTDIR; /* in doubt, it is */
	struct tdax_ident now, was = { f->dev, f->ino, f->igen, f->flags };
	bool same = tdax_ident_of_fd(fd, &now) != 0 || tdax_ident_same(&now, &was);
	tdax_syscall(SYS_close, fd);
	return same;
}

/*
 * The table is full: free the entries of files that are gone -- removed or
 * replaced by a program without tdax -- and have no records waiting. A
 * process that still has such a file open sees the generation change and
 * syncs it through the kernel. Returns a free slot, or -1.
 */
static int64_t reclaim_gone(struct tdax_device *dev)
{
	int64_t slot = -1;
	for (uint32_t i = 0; i < dev->sb->max_files; i++) {
		struct tdax_file *f = tdax_file_at(dev, i);
		if (!tdax_file_valid(f) || atomic_load(&f->rt.first_log_ns) ||
		    atomic_load(&f->rt.rewrite) || still_there(f))
			continue;
		atomic_store(&f->state, TDAX_FILE_FREE);
		tdax_persist(dev, f, TDAX_CACHELINE);
		slot = slot < 0 ? i : slot;
	}
	return slot;
}

int tdax_files_register(struct tdax_device *dev, int fd, const char *path, uint32_t *idx,
			uint32_t *gen, bool *created, struct tdax_err *err)
{
	struct tdax_ident id;
	if (tdax_ident_of_fd(fd, &id) != 0)
		return tdax_errf(err, "%s: not a regular file, or fstat failed: %s", path,
				 strerror(errno));
	if (path[0] != '/')
		return tdax_errf(err, "%s: not an absolute path; recovery could not find the file "
			"again", path);
	if (strlen(path) >= TDAX_FILE_PATH_MAX)
		return tdax_errf(err, "%s: path longer than %d bytes; tdax leaves this file to the "
			"kernel", path, TDAX_FILE_PATH_MAX - 1);

	/* One registrar at a time across all processes, so that a file never
	 * gets two entries. Registration happens at open, not per write. */
	tdax_pidlock_acquire(dev->reglock);
	int64_t free_slot = -1;
	*created = false;
	if (find_locked(dev, &id, idx, gen, &free_slot) == 0) {
		tdax_pidlock_release(dev->reglock);
		return 0;
	}
	if (free_slot < 0)
		free_slot = reclaim_gone(dev);
	if (free_slot < 0) {
		tdax_pidlock_release(dev->reglock);
		return tdax_errf(err, "%s: the device's file table is full (%u files); tdax leaves "
			"this file to the kernel", path, dev->sb->max_files);
	}
	struct tdax_file *f = tdax_file_at(dev, (uint32_t)free_slot);
	atomic_store(&f->state, TDAX_FILE_CLAIMING);
	tdax_persist(dev, f, TDAX_CACHELINE);
	f->gen++;
	f->dev = id.dev;
	f->ino = id.ino;
	f->igen = id.igen;
	f->flags = id.flags;
	f->uid = (uint32_t)geteuid();
	f->gid = (uint32_t)getegid();
	atomic_store(&f->released_seq, 0);
	memset(f->rt_space, 0, sizeof(f->rt_space));
	set_path(dev, f, path);
	atomic_store(&f->state, TDAX_FILE_ACTIVE);
	tdax_persist(dev, f, TDAX_CACHELINE);
	*idx = (uint32_t)free_slot;
	*gen = f->gen;
	*created = true;
	tdax_pidlock_release(dev->reglock);
	return 0;
}

void tdax_file_release(struct tdax_device *dev, uint32_t idx, uint32_t gen, uint64_t seq)
{
	struct tdax_file *f = tdax_file_at(dev, idx);
	if (f->gen != gen)
		return;
	uint64_t cur = atomic_load(&f->released_seq);
	while (cur < seq && !atomic_compare_exchange_weak(&f->released_seq, &cur, seq))
		;
	tdax_persist(dev, (const void *)&f->released_seq, sizeof(uint64_t));
}

/* "dir/..." below dir: the rest after the slash, or NULL. */
static const char *below(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && path[n] == '/' ? path + n : NULL;
}

int tdax_files_move_below(struct tdax_device *dev, const char *from, const char *to, bool exchange)
{
	int moved = 0;
	tdax_pidlock_acquire(dev->reglock);
	for (uint32_t i = 0; i < dev->sb->max_files; i++) {
		struct tdax_file *f = tdax_file_at(dev, i);
		if (atomic_load(&f->state) != TDAX_FILE_ACTIVE)
			continue;
		const char *rest = below(f->path, from), *dst = to;
		if (!rest && exchange) {
			rest = below(f->path, to);
			dst = from;
		}
		char path[TDAX_FILE_PATH_MAX + 1];
		if (!rest || snprintf(path, sizeof(path), "%s%s", dst, rest) >= TDAX_FILE_PATH_MAX)
			continue; /* not below, or too long now: recovery will find it unmatched */
		atomic_store(&f->state, TDAX_FILE_CLAIMING);
		tdax_persist(dev, f, TDAX_CACHELINE);
		set_path(dev, f, path);
		atomic_store(&f->state, TDAX_FILE_ACTIVE);
		tdax_persist(dev, f, TDAX_CACHELINE);
		moved++;
	}
	tdax_pidlock_release(dev->reglock);
	return moved;
}

void tdax_files_format(struct tdax_device *dev)
{
	uint64_t n = (uint64_t)dev->sb->max_files * TDAX_FILE_ENTRY_SIZE;
	memset(tdax_file_at(dev, 0), 0, n);
	tdax_persist(dev, tdax_file_at(dev, 0), n);
}
