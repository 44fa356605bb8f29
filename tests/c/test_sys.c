/* test_sys -- tdax's own system calls (core/sys.h): what tdax_sys_noappend
 * decides about the kernel, and when it decides. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/sys.h"

#ifndef RWF_NOAPPEND
#define RWF_NOAPPEND 0x20
#endif

/* The kernel's own answer: does pwritev2 take RWF_NOAPPEND? */
static bool kernel_takes_noappend(void)
{
	int p[2];
	char byte = 0;
	struct iovec one = { &byte, 1 };
	if (pipe2(p, O_CLOEXEC) != 0)
		return false;
	bool takes = pwritev2(p[1], &one, 1, -1, RWF_NOAPPEND) == 1;
	close(p[0]);
	close(p[1]);
	return takes;
}

/* The probe needs a pipe. With no descriptor to spare (EMFILE) it has no
 * answer: it says "no" for that write-in and asks again at the next one,
 * rather than keeping "no" -- and the lifts of O_APPEND it stands for --
 * for the life of the process. */
TEST(a_probe_without_a_free_descriptor_asks_again)
{
	struct rlimit was;
	CHECK(getrlimit(RLIMIT_NOFILE, &was) == 0);
	int lowest = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(lowest >= 0);
	close(lowest);
	struct rlimit tight = { (rlim_t)lowest, was.rlim_max };
	CHECK(setrlimit(RLIMIT_NOFILE, &tight) == 0); /* no new descriptor at all */
	CHECK(!tdax_sys_noappend());
	CHECK(errno == EMFILE);
	CHECK(setrlimit(RLIMIT_NOFILE, &was) == 0);
	CHECK(tdax_sys_noappend() == kernel_takes_noappend());
	CHECK(tdax_sys_noappend() == kernel_takes_noappend()); /* (kept from here on) */
}
