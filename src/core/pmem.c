/*
 * pmem -- libpmem2 loaded on first use (pmem.h).
 */
#define _GNU_SOURCE
#include "core/pmem.h"

#include <dlfcn.h>
#include <stdio.h>
#include <pthread.h>

/* The soname of the libpmem2 the build was made against (Debian 12: PMDK 1.12). */
#define PMEM2_SONAME "libpmem2.so.1"

struct tdax_pmem2 tdax_pmem2;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[256];

static void load(void)
{
	void *h = dlopen(PMEM2_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(failure, sizeof(failure), "%s", dlerror());
		return;
	}
#define RESOLVE(name)                                                                  \
	if (!(tdax_pmem2.name = (__typeof__(pmem2_##name) *)dlsym(h, "pmem2_" #name))) {   \
		snprintf(failure, sizeof(failure), "%s has no pmem2_%s", PMEM2_SONAME, #name); \
		return;                                                                \
	}
	TDAX_PMEM2_FUNCTIONS(RESOLVE)
#undef RESOLVE
}

int tdax_pmem2_load(struct tdax_err *err)
{
	pthread_once(&once, load);
	if (failure[0])
		return tdax_errf(err, "cannot load PMDK's %s (%s); install it: apt-get install libpmem2",
				 PMEM2_SONAME, failure);
	return 0;
}
