/*
 * interpose -- what the hook files (interpose*.c) share. A hook is thin: it
 * decodes the call, looks the descriptor up, and hands the operation to the
 * file's mode (coherent.h) or to the kernel.
 */
#ifndef TDAX_INTERPOSE_H
#define TDAX_INTERPOSE_H

#include <stdint.h>

/* A hook libtdax.so exports (the build's version script lists these). */
#define EXPORT __attribute__((visibility("default")))

/* Another name libtdax.so exports for hook `target`: the C library's other
 * public name of the call (__write for write, ...), which a program may
 * call instead. At the start of a line, as EXPORT (the version script). */
#define EXPORT_ALIAS(name, target) \
	EXPORT __typeof__(target) name __attribute__((alias(#target), copy(target)))

/* The next definition of `name` (libc's, or libaio's and liburing's for
 * theirs), looked up on first use: for hooks of functions tdax itself never
 * calls (those are in state.h's table). Needs <dlfcn.h> and <stdatomic.h>. */
#define REAL(name)                                                                        \
	({                                                                                \
		static __typeof__(name) *_Atomic real_;                                   \
		__typeof__(name) *fn_ = atomic_load_explicit(&real_, memory_order_relaxed); \
		if (!fn_) {                                                               \
			fn_ = (__typeof__(name) *)dlsym(RTLD_NEXT, #name);                \
			atomic_store_explicit(&real_, fn_, memory_order_relaxed);         \
		}                                                                         \
		fn_;                                                                      \
	})

/* Asynchronous I/O tdax cannot follow starts in this process (an io_uring):
 * every file it has or opens for writing goes to the kernel's sync path. */
void tdax_go_blind(void);

/* A thread is about to be made by pthread_create, called from caller: if
 * caller is in a Go library (c-shared), its runtime starts there and is
 * rewritten, or the process goes blind (interpose_go.c). */
void tdax_go_thread_made_by(uintptr_t caller);

/* The kernel's AIO is about to submit iocbs[0..n) (io_submit): the files
 * they write go to the kernel's sync path (interpose_fd.c). */
struct iocb;
void tdax_aio_submitting(long n, struct iocb *const *iocbs);

/* A clone about to be made with these flags: one that shares memory and
 * not descriptors makes the process blind (tdax_go_blind). */
void tdax_tables_split(unsigned long flags);

/* openat2(2) made through syscall(2): the open hooks' work (interpose.c). */
struct open_how;
int tdax_openat2(int dirfd, const char *path, const struct open_how *how, size_t size);

#endif
