/*
 * interpose -- what the hook files (interpose*.c) share. A hook is thin: it
 * decodes the call, looks the descriptor up, and hands the operation to the
 * file's mode (coherent.h) or to the kernel.
 */
#ifndef TDAX_INTERPOSE_H
#define TDAX_INTERPOSE_H

/* A hook libtdax.so exports (the build's version script lists these). */
#define EXPORT __attribute__((visibility("default")))

/* Asynchronous I/O tdax cannot follow starts in this process (an io_uring):
 * every file it has or opens for writing goes to the kernel's sync path. */
void tdax_go_blind(void);

#endif
