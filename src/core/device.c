/*
 * device -- make (for core/format.c), open, validate and map the device
 * region; persistence primitives. Every check that can refuse a path
 * happens here, before anything is written, so bad input never costs data.
 */
#define _GNU_SOURCE
#include "core/device.h"
#include "core/sys.h"
#include "core/cacheflush.h"
#include "core/crc32c.h"
#include "core/pmem.h"
#include "core/pmtrace.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

_Static_assert(TDAX_SUPER_OFF == 0 && sizeof(struct tdax_super) <= TDAX_STATE_OFF,
	       "super overlaps state");
_Static_assert(sizeof(struct tdax_state) <= TDAX_SEQ_OFF - TDAX_STATE_OFF, "state overlaps seq");
_Static_assert(TDAX_SEQ_OFF % TDAX_CACHELINE == 0 && TDAX_REGLOCK_OFF - TDAX_SEQ_OFF >= TDAX_CACHELINE &&
	       TDAX_REGLOCK_OFF % TDAX_CACHELINE == 0 && TDAX_STATS_OFF - TDAX_REGLOCK_OFF >= TDAX_CACHELINE,
	       "the sequence counter and the registration lock have a cache line each");
_Static_assert(TDAX_INDEX_EPOCH_OFF % 8 == 0 && TDAX_INDEX_USED_OFF % 4 == 0 &&
	       TDAX_INDEX_USED_OFF + 4 <= TDAX_FILES_ACTIVE_OFF && TDAX_FILES_ACTIVE_OFF % 8 == 0 &&
	       TDAX_FILES_ACTIVE_OFF + 8 <= TDAX_REGLOCK_OFF + TDAX_CACHELINE,
	       "the file index's words are aligned, in the registration lock's line");

const char *tdax_backend_name(enum tdax_backend b)
{
	switch (b) {
	case TDAX_BACKEND_EMULATED: return "emulated";
	case TDAX_BACKEND_FSDAX: return "fsdax";
	case TDAX_BACKEND_DEVDAX: return "devdax";
	}
	return "unknown";
}

int tdax_backend_parse(const char *s, enum tdax_backend *out)
{
	for (int b = TDAX_BACKEND_EMULATED; b <= TDAX_BACKEND_DEVDAX; b++)
		if (strcmp(s, tdax_backend_name((enum tdax_backend)b)) == 0) {
			*out = (enum tdax_backend)b;
			return 0;
		}
	return -1;
}

const char *tdax_default_device(void)
{
	static char path[48];
	snprintf(path, sizeof(path), "/dev/shm/tdax-%u", (unsigned)geteuid());
	return path;
}

uint32_t tdax_super_crc(const struct tdax_super *sb)
{
	return tdax_crc32c(0, sb, offsetof(struct tdax_super, crc));
}

static uint32_t state_crc(const struct tdax_state *st)
{
	return tdax_crc32c(0, st, offsetof(struct tdax_state, crc));
}

void tdax_drain(const struct tdax_device *dev, size_t bytes_copied)
{
	dev->drain();
	if (dev->persist_cost_ns || dev->bandwidth_mbps) {
		uint64_t ns = dev->persist_cost_ns;
		if (dev->bandwidth_mbps)
			ns += (uint64_t)bytes_copied * 1000u / dev->bandwidth_mbps;
		tdax_spin_ns(ns);
	}
}

void tdax_dev_persist(const struct tdax_device *dev, const void *p, size_t n)
{
	dev->flush(p, n);
	tdax_drain(dev, 0);
}

/* The file system of fd, or (fd < 0: before path is created) of its directory. */
static int fs_type(const char *path, int fd, long *type, struct tdax_err *err)
{
	struct statfs sf;
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	if ((fd >= 0 ? fstatfs(fd, &sf) : statfs(dirname(dir), &sf)) != 0)
		return tdax_errf(err, "%s: cannot inspect its file system: %s", path, strerror(errno));
	*type = (long)sf.f_type;
	return 0;
}

static int kind_error(const char *path, struct tdax_err *err)
{
	return tdax_errf(err, "%s: is neither a regular file nor a character device; point "
		"--device at a file on /dev/shm (emulated), on a -o dax mount (fsdax), or at "
		"/dev/daxX.Y (devdax)", path);
}

/* Refuse a region whose file type or file system does not fit the backend:
 * st and fd describe the opened region, or (NULL, -1) a file not made yet. */
static int check_backend_path(const char *path, int fd, const struct stat *st,
			      enum tdax_backend b, struct tdax_err *err)
{
	if (b == TDAX_BACKEND_DEVDAX) {
		if (!S_ISCHR(st->st_mode))
			return tdax_errf(err, "%s: the devdax backend needs a character device such as "
				"/dev/dax0.0 (make one with 'ndctl create-namespace -m devdax')", path);
		char sys[128], real[PATH_MAX];
		snprintf(sys, sizeof(sys), "/sys/dev/char/%u:%u/subsystem",
			 major(st->st_rdev), minor(st->st_rdev));
		if (!realpath(sys, real) || strcmp(basename(real), "dax") != 0)
			return tdax_errf(err, "%s: character device %u:%u is not a DAX device; "
				"use /dev/daxX.Y, or a file with --backend emulated|fsdax",
				path, major(st->st_rdev), minor(st->st_rdev));
		return 0;
	}
	if (st && !S_ISREG(st->st_mode))
		return kind_error(path, err);
	if (b == TDAX_BACKEND_EMULATED) {
		long type = 0;
		if (fs_type(path, fd, &type, err))
			return -1;
		if (type != TMPFS_MAGIC && type != HUGETLBFS_MAGIC)
			return tdax_errf(err, "%s: the emulated backend needs a file on tmpfs or hugetlbfs "
				"(for example /dev/shm/tdax-%u); on a -o dax mount use --backend fsdax",
				path, (unsigned)geteuid());
	}
	return 0;
}

