/*
 * format -- region creation: device.c makes and maps the region, then the
 * header is written here and each table is formatted by its owner (files,
 * ranges, log, control, the state), in that order; the magic goes last, so
 * that a format cut short leaves no region anyone takes for a valid one.
 */
#define _GNU_SOURCE
#include "core/format.h"
#include "core/control.h"
#include "core/files.h"
#include "core/layout.h"
#include "core/log.h"
#include "core/ranges.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>

/* The geometry of a new region of cap bytes: the header, then the file
 * table, the range table and the segments, in that order, without gaps. */
static void set_super(struct tdax_super *sb, const struct tdax_create_opts *o, uint64_t cap)
{
	uint32_t seg = o->seg_size ? o->seg_size : TDAX_DEFAULT_SEG_SIZE;
	sb->version = TDAX_LAYOUT_VERSION;
	sb->backend = o->backend;
	if (getrandom(sb->uuid, sizeof(sb->uuid), 0) != sizeof(sb->uuid))
		for (size_t i = 0; i < sizeof(sb->uuid); i++)
			sb->uuid[i] = (uint8_t)(tdax_now_ns() >> (i % 8));
	sb->uuid[6] = (uint8_t)((sb->uuid[6] & 0x0f) | 0x40); /* RFC 4122 v4 */
	sb->uuid[8] = (uint8_t)((sb->uuid[8] & 0x3f) | 0x80);
	sb->capacity = cap;
	sb->created_unix = (uint64_t)time(NULL);
	sb->persist_cost_ns = o->persist_cost_ns;
	sb->bandwidth_mbps = o->bandwidth_mbps;
	sb->persistence = o->persistence;
	sb->files_off = TDAX_HEADER_SIZE;
	sb->max_files = TDAX_DEFAULT_MAX_FILES;
	sb->file_entry_size = TDAX_FILE_ENTRY_SIZE;
	sb->ranges_off = sb->files_off + (uint64_t)sb->max_files * sb->file_entry_size +
			 (uint64_t)tdax_index_slots(sb->max_files) * 8;
	sb->max_ranges = TDAX_DEFAULT_MAX_RANGES;
	sb->range_entry_size = TDAX_RANGE_ENTRY_SIZE;
	sb->segs_off = sb->ranges_off + (uint64_t)sb->max_ranges * sb->range_entry_size;
	sb->seg_size = seg;
	sb->nsegs = (uint32_t)((cap - sb->segs_off) / seg);
}

/* Write a fresh layout into the mapped region: the header zeroed (counters,
 * sequence, registration lock, no magic), the geometry, every table empty,
 * the default tunables, a clean state, and last the magic and checksum. */
static void format_region(struct tdax_device *dev, const struct tdax_create_opts *o, uint64_t cap)
{
	struct tdax_super *sb = (struct tdax_super *)(dev->base + TDAX_SUPER_OFF);

	memset(dev->base, 0, TDAX_HEADER_SIZE);
	tdax_dev_persist(dev, dev->base, TDAX_HEADER_SIZE);
	set_super(sb, o, cap);
	tdax_device_set_geometry(dev, sb);
	tdax_files_format(dev);
	tdax_ranges_format(dev);
	tdax_log_format(dev);
	tdax_control_format(dev);
	tdax_device_set_state(dev, TDAX_STATE_CLEAN);
	sb->crc = 0;
	memcpy(sb->magic, TDAX_MAGIC, sizeof(sb->magic));
	sb->crc = tdax_super_crc(sb);
	tdax_dev_persist(dev, sb, sizeof(*sb));
}

int tdax_device_create(const struct tdax_create_opts *o, struct tdax_err *err)
{
	struct tdax_device dev;
	uint64_t cap;
	if (tdax_device_make(o, &dev, &cap, err))
		return -1;
	format_region(&dev, o, cap);
	tdax_device_unmake(&dev);
	return 0;
}
