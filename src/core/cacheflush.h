/*
 * cacheflush -- the persistence primitives of the emulated backend: this
 * CPU's cache-line write-back (CLWB, else CLFLUSHOPT, else CLFLUSH) and a
 * store fence, the same instructions libpmem2 uses for memory that is
 * persistent after cache flushes (ADR: CXL memory, NVDIMMs). The emulated
 * region lives on tmpfs, where libpmem2 would persist with msync; with
 * these a barrier costs what it costs on CXL memory, and a process that maps
 * an emulated region never loads libpmem2 (pmem.h says why that matters).
 * The signatures are libpmem2's, so the device calls either alike.
 *
 * On a platform whose CPU caches are in the persistence domain (CXL's
 * Global Persistent Flush, eADR: on power loss the caches are written to
 * the device first) a store persists once it is ordered: no line is
 * written back, a fence is all a barrier costs (libpmem2's byte
 * granularity). The emulated region can be told it is such memory
 * (device.h, TDAX_PERSIST_GPF); these are its primitives too.
 */
#ifndef TDAX_CACHEFLUSH_H
#define TDAX_CACHEFLUSH_H

#include <libpmem2.h>

/* This CPU's best flush (chosen once). */
pmem2_flush_fn tdax_cacheflush_fn(void);
/* No flush: the caches are in the persistence domain (GPF, eADR). */
void tdax_cacheflush_none(const void *p, size_t n);
/* A store fence: every flush before it has reached the persistence domain. */
void tdax_cacheflush_drain(void);
/* A copy made persistent (drained unless flags has PMEM2_F_MEM_NODRAIN):
 * memcpy and a flush of each line, or, from 512 bytes on, non-temporal
 * stores, as libpmem2 copies on real persistent memory. */
void *tdax_cacheflush_memcpy(void *dst, const void *src, size_t n, unsigned flags);
/* The same copy for caches in the persistence domain: no line flushed. */
void *tdax_cacheflush_memcpy_gpf(void *dst, const void *src, size_t n, unsigned flags);

#endif
