/*
 * fault -- the synchronous fault signals in tdax's own accesses. The
 * kernel answers a call whose buffers, or whose iovec array, are not the
 * caller's memory with EFAULT; where tdax itself reads them before the
 * kernel does (an iovec array, the bytes of a promoted file's write, a
 * path it looks at) or
 * writes them (a read served from the block cache), the same mistake
 * would be a SIGSEGV in the application. So tdax looks first, one access a
 * page under a handler that turns its fault into "no", and then leaves the
 * call to the kernel, which says EFAULT. The handlers (SIGSEGV, and SIGBUS,
 * which watch.h needs too) pass every other fault to the handler that was
 * there before them, as if tdax had none.
 */
#ifndef TDAX_FAULT_H
#define TDAX_FAULT_H

#include <stdbool.h>
#include <sys/uio.h>

/* Install the handlers (at attach, once the device is mapped). */
void tdax_fault_start(void);

/* Can the iovec array iov[0..n) be read? (Not the buffers it names.) */
bool tdax_fault_iovec_readable(const struct iovec *iov, int n);
/* Can the array and every buffer it names be read? */
bool tdax_fault_readable(const struct iovec *iov, int n);
/* Can the path be read, to a NUL within PATH_MAX bytes? (NULL cannot; one
 * without such an end is the kernel's ENAMETOOLONG.) */
bool tdax_fault_path_readable(const char *path);
/* Can the array be read and the first len bytes of the buffers it names
 * be written? The probe writes back the byte it read, one a page, only
 * where the caller is about to write: a read's len, not what it asked. */
bool tdax_fault_writable(const struct iovec *iov, int n, size_t len);

#endif
