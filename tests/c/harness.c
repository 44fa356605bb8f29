/*
 * harness -- runs the registered tests in order, each in the same process.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "core/files.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int tdax_test_failed;
static struct tdax_test *head, **tailp = &head;
static char dir[256], devpath[256];

void tdax_test_register(struct tdax_test *t)
{
	*tailp = t;
	tailp = &t->next;
}

static void cleanup(void)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'*", dir, devpath);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", dir);
}

const char *tdax_test_dir(void)
{
	return dir;
}

const char *tdax_test_device(void)
{
	static int n;
	static char buf[300];
	snprintf(buf, sizeof(buf), "%s.%d", devpath, n++);
	unlink(buf);
	return buf;
}

int main(int argc, char **argv)
{
	/* Files under test live on the disk (not tmpfs), the region on /dev/shm. */
	snprintf(dir, sizeof(dir), "/var/tmp/tdax-test-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(devpath, sizeof(devpath), "/dev/shm/tdax-test-%d", (int)getpid());
	atexit(cleanup);
	int passed = 0, failed = 0;
	for (struct tdax_test *t = head; t; t = t->next) {
		if (argc > 1 && strcmp(argv[1], t->name) != 0)
			continue;
		tdax_test_failed = 0;
		t->fn();
		printf("%s %s\n", tdax_test_failed ? "FAIL" : "ok  ", t->name);
		fflush(stdout);
		tdax_test_failed ? failed++ : passed++;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

struct tdax_device *tdax_test_new_device(uint64_t capacity, uint32_t seg_size)
{
	/* 32 MiB unless a test asks for more: recovery reads every segment,
	 * and each page of a /dev/shm region it reads for the first time is
	 * allocated and cleared (a default 256 MiB region a test: most of the
	 * C tests' time). Not pre-faulted either, as the preload opens it. */
	struct tdax_create_opts o = { .path = tdax_test_device(), .backend = TDAX_BACKEND_EMULATED,
				      .capacity = capacity ? capacity : 32u << 20, .seg_size = seg_size };
	struct tdax_err e;
	struct tdax_device *dev;
	if (tdax_device_create(&o, &e) || tdax_device_open(o.path, TDAX_OPEN_NO_PREFAULT, &dev, &e)) {
		fprintf(stderr, "  device: %s\n", e.msg);
		return NULL;
	}
	return dev;
}

uint32_t tdax_test_new_file(struct tdax_device *dev, const char *name, uint32_t *gen)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", tdax_test_dir(), name);
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	uint32_t idx = UINT32_MAX;
	bool created;
	struct tdax_err e;
	if (fd < 0 || tdax_files_register(dev, fd, path, &idx, gen, &created, &e) != 0)
		fprintf(stderr, "  register %s failed\n", path);
	if (fd >= 0)
		close(fd);
	return idx;
}