/*
 * The emulated backend: a shared mapping of the tmpfs file, persisted with
 * this CPU's cache-line flushes and a fence (cacheflush.h), so that
 * barriers cost what they cost on CXL memory; no libpmem2. A region made
 * with --persistence gpf emulates memory whose CPU caches are in the
 * persistence domain: a fence, no flush.
 */
static int map_emulated(struct tdax_device *dev, struct tdax_err *err)
{
	struct stat st;
	void *p = tdax_sys_fstat(dev->fd, &st) == 0
		? tdax_sys_mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, dev->fd, 0)
		: MAP_FAILED;
	if (p == MAP_FAILED)
		return tdax_errf(err, "%s: cannot map the device region: %s", dev->path, strerror(errno));
	dev->base = p;
	dev->size = (size_t)st.st_size;
	bool gpf = dev->persistence == TDAX_PERSIST_GPF;
	dev->flush = gpf ? tdax_cacheflush_none : tdax_cacheflush_fn();
	dev->drain = tdax_cacheflush_drain;
	dev->memcpy = gpf ? tdax_cacheflush_memcpy_gpf : tdax_cacheflush_memcpy;
	return 0;
}

/* Real persistent memory (fsdax, devdax): libpmem2, loaded now (pmem.h),
 * maps it and picks its primitives for what the platform persists. */
static int map_pmem2(struct tdax_device *dev, struct tdax_err *err)
{
	if (tdax_pmem2_load(err) != 0)
		return -1;
	struct pmem2_config *cfg = NULL;
	int rc = tdax_pmem2.config_new(&cfg);
	if (rc == 0)
		rc = tdax_pmem2.config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_CACHE_LINE);
	if (rc == 0)
		rc = tdax_pmem2.source_from_fd(&dev->src, dev->fd);
	if (rc == 0)
		rc = tdax_pmem2.map_new(&dev->map, cfg, dev->src);
	if (cfg)
		tdax_pmem2.config_delete(&cfg);
	if (rc != 0) {
		if (rc == PMEM2_E_GRANULARITY_NOT_SUPPORTED)
			return tdax_errf(err, "%s: not byte-addressable persistent memory (is the file "
				"system mounted with -o dax?); use --backend emulated on /dev/shm "
				"to emulate it", dev->path);
		return tdax_errf(err, "%s: cannot map the device region: %s", dev->path,
				 tdax_pmem2.errormsg());
	}
	dev->base = tdax_pmem2.map_get_address(dev->map);
	dev->size = tdax_pmem2.map_get_size(dev->map);
	dev->flush = tdax_pmem2.get_flush_fn(dev->map);
	dev->drain = tdax_pmem2.get_drain_fn(dev->map);
	dev->memcpy = tdax_pmem2.get_memcpy_fn(dev->map);
	tdax_pmem2.source_delete(&dev->src);
	return 0;
}

static void populate(void *p, size_t n);

/* Map the whole of dev->fd, then close it. */
static int map_region(struct tdax_device *dev, int flags, struct tdax_err *err)
{
	if ((dev->backend == TDAX_BACKEND_EMULATED ? map_emulated(dev, err) : map_pmem2(dev, err)) != 0)
		return -1;
	if (tdax_pmtrace_attach(dev->base, dev->size, &dev->flush, &dev->drain, &dev->memcpy) != 0)
		return tdax_errf(err, "%s: cannot write the persist-order trace %s: %s", dev->path,
				 secure_getenv(TDAX_PMTRACE_ENV), strerror(errno));
	/* The mapping is all tdax needs from here on: no descriptor of its own
	 * stays in the application (whose stdout's number it may have been). */
	struct stat st;
	if (tdax_sys_fstat(dev->fd, &st) == 0) {
		dev->file_dev = st.st_dev;
		dev->file_ino = st.st_ino;
		dev->file_uid = st.st_uid;
		dev->file_gid = st.st_gid;
		dev->file_mode = st.st_mode;
	}
	tdax_sys_close(dev->fd);
	dev->fd = -1;
	madvise(dev->base, dev->size, MADV_HUGEPAGE);
	if (!(flags & TDAX_OPEN_NO_PREFAULT))
		populate(dev->base, dev->size);
	return 0;
}

/* Map every page of [p, p+n) in for writing now. */
static void populate(void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095;
	n += (uintptr_t)p - a;
	if (madvise((void *)a, n, MADV_POPULATE_WRITE) != 0)
		for (size_t o = 0; o < n; o += 4096)
			(void)*(volatile char *)(a + o);
}

