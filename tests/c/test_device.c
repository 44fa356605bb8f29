/* test_device -- create/open/validate the device region; persistence costs. */
#define _GNU_SOURCE
#include "harness.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/crc32c.h"
#include "core/cacheflush.h"
#include "core/device.h"
#include "core/format.h"

static int try_open(const char *path, int flags, struct tdax_err *e)
{
	struct tdax_device *dev;
	int rc = tdax_device_open(path, flags, &dev, e);
	if (rc == 0)
		tdax_device_close(dev);
	return rc;
}

TEST(crc32c_known_vector)
{
	CHECK(tdax_crc32c(0, "123456789", 9) == 0xE3069283u);
	/* Chaining two halves gives the same value as one pass. */
	CHECK(tdax_crc32c(tdax_crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u);
}

/* Short buffers take the crc32 instruction, long ones ISA-L: one value. */
TEST(crc32c_short_and_long_paths_agree)
{
	static unsigned char buf[4096];
	uint32_t x = 2463534242u;
	for (size_t i = 0; i < sizeof(buf); i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		buf[i] = (unsigned char)x;
	}
	for (uint32_t seed = 0; seed < 3; seed++) {
		uint32_t whole = tdax_crc32c(seed * 0x9E3779B9u, buf, sizeof(buf)), pieces = seed * 0x9E3779B9u;
		for (size_t at = 0, n = 1; at < sizeof(buf); at += n, n = n % 131 + 1)
			pieces = tdax_crc32c(pieces, buf + at, at + n <= sizeof(buf) ? n : sizeof(buf) - at);
		CHECK(whole == pieces);
	}
}

TEST(create_then_open_reports_geometry_and_state)
{
	struct tdax_device *dev = tdax_test_new_device(16 << 20, 1 << 20);
	CHECK(dev);
	CHECK(memcmp(dev->sb->magic, TDAX_MAGIC, 8) == 0);
	CHECK(dev->sb->capacity == 16 << 20);
	/* header, file table (1 MiB) and its index (2048 slots of 8 bytes),
	 * range table (2 MiB), then segments */
	CHECK(dev->sb->segs_off == 4096 + (1u << 20) + 2048 * 8 + (2u << 20));
	CHECK(dev->sb->nsegs == ((16u << 20) - dev->sb->segs_off) / (1u << 20));
	CHECK(dev->backend == TDAX_BACKEND_EMULATED);
	CHECK(dev->st->clean == TDAX_STATE_CLEAN);
	CHECK(!tdax_device_boot_changed(dev));
	struct stat st;
	CHECK(stat(dev->path, &st) == 0 && (st.st_mode & 0777) == 0600);
	tdax_device_close(dev);
}

TEST(create_never_overwrites_without_force)
{
	const char *p = tdax_test_device();
	int fd = open(p, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, "precious", 8) == 8);
	close(fd);
	struct tdax_create_opts o = { .path = p, .backend = TDAX_BACKEND_EMULATED };
	struct tdax_err e;
	CHECK(tdax_device_create(&o, &e) == -1);
	CHECK(strstr(e.msg, "already exists") && strstr(e.msg, p));
	char buf[9] = { 0 };
	fd = open(p, O_RDONLY);
	CHECK(read(fd, buf, 8) == 8 && strcmp(buf, "precious") == 0);
	close(fd);
	o.force = true; /* --force reformats tdax regions and empty files, never other files */
	CHECK(tdax_device_create(&o, &e) == -1);
	CHECK(strstr(e.msg, "not a tdax region") && strstr(e.msg, p));
	CHECK(truncate(p, 0) == 0);
	CHECK(tdax_device_create(&o, &e) == 0);
	CHECK(try_open(p, 0, &e) == 0);
	CHECK(tdax_device_create(&o, &e) == 0); /* and a tdax region */
	CHECK(try_open(p, 0, &e) == 0);
}

