/*
 * tdax.h -- explicit mappings of file ranges for applications that know
 * about tdax (SPEC "Explicit DAX"; the hybrid SSD's MAP_DAX + mlock).
 *
 * Link with -ltdax. The calls work with and without `tdax run`: under it,
 * tdax_persist is answered from the device (a copy into its log and a
 * fence, no system call); without it, or wherever tdax cannot answer
 * (device full, a file tdax does not manage, policy `never`), it is a real
 * msync of the range -- slower, never less durable.
 *
 *	int fd = open("log", O_RDWR | O_CREAT, 0644);
 *	ftruncate(fd, 1 << 20);
 *	char *p = tdax_map(fd, 0, 1 << 20, TDAX_MAP_PIN);
 *	memcpy(p + off, rec, n);
 *	tdax_persist(p + off, n);   // durable: survives kill -9 and power loss
 *	tdax_unmap(p, 1 << 20);
 *
 * The mapping is the file's own (a shared mapping of its page cache): every
 * other process reads and writes the same bytes as through read() and
 * write(), at once. Stores are durable only once a tdax_persist (or an
 * fsync/fdatasync of the file, or msync) covering them has returned 0.
 * While it lives, tdax keeps the mapped ranges in the device ("pinned"):
 * the policy never downgrades them, and device pressure downgrades
 * transparent upgrades first (`tdax status` shows pins).
 *
 * Every call sets errno on failure, as the system calls it stands for.
 */
#ifndef TDAX_H
#define TDAX_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* tdax_map flags. */
#define TDAX_MAP_PIN 0x1 /* keep the pages resident as well (mlock): no fault on a store */

/*
 * Map length bytes of the file open as fd (for reading and writing) at
 * offset (a multiple of the page size), readable and writable, shared with
 * the file. The range must lie within the file's size (extend it with
 * ftruncate first). Returns the address, or NULL with errno: EINVAL (bad
 * flags, length 0, offset not page-aligned), EBADF, EACCES (fd not open
 * for reading and writing), ENODEV, ENOMEM or EAGAIN (as mmap and mlock),
 * EMFILE (more than TDAX_MAPS_MAX mappings in the process).
 */
void *tdax_map(int fd, off_t offset, size_t length, int flags);

/*
 * Make the stores to [addr, addr + length) durable: when it returns 0, the
 * bytes survive a crash of the process and a power failure, and are the
 * file's. The range must lie within one mapping of tdax_map (EINVAL if
 * not). -1 with errno (EIO, ENOSPC, ...) if the kernel's write-back failed.
 */
int tdax_persist(const void *addr, size_t length);

/*
 * Unmap a mapping of tdax_map (addr and length as it was made: EINVAL if
 * not). Stores not persisted are left to the page cache, as munmap leaves
 * them; persisted ones are the file's already. The ranges are unpinned.
 */
int tdax_unmap(void *addr, size_t length);

/* Mappings a process may hold at once. */
#define TDAX_MAPS_MAX 64

#ifdef __cplusplus
}
#endif

#endif
