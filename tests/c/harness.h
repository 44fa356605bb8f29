/*
 * harness -- a minimal C test runner: TEST(name) functions registered at
 * load time, CHECK() assertions, and a closing "N passed, N failed" line.
 */
#ifndef TDAX_HARNESS_H
#define TDAX_HARNESS_H

#include <stdio.h>
#include <stdlib.h>

struct tdax_test {
	const char *name;
	void (*fn)(void);
	struct tdax_test *next;
};
void tdax_test_register(struct tdax_test *t);
extern int tdax_test_failed;

#define TEST(name)                                                              \
	static void name(void);                                                 \
	static struct tdax_test name##_t = { #name, name, NULL };               \
	__attribute__((constructor)) static void name##_reg(void)               \
	{                                                                       \
		tdax_test_register(&name##_t);                                  \
	}                                                                       \
	static void name(void)

#define CHECK(cond)                                                             \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			tdax_test_failed = 1;                                   \
			return;                                                 \
		}                                                               \
	} while (0)

/* A scratch directory for this test program, removed at exit; and a fresh
 * device region path on /dev/shm. */
const char *tdax_test_dir(void);
const char *tdax_test_device(void);

#include "core/device.h"
#include "core/format.h"
/* Create a fresh emulated device (capacity, 0 = 32 MiB; segment size, 0 = default)
 * and open it; NULL (with a message) on failure. */
struct tdax_device *tdax_test_new_device(uint64_t capacity, uint32_t seg_size);
/* Create (or open) NAME in the scratch directory and register it in dev:
 * its file index, and its generation in *gen; UINT32_MAX on failure. */
uint32_t tdax_test_new_file(struct tdax_device *dev, const char *name, uint32_t *gen);

#endif

