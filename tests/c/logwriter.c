/*
 * logwriter -- test helper: registers FILE in DEVICE and appends COUNT
 * records of SIZE bytes at offsets i*SIZE with a known pattern, printing
 * each acknowledged sequence number (after a first real sync of the file,
 * as the runtime makes). With --write-file the bytes also go to
 * the file (as under tdax); without it the file never sees them, as if the
 * page cache had been lost. Exit 0 when all were appended.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/files.h"
#include "core/log.h"

static void pattern(char *buf, size_t n, unsigned i)
{
	for (size_t k = 0; k < n; k++)
		buf[k] = (char)('a' + (i * 7 + k) % 26);
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: logwriter DEVICE FILE COUNT SIZE [--write-file]\n");
		return 2;
	}
	bool write_file = argc > 5 && strcmp(argv[5], "--write-file") == 0;
	unsigned count = (unsigned)atoi(argv[3]), size = (unsigned)atoi(argv[4]);
	struct tdax_err e;
	bool created;
	struct tdax_device *dev;
	/* Any owner's region: the tests forge records as whoever can write it. */
	if (tdax_device_open(argv[1], TDAX_OPEN_ANY_OWNER | TDAX_OPEN_ALLOW_SHARED, &dev, &e)) {
		fprintf(stderr, "logwriter: %s\n", e.msg);
		return 1;
	}
	int fd = open(argv[2], O_RDWR | O_CREAT, 0644);
	uint32_t idx, gen;
	if (fd < 0 || tdax_files_register(dev, fd, argv[2], &idx, &gen, &created, &e)) {
		fprintf(stderr, "logwriter: %s\n", fd < 0 ? "cannot open file" : e.msg);
		return 1;
	}
	/* As the runtime does: a new entry's first sync is real, and only
	 * after it can a record be acknowledged (files.h, rt.synced). */
	struct tdax_file_rt *rt = &tdax_file_at(dev, idx)->rt;
	if (fdatasync(fd) != 0) {
		perror("logwriter: fdatasync");
		return 1;
	}
	atomic_store(&rt->synced, 1);
	tdax_dev_persist(dev, &rt->synced, sizeof(rt->synced));
	char *buf = malloc(size);
	for (unsigned i = 0; i < count; i++) {
		pattern(buf, size, i);
		uint64_t seq;
		if (write_file && pwrite(fd, buf, size, (off_t)i * size) != (ssize_t)size)
			return 1;
		if (tdax_log_append(dev, idx, gen, (uint64_t)i * size, buf, size, &seq) != 0) {
			fprintf(stderr, "logwriter: append %u failed\n", i);
			return 1;
		}
		printf("%llu\n", (unsigned long long)seq);
	}
	fflush(stdout);
	free(buf);
	close(fd);
	tdax_device_close(dev);
	return 0;
}
