/*
 * bypass -- bypass mode (tdax run --mode bypass; SPEC "Bypass mode", the
 * Transparent DAX Mappings paper §4): a *promoted* file's writes are
 * copied into the device log and nowhere else -- no system call -- and its
 * syncs are a fence. The kernel gets the bytes later, when the file is
 * *demoted*: its records are written into the file (in order, as recovery
 * would), its file position is put back, and it goes on in coherent mode.
 *
 * First step (#19): the device holds the promoted file's bytes as log
 * records; reads are not served from the device. So everything that could
 * see the kernel's copy of a promoted file demotes it first, in this
 * process (a read, lseek, fstat or stat of it, mmap, close, dup, fcntl,
 * sendfile/splice/copy_file_range, fork, exec, sending it over a socket,
 * truncate, fallocate, unlink, rename, exit) and in any other (their open
 * breaks the write lease: the write-back thread demotes, then lets it go).
 *
 * Which files: in bypass mode every managed descriptor of a registered
 * file takes this mode's entries; a file is promoted after a sync that
 * found it all logged (the policy upgraded what it writes) while this
 * process holds a write lease on its only open file and no other
 * descriptor of it; otherwise its calls are coherent mode's.
 *
 * Order: a per-file lock of this process (recursive: a signal handler may
 * write while its thread is inside) is held around each write, around
 * promotion and demotion, and around the look of a sync; a real sync
 * (coherent mode's, or a checkpoint of the write-back thread) runs outside
 * it, counted, and no file is promoted while one runs. So no checkpoint
 * ever releases a record whose bytes the file does not have yet.
 *
 * Death: the entry's rt.deferred names the process (pid) whose records the
 * file may lack. The next process to attach to the device, or `tdax
 * recover`, writes the records of a dead one's file into it (recover.c).
 */
#ifndef TDAX_BYPASS_H
#define TDAX_BYPASS_H

#include "preload/mode.h"

/* Bypass mode's table of entry points (mode.h). */
extern const struct tdax_mode_ops tdax_bypass_mode;

#endif