uint64_t tdax_thread_faults(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_THREAD, &ru) == 0 ? (uint64_t)ru.ru_minflt + (uint64_t)ru.ru_majflt : 0;
}

void tdax_device_prefault(const struct tdax_device *dev, void *p, size_t n)
{
	(void)dev;
	populate(p, n);
}

static void unmap_region(struct tdax_device *dev)
{
	if (dev->map)
		tdax_pmem2.map_delete(&dev->map);
	else if (dev->base)
		tdax_sys_munmap(dev->base, dev->size);
	dev->base = NULL;
	if (dev->src)
		tdax_pmem2.source_delete(&dev->src);
	if (dev->fd >= 0)
		tdax_sys_close(dev->fd);
	dev->fd = -1;
}

/* dev->geom holds the validated super-block: the geometry is never read
 * from the region again, so a region changed after its validation (by
 * anyone who can write it) cannot move a table out of the mapping. */
static void set_pointers(struct tdax_device *dev)
{
	dev->sb = &dev->geom;
	dev->st = (struct tdax_state *)(dev->base + TDAX_STATE_OFF);
	dev->seq = (_Atomic uint64_t *)(dev->base + TDAX_SEQ_OFF);
	dev->reglock = (_Atomic uint32_t *)(dev->base + TDAX_REGLOCK_OFF);
	dev->index_epoch = (_Atomic uint64_t *)(dev->base + TDAX_INDEX_EPOCH_OFF);
	dev->index_used = (_Atomic uint32_t *)(dev->base + TDAX_INDEX_USED_OFF);
	dev->active_plus1 = (_Atomic uint64_t *)(dev->base + TDAX_FILES_ACTIVE_OFF);
	dev->registrations = (_Atomic uint64_t *)(dev->base + TDAX_REGISTRATIONS_OFF);
	dev->persist_cost_ns = dev->sb->persist_cost_ns;
	dev->bandwidth_mbps = dev->sb->bandwidth_mbps;
}

void tdax_device_set_geometry(struct tdax_device *dev, const struct tdax_super *sb)
{
	dev->geom = *sb;
	set_pointers(dev);
}

void tdax_device_set_state(struct tdax_device *dev, uint32_t clean)
{
	struct tdax_state *st = dev->st;
	char boot[TDAX_BOOT_ID_LEN + 1];
	tdax_boot_id(boot);
	if (strcmp(st->boot_id, boot) != 0)
		atomic_store(dev->reglock, 0); /* a holder from another boot is gone */
	memset(st->boot_id, 0, sizeof(st->boot_id));
	memcpy(st->boot_id, boot, strlen(boot));
	st->clean = clean;
	st->crc = state_crc(st);
	tdax_dev_persist(dev, st, sizeof(*st));
}

bool tdax_device_boot_changed(const struct tdax_device *dev)
{
	char boot[TDAX_BOOT_ID_LEN + 1];
	tdax_boot_id(boot);
	if (dev->st->crc != state_crc(dev->st))
		return true; /* unknown: assume the worst, replay */
	return strncmp(dev->st->boot_id, boot, sizeof(dev->st->boot_id)) != 0;
}

const char *tdax_device_persistence(const struct tdax_device *dev)
{
	if (dev->backend == TDAX_BACKEND_EMULATED)
		return dev->persistence == TDAX_PERSIST_GPF
			? "CPU caches in the persistence domain (GPF), simulated: survives process "
			  "crashes and simulated power failures, not real power loss"
			: "persistent after cache flushes (ADR), simulated: survives process crashes "
			  "and simulated power failures, not real power loss";
	switch (tdax_pmem2.map_get_store_granularity(dev->map)) {
	case PMEM2_GRANULARITY_BYTE:
		return "persistent memory, persistent once stored (eADR)";
	case PMEM2_GRANULARITY_CACHE_LINE:
		return dev->backend == TDAX_BACKEND_FSDAX
			? "persistent memory, MAP_SYNC mapping, persistent after cache flushes (ADR)"
			: "persistent memory, persistent after cache flushes (ADR)";
	default:
		return "persistent memory behind the page cache (msync)";
	}
}

static const char *const persistence_names[] = { [TDAX_PERSIST_ADR] = "adr", [TDAX_PERSIST_GPF] = "gpf" };

const char *tdax_persistence_name(enum tdax_persistence p)
{
	return (unsigned)p <= TDAX_PERSIST_GPF ? persistence_names[p] : "unknown";
}

int tdax_persistence_parse(const char *s, enum tdax_persistence *out)
{
	for (unsigned p = 0; p <= TDAX_PERSIST_GPF; p++)
		if (strcmp(s, persistence_names[p]) == 0) {
			*out = (enum tdax_persistence)p;
			return 0;
		}
	return -1;
}

/* A number from a sysfs file, or dflt. */
static uint64_t sysfs_number(const char *path, uint64_t dflt)
{
	unsigned long long v;
	char text[32] = "";
	int fd = tdax_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	ssize_t n = fd >= 0 ? tdax_sys_read(fd, text, sizeof(text) - 1) : -1;
	if (fd >= 0)
		tdax_sys_close(fd);
	bool ok = n > 0 && sscanf(text, "%llu", &v) == 1;
	return ok ? (uint64_t)v : dflt;
}

