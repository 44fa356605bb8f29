/*
 * tdax-daxlog -- an application of the explicit API (include/tdax.h): a log
 * appended through tdax_map and tdax_persist, for the crash suite and the
 * benchmark of a persist.
 *
 *   tdax-daxlog run DIR ORACLE        append records to DIR/dax (64 MiB,
 *                                     mapped whole) until it is full; after
 *                                     each persist returns, append "dax SEQ"
 *                                     to ORACLE. Every 10,000 records the
 *                                     mapping is unmapped and made again
 *                                     (pinned only the first time: an mlock
 *                                     of it all each time would be most of
 *                                     the run). Nothing else syncs: every
 *                                     acknowledgement is a persist's.
 *   tdax-daxlog bench FILE N SIZE     N persists of SIZE bytes each, through
 *                                     one mapping; prints the median and p99,
 *                                     and what the clock reads cost alone
 *
 * Records are those the crash suite's checker reads (tests/crash/
 * workloads.py): "TDXO", u32 payload length, u64 sequence, u32 CRC-32 of
 * the payload, then the payload; the file's zeros after the last one end
 * the check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tdax.h"

#define LOG_SIZE (64u << 20)
#define HDR 20

static _Noreturn void die(const char *what, const char *path)
{
	fprintf(stderr, "tdax-daxlog: %s %s: %s\n", what, path, strerror(errno));
	exit(2);
}

/* Record seq at p: its payload is the sequence's bytes, 1 + seq % 9 times. */
static size_t put_record(char *p, uint64_t seq)
{
	uint32_t n = (uint32_t)(sizeof(seq) * (1 + seq % 9));
	for (uint32_t i = 0; i < n; i += sizeof(seq))
		memcpy(p + HDR + i, &seq, sizeof(seq));
	uint32_t crc = crc32_gzip_refl(0, (const unsigned char *)p + HDR, n);
	memcpy(p + 4, &n, 4);
	memcpy(p + 8, &seq, 8);
	memcpy(p + 16, &crc, 4);
	memcpy(p, "TDXO", 4); /* (a torn record without its magic ends the check) */
	return HDR + n;
}

static char *map_log(int fd, const char *path, int flags)
{
	char *p = tdax_map(fd, 0, LOG_SIZE, flags);
	if (!p)
		die("tdax_map", path);
	return p;
}

static int run(const char *dir, const char *oracle_path)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/dax", dir);
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0 || ftruncate(fd, LOG_SIZE) != 0)
		die("cannot make", path);
	FILE *oracle = fopen(oracle_path, "r+");
	if (!oracle)
		die("cannot open", oracle_path);
	setvbuf(oracle, NULL, _IONBF, 0);
	char *log = map_log(fd, path, TDAX_MAP_PIN);
	size_t at = 0;
	for (uint64_t seq = 1; at + HDR + 9 * sizeof(seq) <= LOG_SIZE; seq++) {
		size_t n = put_record(log + at, seq);
		if (tdax_persist(log + at, n) != 0)
			die("tdax_persist", path);
		fprintf(oracle, "dax %llu\n", (unsigned long long)seq);
		at += n;
		if (seq % 10000 == 0) {
			if (tdax_unmap(log, LOG_SIZE) != 0)
				die("tdax_unmap", path);
			log = map_log(fd, path, 0);
		}
	}
	for (;;)
		pause(); /* full: wait for the crash */
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int bench(const char *path, long n, long size)
{
	if (n < 1 || size < 1 || size > (long)LOG_SIZE) {
		fprintf(stderr, "tdax-daxlog: bench needs N >= 1 and 1 <= SIZE <= %u\n", LOG_SIZE);
		return 2;
	}
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, LOG_SIZE) != 0)
		die("cannot make", path);
	char *log = map_log(fd, path, TDAX_MAP_PIN);
	uint64_t *ns = malloc((size_t)n * sizeof(*ns));
	if (!ns)
		die("out of memory for", path);
	size_t at = 0;
	for (long i = 0; i < n; i++) {
		if (at + (size_t)size > LOG_SIZE)
			at = 0;
		memset(log + at, (int)(i & 0xff), (size_t)size);
		uint64_t t0 = now_ns();
		if (tdax_persist(log + at, (size_t)size) != 0)
			die("tdax_persist", path);
		ns[i] = now_ns() - t0;
		at += (size_t)size;
	}
	qsort(ns, (size_t)n, sizeof(*ns), by_value);
	uint64_t median = ns[n / 2], p99 = ns[n * 99 / 100];
	/* What the two clock reads around a persist cost by themselves. */
	for (long i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		ns[i] = now_ns() - t0;
	}
	qsort(ns, (size_t)n, sizeof(*ns), by_value);
	printf("persist %ld B: median %llu ns, p99 %llu ns (%ld persists; the clock reads alone: %llu ns)\n",
	       size, (unsigned long long)median, (unsigned long long)p99, n, (unsigned long long)ns[n / 2]);
	tdax_unmap(log, LOG_SIZE);
	free(ns);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "run") == 0)
		return run(argv[2], argv[3]);
	if (argc == 5 && strcmp(argv[1], "bench") == 0)
		return bench(argv[2], atol(argv[3]), atol(argv[4]));
	fprintf(stderr, "usage: tdax-daxlog run DIR ORACLE | bench FILE N SIZE\n");
	return 2;
}
