/*
 * logbench -- what a lightweight sync saves: the latency of a log append
 * made persistent in the device region, against a write + fdatasync of the
 * same bytes on this machine's disk, by record size. Prints medians and the
 * ratio, measured side by side in one run.
 *
 * usage: tdax-logbench [--dir DISKDIR] [--persist-cost NS] [--iters N]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/files.h"
#include "core/format.h"
#include "core/log.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t pct(uint64_t *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[(size_t)(p * (double)(n - 1))];
}

int main(int argc, char **argv)
{
	const char *dir = "/var/tmp";
	uint64_t cost = 0;
	int iters = 20000, sync_iters = 300;
	static const struct option opts[] = {
		{ "dir", required_argument, 0, 'd' }, { "persist-cost", required_argument, 0, 'c' },
		{ "iters", required_argument, 0, 'n' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'c': cost = strtoull(optarg, NULL, 10); break;
		case 'n': iters = atoi(optarg); sync_iters = iters / 50 > 20 ? iters / 50 : 20; break;
		default:
			fprintf(stderr, "usage: tdax-logbench [--dir DISKDIR] [--persist-cost NS] [--iters N]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	char devpath[64], filepath[512];
	snprintf(devpath, sizeof(devpath), "/dev/shm/tdax-logbench-%d", (int)getpid());
	snprintf(filepath, sizeof(filepath), "%s/tdax-logbench-%d", dir, (int)getpid());
	struct tdax_create_opts o = { .path = devpath, .backend = TDAX_BACKEND_EMULATED,
				      .capacity = 256 << 20, .persist_cost_ns = cost };
	struct tdax_err e;
	bool created;
	struct tdax_device *dev;
	if (tdax_device_create(&o, &e) || tdax_device_open(devpath, 0, &dev, &e)) {
		fprintf(stderr, "tdax-logbench: %s\n", e.msg);
		return 1;
	}
	int fd = open(filepath, O_RDWR | O_CREAT | O_TRUNC, 0600);
	uint32_t idx, gen;
	if (fd < 0 || tdax_files_register(dev, fd, filepath, &idx, &gen, &created, &e)) {
		fprintf(stderr, "tdax-logbench: %s: cannot open or register\n", filepath);
		return 1;
	}
	char *buf = malloc(65536);
	memset(buf, 'x', 65536);
	uint64_t *lat = malloc(sizeof(uint64_t) * (size_t)iters);

	printf("device: emulated on /dev/shm, +%llu ns per barrier; disk file: %s\n",
	       (unsigned long long)cost, filepath);
	printf("%8s %16s %16s %18s %10s\n", "size", "append+persist", "(p99)",
	       "write+fdatasync", "ratio");
	for (uint32_t size = 64; size <= 65536; size *= 2) {
		uint64_t seq = 0;
		for (int i = 0; i < iters; i++) {
			uint64_t t0 = tdax_now_ns();
			if (tdax_log_append(dev, idx, gen, (uint64_t)i * size, buf, size, &seq)) {
				fprintf(stderr, "tdax-logbench: append failed\n");
				return 1;
			}
			lat[i] = tdax_now_ns() - t0;
			if (i % 256 == 255) /* as the write-back would: keep the log small */
				tdax_log_release(dev, idx, gen, seq);
		}
		tdax_log_release(dev, idx, gen, seq);
		uint64_t p99 = pct(lat, (size_t)iters, 0.99), med = pct(lat, (size_t)iters, 0.5);
		if (ftruncate(fd, 0) != 0)
			return 1;
		for (int i = 0; i < sync_iters; i++) {
			uint64_t t0 = tdax_now_ns();
			if (pwrite(fd, buf, size, (off_t)i * size) != (ssize_t)size || fdatasync(fd)) {
				perror("tdax-logbench: write+fdatasync");
				return 1;
			}
			lat[i] = tdax_now_ns() - t0;
		}
		uint64_t smed = pct(lat, (size_t)sync_iters, 0.5);
		printf("%8u %13llu ns %13llu ns %15.1f us %9.0fx\n", size, (unsigned long long)med,
		       (unsigned long long)p99, (double)smed / 1000.0, (double)smed / (double)med);
	}
	close(fd);
	unlink(filepath);
	tdax_device_close(dev);
	unlink(devpath);
	free(buf);
	free(lat);
	return 0;
}
