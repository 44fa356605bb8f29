/*
 * pmem -- PMDK libpmem2, loaded when a device region is first mapped
 * instead of linked. libpmem2 brings libndctl, libdaxctl, libudev, libkmod,
 * libzstd, liblzma and libcrypto along: about 3 ms of loading and
 * relocation in every process that loads libtdax.so, most of which never
 * map a region (start.h). The functions are called through the table:
 * tdax_pmem2.map_new(...) is libpmem2's pmem2_map_new(...).
 */
#ifndef TDAX_PMEM_H
#define TDAX_PMEM_H

#include <libpmem2.h>

#include "core/util.h"

/* X(name): libpmem2's pmem2_<name>, the functions tdax uses. */
#define TDAX_PMEM2_FUNCTIONS(X)                                                        \
	X(config_new)                                                                  \
	X(config_delete)                                                               \
	X(config_set_required_store_granularity)                                       \
	X(source_from_fd)                                                              \
	X(source_delete)                                                               \
	X(map_new)                                                                     \
	X(map_delete)                                                                  \
	X(map_get_address)                                                             \
	X(map_get_size)                                                                \
	X(map_get_store_granularity)                                                   \
	X(get_flush_fn)                                                                \
	X(get_drain_fn)                                                                \
	X(get_memcpy_fn)                                                               \
	X(errormsg)

#define TDAX_PMEM2_FIELD(name) __typeof__(pmem2_##name) *name;
struct tdax_pmem2 {
	TDAX_PMEM2_FUNCTIONS(TDAX_PMEM2_FIELD)
};
#undef TDAX_PMEM2_FIELD

extern struct tdax_pmem2 tdax_pmem2;

/* Load libpmem2 (once; thread-safe). 0, or -1 with err saying what is
 * missing and how to install it. */
int tdax_pmem2_load(struct tdax_err *err);

#endif