TEST(open_rejects_foreign_file_without_touching_it)
{
	const char *p = tdax_test_device();
	int fd = open(p, O_CREAT | O_RDWR, 0600);
	char junk[8192];
	memset(junk, 'x', sizeof(junk));
	CHECK(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
	close(fd);
	struct tdax_err e;
	CHECK(try_open(p, 0, &e) == -1);
	CHECK(strstr(e.msg, "not a tdax device") && strstr(e.msg, p));
	char back[8192];
	fd = open(p, O_RDONLY);
	CHECK(read(fd, back, sizeof(back)) == (ssize_t)sizeof(back));
	close(fd);
	CHECK(memcmp(junk, back, sizeof(back)) == 0);
}

/* Patch bytes of the header of a fresh device at offset off. */
static const char *patched_device(size_t off, const void *bytes, size_t n)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	if (!dev)
		return NULL;
	static char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", dev->path);
	tdax_device_close(dev);
	int fd = open(path, O_RDWR);
	ssize_t w = pwrite(fd, bytes, n, (off_t)off);
	close(fd);
	return w == (ssize_t)n ? path : NULL;
}

TEST(open_rejects_wrong_version)
{
	uint32_t v = 99;
	const char *p = patched_device(offsetof(struct tdax_super, version), &v, 4);
	struct tdax_err e;
	CHECK(p && try_open(p, 0, &e) == -1);
	CHECK(strstr(e.msg, "layout version 99"));
}

TEST(open_rejects_corrupt_header)
{
	uint8_t b = 0x5a;
	const char *p = patched_device(offsetof(struct tdax_super, capacity) + 3, &b, 1);
	struct tdax_err e;
	CHECK(p && try_open(p, 0, &e) == -1);
	CHECK(strstr(e.msg, "checksum mismatch"));
}

TEST(open_rejects_truncated_and_tiny_regions)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", dev->path);
	tdax_device_close(dev);
	CHECK(truncate(path, 10 << 20) == 0);
	struct tdax_err e;
	CHECK(try_open(path, 0, &e) == -1);
	CHECK(strstr(e.msg, "truncated"));
	CHECK(truncate(path, 100) == 0);
	CHECK(try_open(path, 0, &e) == -1);
	CHECK(strstr(e.msg, "too small"));

	struct tdax_create_opts o = { .path = tdax_test_device(), .backend = TDAX_BACKEND_EMULATED,
				      .capacity = 1 << 20 };
	CHECK(tdax_device_create(&o, &e) == -1);
	CHECK(strstr(e.msg, "too small"));
	CHECK(access(o.path, F_OK) != 0); /* nothing left behind */
}

TEST(wrong_kinds_of_path_are_refused)
{
	struct tdax_err e;
	CHECK(try_open(tdax_test_dir(), 0, &e) == -1);
	CHECK(strstr(e.msg, "neither a regular file nor a character device"));
	CHECK(try_open("/dev/shm/no-such-tdax-device", 0, &e) == -1);
	CHECK(strstr(e.msg, "no such device region"));

	struct tdax_create_opts o = { .path = "/dev/null", .backend = TDAX_BACKEND_DEVDAX };
	CHECK(tdax_device_create(&o, &e) == -1);
	CHECK(strstr(e.msg, "not a DAX device"));

	char disk[300];
	snprintf(disk, sizeof(disk), "%s/region", tdax_test_dir());
	o = (struct tdax_create_opts){ .path = disk, .backend = TDAX_BACKEND_EMULATED };
	CHECK(tdax_device_create(&o, &e) == -1);
	CHECK(strstr(e.msg, "needs a file on tmpfs"));

	o.backend = TDAX_BACKEND_FSDAX; /* /var/tmp is not a DAX mount */
	CHECK(tdax_device_create(&o, &e) == -1);
	CHECK(strstr(e.msg, "-o dax"));
	CHECK(access(disk, F_OK) != 0);
}