/* A numeric attribute of a device-DAX character device, from sysfs. */
static uint64_t devdax_attr(const struct stat *st, const char *attr, uint64_t dflt)
{
	char path[128];
	snprintf(path, sizeof(path), "/sys/dev/char/%u:%u/%s", major(st->st_rdev),
		 minor(st->st_rdev), attr);
	return sysfs_number(path, dflt);
}

/* The huge page size of the hugetlbfs file fd, 0 if it is not on one. */
static uint64_t huge_page(int fd)
{
	struct statfs sf;
	return fstatfs(fd, &sf) == 0 && (long)sf.f_type == HUGETLBFS_MAGIC ? (uint64_t)sf.f_bsize : 0;
}

/* Why a region of cap bytes found no room (fallocate's error e). */
static int alloc_error(const char *path, uint64_t cap, uint64_t huge, int e, struct tdax_err *err)
{
	if (huge && e == ENOSPC) {
		char sys[96];
		snprintf(sys, sizeof(sys), "/sys/kernel/mm/hugepages/hugepages-%llukB/free_hugepages",
			 (unsigned long long)(huge / 1024));
		return tdax_errf(err, "%s: hugetlbfs has too few free huge pages for %llu bytes "
			"(%llu free, of %llu KiB each); reserve more (sysctl vm.nr_hugepages=N) or "
			"choose a smaller --size", path, (unsigned long long)cap,
			(unsigned long long)sysfs_number(sys, 0), (unsigned long long)(huge / 1024));
	}
	return tdax_errf(err, "%s: cannot allocate %llu bytes or set its owner/mode: %s", path,
			 (unsigned long long)cap, strerror(e));
}

/* The word in brackets of a sysfs choice ("always [madvise] never"). */
static bool sysfs_choice(const char *path, char *word, size_t n)
{
	char text[160] = "";
	int fd = tdax_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	ssize_t r = fd >= 0 ? tdax_sys_read(fd, text, sizeof(text) - 1) : -1;
	if (fd >= 0)
		tdax_sys_close(fd);
	const char *a = r > 0 ? strchr(text, '[') : NULL, *b = a ? strchr(a, ']') : NULL;
	if (!b || (size_t)(b - a) > n)
		return false;
	snprintf(word, n, "%.*s", (int)(b - a - 1), a + 1);
	return true;
}

void tdax_device_pages(const struct tdax_device *dev, struct tdax_pages *out)
{
	struct stat st;
	struct statfs sf;
	char thp[32];
	if (dev->backend == TDAX_BACKEND_DEVDAX && tdax_sys_stat(dev->path, &st) == 0) {
		out->size = devdax_attr(&st, "align", 2u << 20);
		snprintf(out->how, sizeof(out->how), "devdax: the namespace's alignment");
	} else if (dev->backend == TDAX_BACKEND_FSDAX) {
		out->size = 0;
		snprintf(out->how, sizeof(out->how), "fsdax: 2 MiB where the file's extents are "
			 "2 MiB-aligned (the file system decides), else 4 KiB");
	} else if (statfs(dev->path, &sf) == 0 && (long)sf.f_type == HUGETLBFS_MAGIC) {
		out->size = (uint64_t)sf.f_bsize;
		snprintf(out->how, sizeof(out->how), "hugetlbfs");
	} else if (sysfs_choice("/sys/kernel/mm/transparent_hugepage/shmem_enabled", thp, sizeof(thp)) &&
		   strcmp(thp, "never") != 0 && strcmp(thp, "deny") != 0) {
		out->size = 2u << 20;
		snprintf(out->how, sizeof(out->how), "tmpfs with transparent huge pages where the "
			 "kernel has them (shmem_enabled: %s)", thp);
	} else {
		out->size = 4096;
		snprintf(out->how, sizeof(out->how), "tmpfs, transparent huge pages off; a device on "
			 "hugetlbfs gets 2 MiB ones");
	}
}

/*
 * Read the first len bytes of a region and its size, without mapping it for
 * good. Device DAX has neither read(2) nor a seekable size: its size is in
 * sysfs, and its bytes are reached only through a mapping of whole
 * alignment units (2 MiB unless the namespace says otherwise).
 */
