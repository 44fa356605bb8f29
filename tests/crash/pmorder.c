/*
 * tdax-pmorder -- the workload of the persist-order test (pmreorder.py).
 *
 *   TDAX_TEST_PERSIST_TRACE=TRACE tdax-pmorder DEVICE FILE COUNT
 *
 * Writes COUNT records to FILE the way the runtime does: the bytes to the
 * file (page cache), then the same bytes into the device log; after each
 * append returns, marks the record acknowledged in the trace. Every tenth
 * record rewrites the range of the record five before it (replay order
 * matters); every 40th, a real fdatasync, a "synced" mark, and the release
 * of the file's records up to it (so segments are sealed, reclaimed and
 * reused). Record i has length 1 + (i * 37) % 700 and byte k of it is
 * (i * 7 + k) % 251; pmreorder.py computes the same. Exit status 1 if the
 * trace could not be written in full. Linked with the test build's objects
 * (the trace is a test aid, src/core/testaid.h).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/files.h"
#include "core/log.h"
#include "core/pmtrace.h"

enum { MARK_ACKED = 1, MARK_SYNCED = 2 };

static uint32_t rec_len(unsigned i)
{
	return 1 + (i * 37u) % 700u;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: tdax-pmorder DEVICE FILE COUNT\n");
		return 2;
	}
	unsigned count = (unsigned)atoi(argv[3]);
	struct tdax_err e;
	struct tdax_device *dev;
	if (tdax_device_open(argv[1], 0, &dev, &e)) {
		fprintf(stderr, "tdax-pmorder: %s\n", e.msg);
		return 1;
	}
	int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
	uint32_t idx, gen;
	bool created;
	if (fd < 0 || fsync(fd) != 0 || tdax_files_register(dev, fd, argv[2], &idx, &gen, &created, &e)) {
		fprintf(stderr, "tdax-pmorder: %s: %s\n", argv[2], fd < 0 ? "cannot create" : e.msg);
		return 1;
	}
	uint64_t *offs = calloc(count, sizeof(*offs)), end = 0;
	char buf[700];
	for (unsigned i = 0; i < count; i++) {
		unsigned src = i % 10 == 9 ? i - 5 : i; /* the range written */
		uint32_t len = rec_len(src);
		offs[i] = src == i ? end : offs[src];
		if (src == i)
			end += len;
		for (uint32_t k = 0; k < len; k++)
			buf[k] = (char)((i * 7u + k) % 251u);
		uint64_t seq;
		if (pwrite(fd, buf, len, (off_t)offs[i]) != (ssize_t)len ||
		    tdax_log_append(dev, idx, gen, offs[i], buf, len, &seq) != 0) {
			fprintf(stderr, "tdax-pmorder: record %u failed\n", i);
			return 1;
		}
		tdax_pmtrace_mark(MARK_ACKED, i);
		if (i % 40 == 39) {
			if (fdatasync(fd) != 0)
				return 1;
			tdax_pmtrace_mark(MARK_SYNCED, i);
			tdax_log_release(dev, idx, gen, seq);
		}
	}
	free(offs);
	close(fd);
	tdax_device_close(dev);
	if (tdax_pmtrace_failed()) {
		fprintf(stderr, "tdax-pmorder: the trace is incomplete (see above); no crash image "
			"can be built from it\n");
		return 1;
	}
	return 0;
}
