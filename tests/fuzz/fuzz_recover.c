/*
 * fuzz_recover -- libFuzzer target: a device region corrupted at random
 * must never crash or hang tdax, and no record that fails its checksum may
 * be delivered by a scan or applied by recovery.
 *
 * A template device is made once: three registered files with records. Each
 * input patches it in chunks of: a 1-byte target (anywhere in the region,
 * inside a record's header, inside a file entry, the super-block, a segment
 * header with its slots -- most segments are free --, the tunables), 2 bytes
 * choosing where, a 1-byte length and the bytes. A patched super-block is
 * re-signed (its checksum is no secret), so the geometry checks themselves
 * are exercised. Then the region is opened, scanned (every delivered record
 * is checked again here: whole, inside its segment, checksums valid),
 * recovered in replay mode onto the scratch files, and used as a writer
 * would: tunables read (they must pass their check), a range looked up,
 * records appended (claiming free segments as they are) and released.
 *
 * Checksums stop a fuzzer cold, so the first input byte can also ask the
 * harness to re-sign the headers (bit 0) and the data (bit 1) of every
 * record-looking cache line after patching, as a forger would: then the
 * bounds and identity checks behind the checksums get exercised too.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/control.h"
#include "core/crc32c.h"
#include "core/files.h"
#include "core/format.h"
#include "core/log.h"
#include "core/ranges.h"
#include "core/recover.h"

static char *tmpl;
static size_t tmpl_size;
static size_t recs[64], nrecs;  /* where the template's record headers are */
static size_t files_off, segs_off, seg_size, nsegs;
static char region[64], dir[64];

static int note_record(void *ctx, const struct tdax_rec *r)
{
	if (nrecs < 64)
		recs[nrecs++] = (size_t)((const char *)r - ((const struct tdax_device *)ctx)->base);
	return 0;
}

/* The region and its files go when the fuzzer exits (at -max_total_time too). */
static void remove_template(void)
{
	unlink(region);
	for (int f = 0; f < 3; f++) {
		char path[128];
		snprintf(path, sizeof(path), "%s/file%d", dir, f);
		unlink(path);
	}
	rmdir(dir);
}

static void make_template(void)
{
	snprintf(region, sizeof(region), "/dev/shm/tdax-fuzz-%d", (int)getpid());
	snprintf(dir, sizeof(dir), "/dev/shm/tdax-fuzz-files-%d", (int)getpid());
	mkdir(dir, 0755);
	atexit(remove_template);
	struct tdax_create_opts o = { .path = region, .backend = TDAX_BACKEND_EMULATED,
				      .capacity = 8 << 20, .seg_size = 64 << 10, .force = true };
	struct tdax_err e;
	struct tdax_device *dev;
	if (tdax_device_create(&o, &e) || tdax_device_open(region, TDAX_OPEN_NO_PREFAULT, &dev, &e)) {
		fprintf(stderr, "fuzz: %s\n", e.msg);
		abort();
	}
	for (int f = 0; f < 3; f++) {
		char path[128];
		snprintf(path, sizeof(path), "%s/file%d", dir, f);
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		uint32_t idx, gen;
		bool created;
		if (fd < 0 || tdax_files_register(dev, fd, path, &idx, &gen, &created, &e))
			abort();
		for (int i = 0; i < 20; i++) {
			char data[200];
			memset(data, 'a' + (f * 7 + i) % 26, sizeof(data));
			uint64_t seq;
			tdax_log_append(dev, idx, gen, (uint64_t)i * 150, data, 50 + (uint32_t)i * 7, &seq);
		}
		close(fd);
	}
	tdax_log_seal_mine(dev);
	tdax_log_scan(dev, &(struct tdax_scan_cb){ note_record, NULL, dev, false });
	files_off = dev->sb->files_off;
	segs_off = dev->sb->segs_off;
	seg_size = dev->sb->seg_size;
	nsegs = dev->sb->nsegs;
	tdax_device_close(dev);
	int fd = open(region, O_RDONLY);
	tmpl_size = 8 << 20; /* all of it: header, file and range tables, segments */
	tmpl = malloc(tmpl_size);
	if (fd < 0 || pread(fd, tmpl, tmpl_size, 0) != (ssize_t)tmpl_size)
		abort();
	close(fd);
}

/* What a scan delivers must be a whole record of its own segment, with
 * valid checksums. */
static int recheck(void *ctx, const struct tdax_rec *r)
{
	const struct tdax_device *dev = ctx;
	if (r->seg >= dev->sb->nsegs ||
	    (const char *)(r + 1) + r->len > (const char *)tdax_seg_at(dev, r->seg) + dev->sb->seg_size)
		abort(); /* a record reaching out of its segment */
	struct tdax_rec h = *r;
	h.hcrc = h.crc = 0;
	uint32_t c = tdax_crc32c(0, &h, sizeof(h));
	if (c != r->hcrc || tdax_crc32c(c, r + 1, r->len) != r->crc)
		abort(); /* a scan delivered a record that fails its checksum */
	return 0;
}

