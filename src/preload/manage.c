/*
 * manage -- which descriptors tdax manages (manage.h): the choice when a
 * descriptor is made (open, exec, dup), the file's registration, and the
 * file's mode (mode.h: the table of modes lives here, with the choice).
 */
#define _GNU_SOURCE
#include "preload/manage.h"
#include "core/trace.h"
#include "preload/coherent.h"
#include "preload/fdtable.h"
#include "preload/mode.h"
#include "preload/state.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

const struct tdax_mode_ops *const tdax_modes[TDAX_MODES] = {
	[TDAX_MODE_COHERENT] = &tdax_coherent_mode,
};

/* Coherent mode is the only one yet: every managed file is in it. */
static enum tdax_mode choose_mode(void)
{
	return TDAX_MODE_COHERENT;
}

void tdax_manage_dup(int from, int to)
{
	if (to < 0 || !tdax_fds || to == from)
		return;
	const struct tdax_fd *e = tdax_fd_get(from);
	if (to >= TDAX_MAX_FDS) {
		/* Beyond the table: writes through it would go unseen. */
		if (e)
			tdax_coherent_kernel_only(e->file_plus1 - 1, TDAX_FB_UNREGISTERED);
		return;
	}
	tdax_fd_forget(to);
	if (!e)
		return;
	if (e->twin_plus1)
		tdax_twin_ref(e->twin_plus1);
	tdax_fds[to] = *e;
}

/* File systems where a sync costs nothing or tdax has no business. */
static bool fs_excluded(int fd)
{
	struct statfs sf;
	if (fstatfs(fd, &sf) != 0)
		return true;
	switch ((unsigned long)sf.f_type) {
	case TMPFS_MAGIC: case PROC_SUPER_MAGIC: case SYSFS_MAGIC: case DEVPTS_SUPER_MAGIC:
	case HUGETLBFS_MAGIC: case RAMFS_MAGIC: case CGROUP2_SUPER_MAGIC:
		return true;
	}
	return false;
}

static bool qualifies(int fd, int flags, struct stat *st)
{
	return fd >= 0 && fd < TDAX_MAX_FDS && (flags & O_ACCMODE) != O_RDONLY && fstat(fd, st) == 0 &&
	       S_ISREG(st->st_mode) && !fs_excluded(fd);
}

bool tdax_manage_wants(int fd, int flags)
{
	struct stat st;
	return qualifies(fd, flags, &st);
}

bool tdax_manage_wants_path(int dirfd, const char *path, bool follow)
{
	int fd = TDAX_REAL(openat)(dirfd, path, O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
	if (fd < 0)
		return false;
	struct stat st;
	bool yes = qualifies(fd, O_WRONLY, &st);
	TDAX_REAL(close)(fd);
	return yes;
}

/* Where an inherited descriptor is (one just opened is at 0). */
static uint64_t position(int fd)
{
	off_t pos = TDAX_REAL(lseek)(fd, 0, SEEK_CUR);
	return pos < 0 ? 0 : (uint64_t)pos;
}

void tdax_manage(int fd, const char *path_or_null, int flags)
{
	if (fd < 0 || fd >= TDAX_MAX_FDS)
		return;
	tdax_fd_forget(fd); /* whatever the number was before, it is this now */
	struct stat st;
	if (!qualifies(fd, flags, &st))
		return;
	/* The path recovery will use: absolute and canonical. */
	char path[TDAX_FILE_PATH_MAX + 1];
	if (tdax_fd_path(fd, path, sizeof(path)) < 0) {
		tdax_fallback(TDAX_FB_UNREGISTERED, path_or_null ? path_or_null : "(a descriptor /proc cannot name)");
		return;
	}
	uint32_t idx, gen;
	bool created;
	struct tdax_err e;
	if (tdax_files_register(tdax_rt.dev, fd, path, &idx, &gen, &created, &e) != 0) {
		tdax_fallback(TDAX_FB_UNREGISTERED, path);
		return;
	}
	struct tdax_file_rt *rt = tdax_rt_of(idx);
	uint64_t seen = atomic_load(&rt->size_seen);
	if (created || seen != (uint64_t)st.st_size) {
		/* New to tdax, or changed by someone tdax did not see. */
		atomic_store(&rt->size_seen, (uint64_t)st.st_size);
		atomic_fetch_add(&rt->uncovered, 1);
	}
	if (tdax_tracing) {
		if (!tdax_rt.named[idx]) {
			tdax_rt.named[idx] = 1;
			tdax_trace_name(idx, path);
		}
		tdax_trace_event(TDAX_TR_OPEN, idx, gen, 0, (uint16_t)(created ? TDAX_TRF_CREATE : 0));
	}
	if (flags & (O_CREAT | O_TRUNC))
		tdax_coherent_uncover(idx, TDAX_FB_METADATA); /* the directory entry / size need the kernel */
	if (tdax_rt.blind)
		tdax_coherent_unmanage(fd, idx, gen, TDAX_FB_ASYNC);
	uint32_t sync = (flags & O_SYNC) == O_SYNC ? TDAX_FD_SYNC : (flags & O_DSYNC) ? TDAX_FD_DSYNC : 0;
	uint32_t twin = sync ? (uint32_t)tdax_twin_open(fd, flags) : 0;
	tdax_fds[fd] = (struct tdax_fd){
		.file_plus1 = idx + 1, .gen = gen,
		.mode = (uint16_t)choose_mode(),
		.flags = ((flags & O_APPEND) ? TDAX_FD_APPEND : 0) | (twin ? sync : 0) |
			 ((flags & O_DIRECT) ? TDAX_FD_NOLOG : 0),
		.twin_plus1 = twin,
		.dev = st.st_dev, .ino = st.st_ino,
		.pos = path_or_null ? 0 : position(fd),
	};
}

void tdax_manage_stdio(int fd)
{
	struct tdax_ident id;
	uint32_t idx, gen;
	if (tdax_ident_of_fd(fd, &id) == 0 && tdax_files_find(tdax_rt.dev, &id, &idx, &gen) == 0)
		tdax_coherent_unmanage(fd, idx, gen, TDAX_FB_STDIO);
}
