/*
 * device -- the device region: the hybrid SSD's persistent memory as this
 * host maps it (SPEC §1). Owns the backends (emulated, fsdax, devdax), the
 * on-device header and layout, and the persistence primitives (libpmem2,
 * plus the emulated backend's extra cost per barrier and bandwidth cap).
 *
 * The layout of the region (offsets, entry sizes, version): core/layout.h.
 */
#ifndef TDAX_DEVICE_H
#define TDAX_DEVICE_H

#include <libpmem2.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/layout.h"
#include "core/util.h"

/* The default region is per user: /dev/shm/tdax-UID (tdax_default_device()),
 * so that no user's default is a path another user can create first. */
#define TDAX_DEFAULT_DEVICE_HELP "/dev/shm/tdax-UID"
#define TDAX_MAX_PERSIST_COST_NS 1000000u /* emulated barrier cost: at most 1 ms */

/*
 * Where stores become persistent (emulated backend; libpmem2 finds out for
 * real memory). ADR: a store persists once its cache line is written back
 * and fenced (CXL memory, NVDIMMs). GPF: the CPU caches are in the
 * persistence domain (CXL Global Persistent Flush, eADR), so a store
 * persists once fenced, and no line is written back.
 */
enum tdax_persistence {
	TDAX_PERSIST_ADR = 0,
	TDAX_PERSIST_GPF = 1,
};

enum tdax_backend {
	TDAX_BACKEND_EMULATED = 1, /* tmpfs or hugetlbfs file: simulated persistence */
	TDAX_BACKEND_FSDAX = 2,    /* file on a -o dax file system */
	TDAX_BACKEND_DEVDAX = 3,   /* /dev/daxX.Y character device */
};

struct tdax_super {
	char magic[8];
	uint32_t version;
	uint32_t backend;
	uint8_t uuid[16];
	uint64_t capacity;        /* bytes of the region in use */
	uint64_t created_unix;
	uint64_t persist_cost_ns; /* emulated: extra cost of each persist barrier */
	uint64_t bandwidth_mbps;  /* emulated: copy bandwidth cap, 0 = none */
	uint64_t files_off;
	uint32_t max_files;
	uint32_t file_entry_size;
	uint64_t ranges_off;
	uint32_t max_ranges;
	uint32_t range_entry_size;
	uint64_t segs_off;
	uint32_t nsegs;
	uint32_t seg_size;
	uint32_t persistence;     /* emulated: enum tdax_persistence (0 in regions before it) */
	uint32_t crc;             /* crc32c of everything above */
};

enum { TDAX_STATE_CLEAN = 1, TDAX_STATE_UNCLEAN = 2 };

struct tdax_state {
	char boot_id[40];         /* boot id of last use, NUL-terminated */
	uint32_t clean;           /* TDAX_STATE_* */
	uint32_t crc;
};

struct tdax_device {
	char path[PATH_MAX];
	int fd;                   /* while opening only: closed once mapped */
	/* What path named when it was mapped (the descriptor's fstat). */
	uint64_t file_dev, file_ino;
	uid_t file_uid;
	gid_t file_gid;
	mode_t file_mode;
	enum tdax_backend backend;
	enum tdax_persistence persistence; /* emulated; from the header, known before the mapping */
	struct pmem2_source *src;
	struct pmem2_map *map;
	char *base;
	uint64_t size;
	struct tdax_super *sb;    /* &geom: never read from the writable region again */
	struct tdax_state *st;
	_Atomic uint64_t *seq;
	_Atomic uint32_t *reglock;
	_Atomic uint64_t *index_epoch; /* files.c: odd while the index is rebuilt */
	_Atomic uint32_t *index_used;  /* files.c: index slots not empty (live or dead) */
	_Atomic uint64_t *active_plus1; /* files.c: active entries + 1, never fewer; 0: not known */
	_Atomic uint64_t *registrations; /* files.c: entries made since the region was made */
	pmem2_flush_fn flush;
	pmem2_drain_fn drain;
	pmem2_memcpy_fn memcpy;
	uint64_t persist_cost_ns;
	uint64_t bandwidth_mbps;
	uint64_t open_id;         /* unique per opening in this process */
	_Atomic uint32_t *mapped; /* per segment: bytes of its room mapped in this process (log.c) */
	struct tdax_super geom;   /* the super-block as validated at open */
};

