/*
 * fsioctl -- the file system ioctls that change a file's bytes without a
 * write: XFS's zero range and unreserve space (which punch a hole), and its
 * exchange and commit range, which swap ranges of two files. The kernel
 * makes such a change where tdax cannot log it, so the hooks (and the
 * supervisor) take the file off the log before the call (lost_sight:
 * checkpointed, on the kernel's path from then on): no record written
 * before may be replayed over what the call made. (FICLONE and
 * FICLONERANGE, copies of another file's blocks, are copies: interpose.c.)
 * The numbers are the kernel's ABI (xfs_fs.h), defined here so that
 * nothing needs XFS's headers.
 */
#ifndef TDAX_FSIOCTL_H
#define TDAX_FSIOCTL_H

#include <stdint.h>
#include <sys/ioctl.h>

struct tdax_xfs_flock64 { /* xfs_flock64: only its size matters here */
	int16_t l_type, l_whence;
	int64_t l_start, l_len;
	int32_t l_sysid;
	uint32_t l_pid;
	int32_t l_pad[4];
};

/* xfs_exchange_range, and xfs_commit_range which begins as it does: the
 * other file's descriptor is their first field. */
struct tdax_xfs_exchange_range {
	int32_t file1_fd;
	uint32_t pad;
	uint64_t file1_offset, file2_offset, length, flags;
};
struct tdax_xfs_commit_range {
	struct tdax_xfs_exchange_range x;
	uint64_t file2_freshness[6];
};

#define TDAX_XFS_IOC_UNRESVSP _IOW('X', 41, struct tdax_xfs_flock64)
#define TDAX_XFS_IOC_UNRESVSP64 _IOW('X', 43, struct tdax_xfs_flock64)
#define TDAX_XFS_IOC_ZERO_RANGE _IOW('X', 57, struct tdax_xfs_flock64)
#define TDAX_XFS_IOC_EXCHANGE_RANGE _IOW('X', 129, struct tdax_xfs_exchange_range)
#define TDAX_XFS_IOC_COMMIT_RANGE _IOW('X', 131, struct tdax_xfs_commit_range)

/* 0: req changes no file's bytes; 1: the bytes of the file it is made on;
 * 2: those of that file and of the one its argument names first (file1_fd). */
static inline int tdax_fs_ioctl_changes(unsigned long req)
{
	switch ((unsigned)req) {
	case TDAX_XFS_IOC_UNRESVSP: case TDAX_XFS_IOC_UNRESVSP64: case TDAX_XFS_IOC_ZERO_RANGE:
		return 1;
	case TDAX_XFS_IOC_EXCHANGE_RANGE: case TDAX_XFS_IOC_COMMIT_RANGE:
		return 2;
	}
	return 0;
}

#endif