static int read_head(int fd, const struct stat *st, void *buf, size_t len, uint64_t *size)
{
	if (!S_ISCHR(st->st_mode)) {
		*size = (uint64_t)st->st_size;
		return tdax_sys_pread(fd, buf, len, 0) == (ssize_t)len ? 0 : -1;
	}
	*size = devdax_attr(st, "size", 0);
	size_t align = (size_t)devdax_attr(st, "align", 2u << 20);
	if (*size < align || len > align)
		return -1;
	void *p = tdax_sys_mmap(NULL, align, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -1;
	memcpy(buf, p, len);
	tdax_sys_munmap(p, align);
	return 0;
}

/* Does an existing file or device already hold a tdax header? */
static bool has_magic(int fd, const struct stat *st)
{
	char magic[8];
	uint64_t size;
	return read_head(fd, st, magic, sizeof(magic), &size) == 0 &&
	       memcmp(magic, TDAX_MAGIC, sizeof(magic)) == 0;
}

static int open_error(const char *path, const char *what, struct tdax_err *err)
{
	if (errno == EACCES || errno == EPERM)
		return tdax_errf(err, "%s: permission denied (%s); run as the device's owner, or "
			"recreate it for this user with 'tdax device create --owner USER --mode 0660'",
			path, what);
	return tdax_errf(err, "%s: cannot %s: %s", path, what, strerror(errno));
}

static int symlink_error(const char *path, struct tdax_err *err)
{
	return tdax_errf(err, "%s: is a symbolic link; tdax never follows a link to its region (it "
		"could point at another file, or into another user's directory). Give the real path "
		"with --device, or remove the link if you did not make it; nothing was changed", path);
}

/* A region that belongs to another user (not root, not us): that user could
 * read what is written through it and forge or erase its records. */
static int check_owner(const char *path, const struct stat *st, int flags, struct tdax_err *err)
{
	uid_t me = geteuid();
	if (st->st_uid == 0 || st->st_uid == me ||
	    (flags & (TDAX_OPEN_ALLOW_SHARED | TDAX_OPEN_ANY_OWNER)))
		return 0;
	return tdax_errf(err, "%s: belongs to user %u, not to you (uid %u) or root, so that user "
		"could read what is written through it and forge or erase its records; refusing it. "
		"Use a region of your own (the default is /dev/shm/tdax-%u); if you did not put it "
		"there, have it removed. To trust that user, pass --allow-shared "
		"(TDAX_ALLOW_SHARED=1)", path, (unsigned)st->st_uid, (unsigned)me, (unsigned)me);
}

/* Open an existing region for reading and writing: never through a symbolic
 * link, only a regular file or a character device, owned as check_owner
 * allows; *st describes what was opened. The descriptor, or -1 with err. */
static int open_region(const char *path, int flags, struct stat *st, struct tdax_err *err)
{
	struct stat lst;
	if (tdax_sys_lstat(path, &lst) != 0) {
		if (errno == ENOENT)
			return tdax_errf(err, "%s: no such device region; create it with 'tdax device "
				"create --device %s'", path, path);
		return open_error(path, "inspect the device region", err);
	}
	if (S_ISLNK(lst.st_mode))
		return symlink_error(path, err);
	if (!S_ISREG(lst.st_mode) && !S_ISCHR(lst.st_mode))
		return kind_error(path, err);
	if (check_owner(path, &lst, flags, err))
		return -1;
	int fd = tdax_sys_open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == ELOOP ? symlink_error(path, err)
				      : open_error(path, "open the device region", err);
	int rc = tdax_sys_fstat(fd, st) != 0
		? tdax_errf(err, "%s: cannot inspect the opened region: %s", path, strerror(errno))
		: !S_ISREG(st->st_mode) && !S_ISCHR(st->st_mode) ? kind_error(path, err)
		: check_owner(path, st, flags, err);
	if (rc) {
		tdax_sys_close(fd);
		return -1;
	}
	return fd;
}

/* Is a region of `asked` bytes (whole pages of it) with segments of seg
 * bytes possible? */
static int check_create_size(const char *path, uint64_t asked, uint32_t seg, struct tdax_err *err)
{
	uint64_t cap = asked & ~(uint64_t)4095;
	if (cap < TDAX_MIN_CAPACITY)
		return tdax_errf(err, "%s: capacity %llu bytes is too small; a device needs at least "
			"%llu bytes (8M)", path, (unsigned long long)asked,
			(unsigned long long)TDAX_MIN_CAPACITY);
	if (seg < TDAX_MIN_SEG_SIZE || seg % TDAX_MIN_SEG_SIZE ||
	    (cap - TDAX_HEADER_SIZE - (uint64_t)TDAX_DEFAULT_MAX_FILES * TDAX_FILE_ENTRY_SIZE -
	     (uint64_t)TDAX_DEFAULT_MAX_RANGES * TDAX_RANGE_ENTRY_SIZE) / seg < 4)
		return tdax_errf(err, "%s: a region of %llu bytes cannot hold 4 segments of %u bytes; "
			"use a larger device or smaller segments", path, (unsigned long long)cap, seg);
	return 0;
}

/* Remove the region file a failed create made (or emptied), if path still names it. */
static void remove_made(const char *path, const struct stat *made)
{
	struct stat now;
	if (tdax_sys_lstat(path, &now) == 0 && now.st_dev == made->st_dev && now.st_ino == made->st_ino)
		tdax_sys_unlink(path);
}

/* The file of an emulated or fsdax region: a new one (O_EXCL, never through a
 * link; *made is set), or with --force an existing one the caller owns that
 * is a tdax region or empty. Its descriptor, or -1 with err. */
static int open_region_file(const struct tdax_create_opts *o, mode_t mode, struct stat *st,
			    bool *made, struct tdax_err *err)
{
	struct stat lst;
	if (tdax_sys_lstat(o->path, &lst) != 0) {
		if (errno != ENOENT)
			return open_error(o->path, "inspect the device region", err);
		if (check_backend_path(o->path, -1, NULL, o->backend, err))
			return -1;
		int fd = tdax_sys_open(o->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd < 0 && errno == EEXIST)
			return tdax_errf(err, "%s: appeared while tdax was creating it; nothing was "
				"changed. Look at what it is, then run the command again", o->path);
		if (fd < 0)
			return open_error(o->path, "create the device region", err);
		if (tdax_sys_fstat(fd, st) != 0) {
			int e = errno;
			tdax_sys_close(fd);
			tdax_sys_unlink(o->path);
			return tdax_errf(err, "%s: cannot inspect the new file: %s", o->path, strerror(e));
		}
		*made = true;
		return fd;
	}
	if (S_ISLNK(lst.st_mode))
		return symlink_error(o->path, err);
	if (!o->force)
		return tdax_errf(err, "%s: already exists; refusing to overwrite it (it may hold "
			"unrecovered data). Run 'tdax recover' and 'tdax device destroy' first, or "
			"pass --force", o->path);
	int fd = open_region(o->path, TDAX_OPEN_ANY_OWNER, st, err);
	if (fd < 0)
		return -1;
	int rc = 0;
	if (!S_ISREG(st->st_mode))
		rc = check_backend_path(o->path, fd, st, o->backend, err);
	else if (st->st_uid != geteuid())
		rc = tdax_errf(err, "%s: belongs to user %u, not to you (uid %u); --force never "
			"overwrites another user's file. Ask its owner to remove it, or use another "
			"--device; nothing was changed", o->path, (unsigned)st->st_uid,
			(unsigned)geteuid());
	else if (st->st_size != 0 && !has_magic(fd, st))
		rc = tdax_errf(err, "%s: is not a tdax region (%llu bytes, no tdax header); --force "
			"reformats only tdax regions, never other files. If the file is not needed, "
			"remove it (rm %s) and run the command again; nothing was changed", o->path,
			(unsigned long long)st->st_size, o->path);
	if (rc) {
		tdax_sys_close(fd);
		return -1;
	}
	return fd;
}

int tdax_device_make(const struct tdax_create_opts *o, struct tdax_device *out, uint64_t *capacity,
		     struct tdax_err *err)
{
	struct tdax_device dev = { .fd = -1, .backend = o->backend, .persistence = o->persistence };
	if (tdax_crc32c_load(err) != 0)
		return -1;
	struct stat st;
	mode_t mode = (o->mode ? o->mode : 0600) & 0777;
	uint32_t seg = o->seg_size ? o->seg_size : TDAX_DEFAULT_SEG_SIZE;
	bool file = o->backend != TDAX_BACKEND_DEVDAX;
	bool made = false; /* a file this create made or emptied: removed if it fails */
	uint64_t cap = o->capacity ? o->capacity : TDAX_DEFAULT_CAPACITY;

	snprintf(dev.path, sizeof(dev.path), "%s", o->path);
	if (file && check_create_size(o->path, cap, seg, err))
		return -1;
	if (file) {
		dev.fd = open_region_file(o, mode, &st, &made, err);
	} else if (tdax_sys_lstat(o->path, &st) != 0 && errno == ENOENT) {
		return tdax_errf(err, "%s: no such device; devdax needs an existing /dev/daxX.Y",
				 o->path);
	} else {
		dev.fd = open_region(o->path, TDAX_OPEN_ANY_OWNER, &st, err);
		if (dev.fd >= 0 && (check_backend_path(o->path, dev.fd, &st, o->backend, err) ||
				    (has_magic(dev.fd, &st) && !o->force &&
				     tdax_errf(err, "%s: already holds a tdax device; refusing to reformat "
					"it. Run 'tdax recover' and 'tdax device destroy' first, or pass "
					"--force", o->path)))) {
			tdax_sys_close(dev.fd);
			dev.fd = -1;
		}
	}
	if (dev.fd < 0)
		return -1;
	/* hugetlbfs holds whole huge pages: the region takes all it gets */
	uint64_t huge = file ? huge_page(dev.fd) : 0, want = o->capacity;
	if (huge) {
		cap = (cap + huge - 1) / huge * huge;
		want = want ? cap : 0;
	}
	if (file) {
		int rc = check_backend_path(o->path, dev.fd, &st, o->backend, err) ? -1 : 0;
		if (rc == 0 && tdax_sys_ftruncate(dev.fd, 0) != 0)
			rc = errno;
		made |= rc == 0;
		if (rc == 0)
			rc = tdax_sys_fallocate(dev.fd, 0, 0, (off_t)cap) == 0 ? 0 : errno;
		if (rc == 0 && o->set_owner && tdax_syscall(SYS_fchown, dev.fd, o->owner, o->group) != 0)
			rc = errno;
		if (rc == 0 && tdax_syscall(SYS_fchmod, dev.fd, mode) != 0)
			rc = errno;
		if (rc != 0) {
			if (made)
				remove_made(o->path, &st);
			tdax_sys_close(dev.fd); /* (first: the huge pages it held are free again for the count) */
			return rc > 0 ? alloc_error(o->path, cap, huge, rc, err) : -1;
		}
	}
	if (map_region(&dev, TDAX_OPEN_NO_PREFAULT, err)) {
		if (made)
			remove_made(o->path, &st);
		unmap_region(&dev);
		return -1;
	}
	cap = want && want < dev.size ? want : dev.size;
	cap &= ~(uint64_t)4095;
	if (check_create_size(o->path, cap, seg, err)) {
		if (made)
			remove_made(o->path, &st);
		unmap_region(&dev);
		return -1;
	}
	*out = dev;
	*capacity = cap;
	return 0;
}

void tdax_device_unmake(struct tdax_device *dev)
{
	unmap_region(dev);
}

/* A geometry field that cannot be right: what, which value, what to do. */
static int bad_field(const char *path, const char *field, uint64_t value, const char *why,
		     struct tdax_err *err)
{
	return tdax_errf(err, "%s: device header field %s = %llu is invalid (%s): the header is "
		"corrupt or forged; nothing was changed. If its data is not needed, reformat it with "
		"'tdax device create --force --device %s'", path, field, (unsigned long long)value,
		why, path);
}

/* Does the table [off, off + n * size) lie inside [start, cap)? No overflow:
 * n * size fits 64 bits (both are 32-bit), and off is compared first. */
static bool table_fits(uint64_t off, uint32_t n, uint32_t size, uint64_t start, uint64_t cap)
{
	return off >= start && off <= cap && (uint64_t)n * size <= cap - off;
}

_Static_assert(TDAX_MIN_SEG_SIZE >= TDAX_SEG_HEADER_SIZE + 2 * TDAX_CACHELINE,
	       "the smallest segment holds its header and one record");

/*
 * Every field the layout is computed from, checked on its own, with
 * overflow-safe arithmetic: the tables lie inside the capacity, in order,
 * without overlap, with the entry sizes of this build. The checksum is no
 * defence here (anyone who can write the region can re-sign it).
 */
static int check_geometry(const char *path, const struct tdax_super *sb, struct tdax_err *err)
{
	uint64_t cap = sb->capacity;
	if (sb->backend < TDAX_BACKEND_EMULATED || sb->backend > TDAX_BACKEND_DEVDAX)
		return bad_field(path, "backend", sb->backend, "not 1, 2 or 3", err);
	if (cap < TDAX_MIN_CAPACITY)
		return bad_field(path, "capacity", cap, "smaller than 8 MiB", err);
	if (sb->file_entry_size != TDAX_FILE_ENTRY_SIZE)
		return bad_field(path, "file_entry_size", sb->file_entry_size, "this tdax uses 1024", err);
	if (sb->range_entry_size != TDAX_RANGE_ENTRY_SIZE)
		return bad_field(path, "range_entry_size", sb->range_entry_size, "this tdax uses 256",
				 err);
	if (sb->max_files == 0 || sb->max_files > (1u << 20))
		return bad_field(path, "max_files", sb->max_files, "must be 1..1048576", err);
	if (sb->max_ranges == 0 || sb->max_ranges > (1u << 24))
		return bad_field(path, "max_ranges", sb->max_ranges, "must be 1..16777216", err);
	if (sb->persist_cost_ns > TDAX_MAX_PERSIST_COST_NS)
		return bad_field(path, "persist_cost_ns", sb->persist_cost_ns, "at most 1000000 (1 ms) "
			"per barrier", err);
	if (sb->persistence > TDAX_PERSIST_GPF ||
	    (sb->persistence != TDAX_PERSIST_ADR && sb->backend != TDAX_BACKEND_EMULATED))
		return bad_field(path, "persistence", sb->persistence, "0 (adr), or 1 (gpf) on the "
			"emulated backend", err);
	if (sb->nsegs == 0)
		return bad_field(path, "nsegs", sb->nsegs, "a device needs a segment", err);
	if (sb->seg_size < TDAX_MIN_SEG_SIZE || sb->seg_size % TDAX_MIN_SEG_SIZE)
		return bad_field(path, "seg_size", sb->seg_size, "must be a multiple of 4096", err);
	if (sb->files_off % TDAX_CACHELINE ||
	    !table_fits(sb->files_off, sb->max_files, sb->file_entry_size, TDAX_HEADER_SIZE, cap))
		return bad_field(path, "files_off", sb->files_off, "the file table must be aligned, "
			"after the header and inside the capacity", err);
	uint64_t files_end = sb->files_off + (uint64_t)sb->max_files * sb->file_entry_size +
			     (uint64_t)tdax_index_slots(sb->max_files) * 8; /* and its index */
	if (sb->ranges_off % TDAX_CACHELINE ||
	    !table_fits(sb->ranges_off, sb->max_ranges, sb->range_entry_size, files_end, cap))
		return bad_field(path, "ranges_off", sb->ranges_off, "the range table must be "
			"aligned, after the file table and its index, and inside the capacity", err);
	uint64_t ranges_end = sb->ranges_off + (uint64_t)sb->max_ranges * sb->range_entry_size;
	if (sb->segs_off % TDAX_CACHELINE ||
	    !table_fits(sb->segs_off, sb->nsegs, sb->seg_size, ranges_end, cap))
		return bad_field(path, "segs_off", sb->segs_off, "the segments must be aligned, "
			"after the range table and inside the capacity", err);
	return 0;
}

/* Validate the header read by read_head, before the region is mapped. */
static int check_header(const char *path, const struct tdax_super *sb, uint64_t file_size,
			struct tdax_err *err)
{
	if (memcmp(sb->magic, TDAX_MAGIC, sizeof(sb->magic)) != 0)
		return tdax_errf(err, "%s: not a tdax device (bad magic); nothing was changed. Create "
			"one with 'tdax device create --device %s' (it will not overwrite an existing "
			"file unless given --force)", path, path);
	if (sb->version != TDAX_LAYOUT_VERSION)
		return tdax_errf(err, "%s: device layout version %u, this tdax reads version %u; use "
			"the tdax that created it to recover its data, then recreate it", path,
			sb->version, TDAX_LAYOUT_VERSION);
	if (sb->crc != tdax_super_crc(sb))
		return tdax_errf(err, "%s: device header checksum mismatch: the header is corrupt; "
			"nothing was changed", path);
	if (check_geometry(path, sb, err))
		return -1;
	if (sb->capacity > file_size)
		return tdax_errf(err, "%s: device is truncated: its header says %llu bytes, it has "
			"%llu", path, (unsigned long long)sb->capacity, (unsigned long long)file_size);
	return 0;
}

int tdax_device_open(const char *path, int flags, struct tdax_device **out, struct tdax_err *err)
{
	struct stat st;
	if (tdax_crc32c_load(err) != 0)
		return -1;
	int fd = open_region(path, flags, &st, err);
	if (fd < 0)
		return -1;
	if ((st.st_mode & S_IWOTH) && !(flags & TDAX_OPEN_ALLOW_SHARED)) {
		tdax_sys_close(fd);
		return tdax_errf(err, "%s: any user can write this device region (mode %04o), so any "
			"user could forge records; chmod o-w it, or allow it explicitly "
			"(--allow-shared, TDAX_ALLOW_SHARED=1)", path, (unsigned)(st.st_mode & 07777));
	}
	struct tdax_device *dev = calloc(1, sizeof(*dev));
	if (!dev) {
		tdax_sys_close(fd);
		return tdax_errf(err, "%s: out of memory", path);
	}
	snprintf(dev->path, sizeof(dev->path), "%s", path);
	dev->fd = fd;
	uint64_t file_size = 0;
	struct tdax_super sb;
	int rc = 0;
	if (read_head(dev->fd, &st, &sb, sizeof(sb), &file_size) != 0 || file_size < TDAX_HEADER_SIZE)
		rc = tdax_errf(err, "%s: too small to be a tdax device (%llu bytes) or unreadable; "
			"nothing was changed", path, (unsigned long long)file_size);
	else
		rc = check_header(path, &sb, file_size, err);
	if (rc == 0) {
		dev->backend = (enum tdax_backend)sb.backend;
		dev->persistence = (enum tdax_persistence)sb.persistence;
		rc = check_backend_path(path, dev->fd, &st, dev->backend, err);
	}
	if (rc == 0)
		rc = map_region(dev, flags, err);
	if (rc == 0 && dev->size < sb.capacity)
		rc = tdax_errf(err, "%s: mapped %llu bytes, the header needs %llu", path,
			       (unsigned long long)dev->size, (unsigned long long)sb.capacity);
	if (rc != 0) {
		unmap_region(dev);
		free(dev);
		return -1;
	}
	dev->geom = sb;
	set_pointers(dev);
	dev->mapped = calloc(sb.nsegs, sizeof(*dev->mapped));
	if (!dev->mapped) {
		unmap_region(dev);
		free(dev);
		return tdax_errf(err, "%s: out of memory", path);
	}
	static _Atomic uint64_t opens;
	dev->open_id = atomic_fetch_add(&opens, 1) + 1;
	*out = dev;
	return 0;
}

void tdax_device_close(struct tdax_device *dev)
{
	if (!dev)
		return;
	unmap_region(dev);
	free((void *)dev->mapped);
	free(dev);
}

int tdax_device_destroy(const char *path, struct tdax_err *err)
{
	struct stat st;
	int fd = open_region(path, TDAX_OPEN_ANY_OWNER, &st, err);
	if (fd < 0)
		return -1;
	bool region = has_magic(fd, &st);
	tdax_sys_close(fd);
	if (!region)
		return tdax_errf(err, "%s: is not a tdax region (no tdax header); destroy removes only "
			"tdax regions, even with --force, and changed nothing. If the file is not "
			"needed, remove it yourself", path);
	if (S_ISREG(st.st_mode)) {
		struct stat now;
		if (tdax_sys_lstat(path, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino)
			return tdax_errf(err, "%s: was replaced while tdax checked it; nothing was "
				"removed. Look at what it is now", path);
		if (tdax_sys_unlink(path) != 0)
			return open_error(path, "remove the device region", err);
		return 0;
	}
	struct tdax_device *dev;
	if (tdax_device_open(path, TDAX_OPEN_NO_PREFAULT | TDAX_OPEN_ALLOW_SHARED |
			     TDAX_OPEN_ANY_OWNER, &dev, err))
		return -1;
	memset(dev->base, 0, TDAX_HEADER_SIZE);
	tdax_dev_persist(dev, dev->base, TDAX_HEADER_SIZE);
	tdax_device_close(dev);
	return 0;
}