TEST(world_writable_region_is_refused_unless_allowed)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", dev->path);
	tdax_device_close(dev);
	CHECK(chmod(path, 0666) == 0);
	struct tdax_err e;
	CHECK(try_open(path, 0, &e) == -1);
	CHECK(strstr(e.msg, "any user can write"));
	CHECK(try_open(path, TDAX_OPEN_ALLOW_SHARED, &e) == 0);
}

TEST(emulated_persist_cost_is_paid_per_barrier)
{
	struct tdax_create_opts o = { .path = tdax_test_device(), .backend = TDAX_BACKEND_EMULATED,
				      .persist_cost_ns = 200000 };
	struct tdax_err e;
	struct tdax_device *dev;
	CHECK(tdax_device_create(&o, &e) == 0 && tdax_device_open(o.path, 0, &dev, &e) == 0);
	CHECK(dev->persist_cost_ns == 200000);
	uint64_t t0 = tdax_now_ns();
	for (int i = 0; i < 5; i++)
		tdax_dev_persist(dev, dev->base + 8192, 64);
	CHECK(tdax_now_ns() - t0 >= 5 * 200000ull); /* a lower bound: spins never end early */
	tdax_device_close(dev);
}

/* An emulated region made as GPF memory (its caches in the persistence
 * domain) persists with a fence alone: no line is written back, and its
 * copies are still copies; one made as ADR memory writes lines back. */
TEST(emulated_gpf_region_persists_with_fences_alone)
{
	struct tdax_device *dev, *adr = tdax_test_new_device(0, 0);
	struct tdax_create_opts o = { .path = tdax_test_device(), .backend = TDAX_BACKEND_EMULATED,
				      .persistence = TDAX_PERSIST_GPF };
	struct tdax_err e;
	CHECK(adr && adr->persistence == TDAX_PERSIST_ADR && adr->flush != tdax_cacheflush_none);
	CHECK(tdax_device_create(&o, &e) == 0 && tdax_device_open(o.path, 0, &dev, &e) == 0);
	CHECK(dev->sb->persistence == TDAX_PERSIST_GPF && dev->persistence == TDAX_PERSIST_GPF);
	CHECK(dev->flush == tdax_cacheflush_none && dev->memcpy == tdax_cacheflush_memcpy_gpf);
	CHECK(strstr(tdax_device_persistence(dev), "GPF") && strstr(tdax_device_persistence(adr), "ADR"));
	static char src[5000];
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (char)(i * 7 + 1);
	for (size_t n = 1; n <= sizeof(src); n += 999) { /* cached and non-temporal copies */
		memset(dev->base + 8192, 0, sizeof(src));
		dev->memcpy(dev->base + 8192 + 3, src, n, 0);
		CHECK(memcmp(dev->base + 8192 + 3, src, n) == 0 && dev->base[8192 + 3 + n] == 0);
	}
	tdax_device_close(dev);
	tdax_device_close(adr);
}

TEST(boot_change_is_detected_from_state)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	memcpy(dev->st->boot_id, "00000000-0000-0000-0000-000000000000", 36);
	CHECK(tdax_device_boot_changed(dev)); /* also: its checksum no longer holds */
	tdax_device_set_state(dev, TDAX_STATE_UNCLEAN);
	CHECK(!tdax_device_boot_changed(dev));
	CHECK(dev->st->clean == TDAX_STATE_UNCLEAN);
	tdax_device_close(dev);
}

/* A fresh device whose super-block has one field set to v and is then
 * re-signed, as a forger would: the geometry checks themselves must refuse
 * it (the checksum holds). */
