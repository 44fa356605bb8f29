/*
 * trace -- a record of the write and sync events of managed files, for
 * the policy simulator (`tdax sim`). Off unless TDAX_TRACE names a file
 * (`tdax run --trace FILE`); then every process under tdax appends
 * fixed-size records to it, buffered per process and written with one
 * O_APPEND write per buffer, so processes never interleave inside a record.
 *
 * File format (little-endian): a 64-byte header, then 32-byte records.
 * NAME records are followed by the path, padded to 32 bytes.
 */
#ifndef TDAX_TRACE_H
#define TDAX_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/device.h"

#define TDAX_TRACE_MAGIC "TDAXTRC1"
#define TDAX_TRACE_VERSION 1
#define TDAX_FILE_PATH_MAX_TRACE 800 /* a NAME record carries at most this much path */

struct tdax_trace_header {
	char magic[8];
	uint32_t version;
	uint32_t record_size;     /* 32 */
	uint32_t upgrade_pct, downgrade_pct, write_threshold, gran_order;
	uint64_t wb_window_ns, wr_window_ns;
	uint64_t log_capacity;    /* bytes of the device's log */
	uint64_t start_ns;        /* CLOCK_MONOTONIC when the trace was made */
};
_Static_assert(sizeof(struct tdax_trace_header) == 64, "trace header size");

enum tdax_trace_kind {
	TDAX_TR_WRITE = 1, /* off, len; flags 1: a write tdax cannot log (O_DIRECT, kernel-only file) */
	TDAX_TR_SYNC = 2,  /* flags: 1 = fdatasync (or O_DSYNC); TDAX_TRF_REAL: the runtime went to the kernel */
	TDAX_TR_OPEN = 3,  /* off: the file entry's generation; flags: TDAX_TRF_CREATE: new entry */
	TDAX_TR_META = 4,  /* flags: the fallback reason (stats.h): the next sync is real */
	TDAX_TR_NAME = 5,  /* len: bytes of path following */
};
enum { TDAX_TRF_CREATE = 1, TDAX_TRF_TRUNC = 2, TDAX_TRF_REAL = 4 };

struct tdax_trace_rec {
	uint64_t t_ns;
	uint32_t pid;
	uint32_t file;     /* file table index */
	uint64_t off;
	uint32_t len;
	uint16_t kind;
	uint16_t flags;
};
_Static_assert(sizeof(struct tdax_trace_rec) == 32, "trace record size");

/* Create FILE with its header if it does not exist (tdax run --trace). */
int tdax_trace_create(const char *path, const struct tdax_device *dev, struct tdax_err *err);

/* The runtime: open the trace named by TDAX_TRACE (at start), record,
 * flush (write-back pass, exit, before exec), forget the buffer (fork child).
 * keep() moves the trace's descriptor out of the application's way. */
void tdax_trace_start(const struct tdax_device *dev, int (*keep)(int *fdp));
extern bool tdax_tracing;
void tdax_trace_event(uint16_t kind, uint32_t file, uint64_t off, uint32_t len, uint16_t flags);
void tdax_trace_name(uint32_t file, const char *path);
void tdax_trace_flush(void);
void tdax_trace_after_fork(void);

#endif
