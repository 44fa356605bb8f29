/*
 * smallfiles -- the many-files workload of `tdax bench files`: COUNT times,
 * create a file under a temporary name, write SIZE bytes, close it and
 * rename it to its final name (what package managers, build tools and mail
 * stores do), with --fsync a sync before the close (dpkg's way). Prints
 * files per second as JSON. Run it plain and under `tdax run` to compare.
 *
 * usage: tdax-smallfiles DIR [--count N] [--size N] [--fsync]
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

static void usage(void)
{
	fprintf(stderr, "usage: tdax-smallfiles DIR [--count N] [--size N] [--fsync]\n");
}

/* One file: create, write, (sync,) close, rename. 0, or -1 with the failing
 * call reported. */
static int one(const char *dir, long i, const char *buf, size_t size, int sync)
{
	char tmp[4096], fin[4096];
	snprintf(tmp, sizeof(tmp), "%s/f%ld.tmp", dir, i);
	snprintf(fin, sizeof(fin), "%s/f%ld", dir, i);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		perror(tmp);
		return -1;
	}
	if (write(fd, buf, size) != (ssize_t)size || (sync && fsync(fd) != 0)) {
		perror(tmp);
		close(fd);
		return -1;
	}
	if (close(fd) != 0 || rename(tmp, fin) != 0) {
		perror(fin);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "count", required_argument, 0, 'n' }, { "size", required_argument, 0, 's' },
		{ "fsync", no_argument, 0, 'f' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	long count = 10000;
	size_t size = 4096;
	int sync = 0, c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'n': count = atol(optarg); break;
		case 's': size = (size_t)atol(optarg); break;
		case 'f': sync = 1; break;
		default:
			usage();
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind >= argc || count <= 0 || size == 0) {
		usage();
		return 2;
	}
	char *buf = malloc(size);
	if (!buf)
		return 1;
	memset(buf, 'f', size);
	uint64_t t0 = now_ns();
	for (long i = 0; i < count; i++)
		if (one(argv[optind], i, buf, size, sync) != 0)
			return 1;
	double secs = (double)(now_ns() - t0) / 1e9;
	printf("{\"files_per_s\": %.1f, \"count\": %ld, \"size\": %zu, \"fsync\": %s}\n",
	       (double)count / secs, count, size, sync ? "true" : "false");
	free(buf);
	return 0;
}
