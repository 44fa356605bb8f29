/*
 * recover -- bring files up to date with the device's live records.
 *
 * If the page cache survived (same boot, no power failure declared), every
 * file with live records is fdatasync'ed and its records released. If it
 * may have been lost, every live record is replayed onto its file in
 * sequence order first. Recovery is idempotent: it releases nothing before
 * the file is synced, so it can be killed and run again.
 *
 * Whose rights (SPEC §3 rule 8): the region's owner's (st_uid/st_gid of the
 * region file or DAX device), not a uid written in the region, and only for
 * files that owner owns. Only root's own region (owned by root, writable by
 * no other user) is believed about which user registered a file: its files
 * are opened as that user. A root-owned region other users can write gets
 * no root file recovered from it.
 *
 * A file is opened for writing only once an O_PATH descriptor of its path
 * (last component not followed) shows it is the registered regular file
 * (file system, inode, owner); the opened file is checked again, and where
 * the file system has inode generations, the generation must match the
 * registered one.
 */
#ifndef TDAX_RECOVER_H
#define TDAX_RECOVER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/device.h"

enum tdax_file_outcome {
	TDAX_RECOVERED = 0,   /* synced (and replayed), records released */
	TDAX_UNMATCHED,       /* the path names another file, or none: kept */
	TDAX_DISCARDED,       /* unmatched, and released on request */
	TDAX_NOT_PERMITTED,   /* caller may not act for the registering user: kept */
	TDAX_IO_FAILED,       /* write or sync failed: kept */
	TDAX_REFUSED,         /* the region's owner may not write this file: kept */
};

struct tdax_recover_file {
	uint32_t idx;
	char path[768];
	uint64_t records;
	uint64_t bytes;
	enum tdax_file_outcome outcome;
	char reason[256];
};

struct tdax_recover_damage {
	uint32_t seg;
	uint64_t pos;             /* offset in the segment's record area */
	int torn;                 /* 1: torn tail, 0: corrupt in place */
	int readable;             /* the header (file, seq, ...) could be trusted */
	uint32_t file;
	uint64_t seq, off;
	uint32_t len;
};

#define TDAX_RECOVER_MAX_DAMAGE 64

struct tdax_recover_report {
	bool replay;              /* page cache lost: records were applied */
	uint64_t records;         /* live records found */
	uint64_t applied;         /* records written to files (replay) */
	uint64_t bytes;           /* bytes written (replay) */
	uint64_t corrupt;         /* damaged records skipped */
	uint64_t torn;            /* torn segment tails (in-flight writes) */
	uint32_t sealed;          /* segments of dead writers sealed */
	uint32_t ndamage;         /* the first TDAX_RECOVER_MAX_DAMAGE damaged records */
	struct tdax_recover_damage damage[TDAX_RECOVER_MAX_DAMAGE];
	uint32_t nfiles;
	uint32_t failed;          /* files whose records are kept */
	struct tdax_recover_file *files;
	double seconds;
};

struct tdax_recover_opts {
	bool power_failure;       /* the page cache was lost: replay */
	bool discard_unmatched;   /* release records of files that are gone */
	/* Only the files promoted by a process now dead (bypass mode:
	 * rt.deferred; their bytes are in the log alone), nothing else
	 * touched, the device's state left as it is: what a process that
	 * writes to the device itself may run (it never opens a file it has
	 * promoted, which would break its own lease). */
	bool orphans_only;
};

/* 0 if every live record is now in its file (or discarded), 1 if some files
 * keep their records (see the report), -1 on error (err set). */
int tdax_recover(struct tdax_device *dev, const struct tdax_recover_opts *opts,
		 struct tdax_recover_report *rep, struct tdax_err *err);
void tdax_recover_report_free(struct tdax_recover_report *rep);

/* Write in what processes now dead left in the device alone (bypass mode:
 * tdax_recover with orphans_only), if any file is orphaned (files.h):
 * 0 if none is left, 1 if some keep their records, -1 on error (err). */
int tdax_recover_orphans(struct tdax_device *dev, struct tdax_err *err);

/* Write the live records of one file (idx, gen) onto fd again, in sequence
 * order (after a failed sync left the kernel's copy in doubt). 0 or -1. */
int tdax_replay_file(struct tdax_device *dev, uint32_t idx, uint32_t gen, int fd);

const char *tdax_outcome_name(enum tdax_file_outcome o);

#endif