static const char *resigned_device(size_t off, uint64_t v, size_t width)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	if (!dev)
		return NULL;
	static char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", dev->path);
	tdax_device_close(dev);
	struct tdax_super sb;
	int fd = open(path, O_RDWR);
	if (fd < 0 || pread(fd, &sb, sizeof(sb), 0) != (ssize_t)sizeof(sb)) {
		close(fd);
		return NULL;
	}
	memcpy((char *)&sb + off, &v, width); /* little-endian: the low bytes */
	sb.crc = tdax_crc32c(0, &sb, offsetof(struct tdax_super, crc));
	ssize_t w = pwrite(fd, &sb, sizeof(sb), 0);
	close(fd);
	return w == (ssize_t)sizeof(sb) ? path : NULL;
}

#define FIELD(f) offsetof(struct tdax_super, f), sizeof(((struct tdax_super *)0)->f)

/* Each forged geometry is refused with the field's name, its value, the
 * region and the way out; before validation some of them crashed every
 * process opening the region (SIGSEGV, SIGFPE). */
TEST(resigned_impossible_geometry_is_refused_field_by_field)
{
	static const struct {
		size_t off, width;
		uint64_t v;
		const char *field;
	} bad[] = {
		{ FIELD(files_off), UINT64_MAX - 4095, "files_off" },
		{ FIELD(ranges_off), UINT64_MAX - 255, "ranges_off" },
		{ FIELD(segs_off), UINT64_MAX - (1u << 20) + 1, "segs_off" },
		{ FIELD(segs_off), 1u << 30, "segs_off" },             /* past the capacity */
		{ FIELD(ranges_off), 4096, "ranges_off" },             /* overlaps the file table */
		{ FIELD(segs_off), 4096 + (1u << 20), "segs_off" },    /* overlaps the range table */
		{ FIELD(files_off), 4096 + 8, "files_off" },           /* misaligned atomics */
		{ FIELD(files_off), 0, "files_off" },                  /* over the header */
		{ FIELD(max_ranges), 0, "max_ranges" },                /* was SIGFPE in the hash */
		{ FIELD(max_files), 0, "max_files" },
		{ FIELD(nsegs), 0, "nsegs" },
		{ FIELD(nsegs), UINT32_MAX, "segs_off" },              /* segments past the end */
		{ FIELD(seg_size), 256, "seg_size" },
		{ FIELD(file_entry_size), 64, "file_entry_size" },
		{ FIELD(range_entry_size), 64, "range_entry_size" },
		{ FIELD(capacity), UINT64_MAX, "truncated" },
		{ FIELD(backend), 7, "backend" },
		{ FIELD(persist_cost_ns), UINT64_MAX, "persist_cost_ns" }, /* every barrier hung */
		{ FIELD(persistence), 2, "persistence" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *p = resigned_device(bad[i].off, bad[i].v, bad[i].width);
		struct tdax_err e;
		CHECK(p && try_open(p, 0, &e) == -1);
		if (!strstr(e.msg, bad[i].field) || !strstr(e.msg, p))
			fprintf(stderr, "  case %zu: %s\n", i, e.msg);
		CHECK(strstr(e.msg, bad[i].field) && strstr(e.msg, p));
		if (strcmp(bad[i].field, "truncated") != 0 && bad[i].off != offsetof(struct tdax_super, nsegs)) {
			char v[32];
			snprintf(v, sizeof(v), "= %llu", (unsigned long long)(bad[i].width == 4
				? (uint32_t)bad[i].v : bad[i].v));
			CHECK(strstr(e.msg, v) && strstr(e.msg, "tdax device create --force"));
		}
	}
}

/* The geometry is read once, at open: a region rewritten afterwards (by
 * anyone who can write it) cannot move a table out of the mapping. */
TEST(geometry_changed_after_open_is_not_used)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	uint32_t nsegs = dev->sb->nsegs;
	struct tdax_super *mapped = (struct tdax_super *)dev->base;
	mapped->nsegs = UINT32_MAX;
	mapped->files_off = UINT64_MAX;
	CHECK(dev->sb->nsegs == nsegs && dev->sb->files_off == 4096);
	tdax_device_close(dev);
}