struct tdax_create_opts {
	const char *path;
	enum tdax_backend backend;
	uint64_t capacity;        /* 0: default (emulated/fsdax) or whole device (devdax) */
	uint64_t persist_cost_ns;
	uint64_t bandwidth_mbps;
	enum tdax_persistence persistence; /* emulated */
	uint32_t seg_size;        /* 0: default */
	bool force;               /* reformat an existing tdax device or file */
	bool set_owner;
	uid_t owner;
	gid_t group;
	mode_t mode;              /* 0: 0600 */
};

enum {
	TDAX_OPEN_ALLOW_SHARED = 1, /* accept a region other users can write or own */
	TDAX_OPEN_NO_PREFAULT = 2,  /* pre-fault nothing now (segments are pre-faulted when claimed) */
	TDAX_OPEN_ANY_OWNER = 4,    /* root inspecting, recovering or removing a user's region */
};

const char *tdax_backend_name(enum tdax_backend b);
/* How stores to the mapped region become persistent, in words for people. */
const char *tdax_device_persistence(const struct tdax_device *dev);
int tdax_backend_parse(const char *s, enum tdax_backend *out);
const char *tdax_persistence_name(enum tdax_persistence p); /* "adr", "gpf" */
int tdax_persistence_parse(const char *s, enum tdax_persistence *out);
/* /dev/shm/tdax-UID for this process's effective uid. */
const char *tdax_default_device(void);


/*
 * For the region's creator (core/format.c): open or make the file or device
 * opts names -- every check create makes, before anything is written --,
 * size it, set its owner and mode, and map it (not pre-faulted) into *dev;
 * *capacity: the bytes the new region may use. 0, or -1 with err and
 * nothing left behind (a file it made is removed). The region's bytes are
 * not touched: formatting them is the creator's.
 */
int tdax_device_make(const struct tdax_create_opts *opts, struct tdax_device *dev,
		     uint64_t *capacity, struct tdax_err *err);
/* Unmap a region tdax_device_make() mapped. */
void tdax_device_unmake(struct tdax_device *dev);
/* Use the geometry sb (written by the creator) for dev's tables. */
void tdax_device_set_geometry(struct tdax_device *dev, const struct tdax_super *sb);
/* The super-block's checksum (of every field before crc). */
uint32_t tdax_super_crc(const struct tdax_super *sb);

/* Open and validate; on success *out is mapped and ready. */
int tdax_device_open(const char *path, int flags, struct tdax_device **out, struct tdax_err *err);
void tdax_device_close(struct tdax_device *dev);

/* Remove an emulated/fsdax region file, or wipe a devdax header. */
int tdax_device_destroy(const char *path, struct tdax_err *err);

/* Map every page of [p, p+n) now, so that no access to it faults later
 * (the hot path never takes a page fault on the region). */
void tdax_device_prefault(const struct tdax_device *dev, void *p, size_t n);
/* The page faults this thread has taken so far (the kernel counts those
 * MADV_POPULATE_WRITE takes for it too): taken before and after mapping
 * device memory in, the faults that cost -- one per 2 MiB not mapped yet
 * with huge pages, one per 4 KiB without. */
uint64_t tdax_thread_faults(void);

/* The size of the pages device memory is mapped with (DaxVM,
 * shared/references: fewer, larger pages take fewer faults and TLB misses
 * on every copy to and from it), and where it comes from, in words. size
 * is 0 where the kernel decides per 2 MiB (fsdax: the file's extents). */
struct tdax_pages {
	uint64_t size;
	char how[200];
};
void tdax_device_pages(const struct tdax_device *dev, struct tdax_pages *out);

/* Persistence: flush a range (no ordering yet) / drain (fence + emulated cost). */
static inline void tdax_flush(const struct tdax_device *dev, const void *p, size_t n)
{
	dev->flush(p, n);
}
void tdax_drain(const struct tdax_device *dev, size_t bytes_copied);
void tdax_dev_persist(const struct tdax_device *dev, const void *p, size_t n);

/* True if the page cache may have been lost since the region was last used. */
bool tdax_device_boot_changed(const struct tdax_device *dev);
/* Record this boot as the last use and the clean/unclean state. */
void tdax_device_set_state(struct tdax_device *dev, uint32_t clean);

#endif
