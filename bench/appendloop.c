/*
 * appendloop -- the smallest durable-log workload: append SIZE bytes with
 * write() and fdatasync() after each, COUNT times (or with --nosync, never
 * sync). Prints operations per second and the median latency of one
 * append+sync and of the sync alone as JSON. Run it plain and under `tdax run` to compare.
 *
 * With --light-under NS it also reports when the syncs became lightweight
 * (the first sync faster than NS, and the fraction of such syncs): the
 * reactivity of the policy to a new stream. With --reads N it then reads
 * SIZE bytes N times at random SIZE-aligned offsets of what it wrote, and
 * reports the reads per second (bypass mode serves them from the device).
 *
 * usage: tdax-appendloop FILE [--size N] [--count N] [--nosync] [--pwrite] [--light-under NS]
 *                             [--reads N]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "size", required_argument, 0, 's' }, { "count", required_argument, 0, 'n' },
		{ "nosync", no_argument, 0, 'x' }, { "pwrite", no_argument, 0, 'p' },
		{ "light-under", required_argument, 0, 'l' }, { "reads", required_argument, 0, 'r' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	uint64_t light_under = 0;
	size_t size = 128;
	long count = 20000, reads = 0;
	int nosync = 0, use_pwrite = 0, c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': size = (size_t)atol(optarg); break;
		case 'n': count = atol(optarg); break;
		case 'x': nosync = 1; break;
		case 'p': use_pwrite = 1; break;
		case 'l': light_under = strtoull(optarg, NULL, 10); break;
		case 'r': reads = atol(optarg); break;
		default:
			fprintf(stderr, "usage: tdax-appendloop FILE [--size N] [--count N] [--nosync] [--pwrite] "
				"[--light-under NS] [--reads N]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind >= argc || count <= 0 || size == 0) {
		fprintf(stderr, "tdax-appendloop: a FILE is needed (and positive --size/--count)\n");
		return 2;
	}
	const char *path = argv[optind];
	int fd = open(path, (reads ? O_RDWR : O_WRONLY) | O_CREAT | O_TRUNC | (use_pwrite ? 0 : O_APPEND), 0644);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	char *buf = malloc(size);
	uint64_t *lat = malloc(sizeof(uint64_t) * (size_t)count);
	uint64_t *slat = malloc(sizeof(uint64_t) * (size_t)count);
	memset(buf, 'a', size);
	if (fdatasync(fd) != 0) { /* the file's creation, once */
		perror("fdatasync");
		return 1;
	}
	uint64_t t0 = now_ns(), first_light_ns = 0;
	long first_light = -1, lights = 0;
	for (long i = 0; i < count; i++) {
		uint64_t s = now_ns();
		ssize_t w = use_pwrite ? pwrite(fd, buf, size, (off_t)(i * (long)size)) : write(fd, buf, size);
		uint64_t m = now_ns();
		if (w != (ssize_t)size || (!nosync && fdatasync(fd) != 0)) {
			perror("write/fdatasync");
			return 1;
		}
		lat[i] = now_ns() - s;
		slat[i] = lat[i] - (m - s);
		if (light_under && slat[i] < light_under) {
			lights++;
			if (first_light < 0) {
				first_light = i;
				first_light_ns = now_ns() - t0;
			}
		}
	}
	double secs = (double)(now_ns() - t0) / 1e9;
	uint64_t x = 88172645463325252ull, r0 = now_ns();
	for (long i = 0; i < reads; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
		if (pread(fd, buf, size, (off_t)(x % (uint64_t)count * size)) != (ssize_t)size) {
			perror("pread");
			return 1;
		}
	}
	double read_secs = (double)(now_ns() - r0) / 1e9;
	qsort(lat, (size_t)count, sizeof(*lat), cmp);
	qsort(slat, (size_t)count, sizeof(*slat), cmp);
	printf("{\"ops_per_s\": %.1f, \"median_ns\": %llu, \"p99_ns\": %llu, \"sync_median_ns\": %llu, "
	       "\"count\": %ld, \"size\": %zu, \"first_light_sync\": %ld, \"first_light_ns\": %llu, "
	       "\"light_fraction\": %.4f, \"reads_per_s\": %.1f}\n", (double)count / secs, (unsigned long long)lat[count / 2],
	       (unsigned long long)lat[(size_t)((double)count * 0.99)],
	       (unsigned long long)slat[count / 2], count, size, first_light,
	       (unsigned long long)first_light_ns, (double)lights / (double)count,
	       reads ? (double)reads / read_secs : 0.0);
	close(fd);
	return 0;
}