/* Give every record-looking line of the mapped segments valid checksums. */
static void resign(struct tdax_device *dev, bool data)
{
	for (uint32_t i = 0; i < dev->sb->nsegs; i++) {
		char *base = (char *)tdax_seg_at(dev, i) + TDAX_SEG_HEADER_SIZE;
		uint64_t room = dev->sb->seg_size - TDAX_SEG_HEADER_SIZE;
		if ((uint64_t)(base - dev->base) + room > tmpl_size)
			break; /* only what the input can reach */
		for (uint64_t pos = 0; pos + sizeof(struct tdax_rec) <= room; pos += TDAX_CACHELINE) {
			struct tdax_rec *r = (struct tdax_rec *)(base + pos);
			if (r->magic != TDAX_REC_MAGIC)
				continue;
			struct tdax_rec h = *r;
			h.hcrc = h.crc = 0;
			r->hcrc = tdax_crc32c(0, &h, sizeof(h));
			/* over the length as given, as far as the mapping goes */
			uint64_t max = dev->size - (uint64_t)((char *)(r + 1) - dev->base);
			if (data)
				r->crc = tdax_crc32c(r->hcrc, r + 1, r->len < max ? r->len : max);
		}
	}
}

/* What every process writing to the region does with it. */
static void use_as_writer(struct tdax_device *dev)
{
	struct tdax_tunables t;
	tdax_control_get(dev, &t);
	if (tdax_tunables_check(&t))
		abort(); /* a tunable read from the region that was not validated */
	uint32_t gen = tdax_file_at(dev, 0)->gen;
	tdax_ranges_get(dev, 0, gen, 7, true);
	static char data[3000];
	uint64_t seq = 0;
	for (uint32_t k = 0; k < 40; k++)
		tdax_log_append(dev, 0, gen, k * 100, data, 100 + k * 70, &seq);
	tdax_log_seal_mine(dev);
	tdax_log_release(dev, 0, gen, seq);
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	if (u.used > u.capacity)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t n)
{
	if (!tmpl)
		make_template();
	/* Lay the template down again and patch it. */
	int fd = open(region, O_RDWR);
	if (fd < 0 || pwrite(fd, tmpl, tmpl_size, 0) != (ssize_t)tmpl_size)
		abort();
	bool super = false;
	for (size_t i = 1; i + 4 <= n;) {
		size_t sel = (size_t)in[i + 1] << 8 | in[i + 2], off;
		switch (in[i] % 6) {
		case 0: off = sel * (tmpl_size >> 16); break;                      /* anywhere */
		case 1: off = recs[sel % nrecs] + (sel >> 8) % sizeof(struct tdax_rec); break;
		case 2: off = files_off + (sel % 3) * TDAX_FILE_ENTRY_SIZE + (sel >> 2) % 256; break;
		case 3: off = sel % sizeof(struct tdax_super); super = true; break;
		case 4: off = segs_off + (sel % nsegs) * seg_size + (sel >> 7) % sizeof(struct tdax_seg);
			break;
		default: off = TDAX_TUNABLES_OFF + sel % sizeof(struct tdax_control); break;
		}
		size_t len = in[i + 3] % 16 + 1;
		i += 4;
		if (len > n - i)
			len = n - i;
		if (len && pwrite(fd, in + i, len, (off_t)off) < 0)
			abort();
		i += len;
	}
	if (super) { /* re-sign it, as a forger would */
		struct tdax_super sb;
		if (pread(fd, &sb, sizeof(sb), 0) != (ssize_t)sizeof(sb))
			abort();
		sb.crc = tdax_crc32c(0, &sb, offsetof(struct tdax_super, crc));
		if (pwrite(fd, &sb, sizeof(sb), 0) != (ssize_t)sizeof(sb))
			abort();
	}
	close(fd);
	struct tdax_err e;
	struct tdax_device *dev;
	if (tdax_device_open(region, TDAX_OPEN_NO_PREFAULT, &dev, &e) != 0)
		return 0; /* refused, cleanly */
	if (n && (in[0] & 3))
		resign(dev, in[0] & 2);
	tdax_log_scan(dev, &(struct tdax_scan_cb){ recheck, NULL, dev, false });
	struct tdax_recover_report r;
	struct tdax_recover_opts o = { .power_failure = true };
	if (tdax_recover(dev, &o, &r, &e) >= 0) {
		if (r.applied > r.records)
			abort();
		tdax_recover_report_free(&r);
	}
	use_as_writer(dev);
	tdax_device_close(dev);
	return 0;
}
