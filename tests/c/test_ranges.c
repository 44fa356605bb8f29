/*
 * test_ranges -- the device's range table: lookup, insertion, entries of
 * files that are gone being taken over instead of filling the table, and the
 * job lock of an entry surviving the death of its holder.
 */
#define _GNU_SOURCE
#include "core/files.h"
#include "harness.h"
#include "core/ranges.h"
#include "core/util.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

TEST(lookup_finds_what_insertion_made_and_nothing_else)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	uint32_t gen, f = tdax_test_new_file(dev, "a", &gen);
	CHECK(f != UINT32_MAX);
	struct tdax_range *r = tdax_ranges_get(dev, f, gen, 7, true);
	CHECK(r && tdax_range_file(r) == f && tdax_range_number(r) == 7);
	CHECK(tdax_ranges_get(dev, f, gen, 7, false) == r);
	CHECK(tdax_ranges_get(dev, f, gen, 8, false) == NULL);
	CHECK(tdax_ranges_get(dev, f, gen + 1, 7, false) == NULL); /* another generation */
	tdax_device_close(dev);
}

/* A file fills the whole table; once it is gone (its entry freed, as at
 * unlink), another file's ranges take its slots over, from a clean state. */
TEST(ranges_of_a_gone_file_are_taken_over_when_the_table_is_full)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	uint32_t ga, gb, a = tdax_test_new_file(dev, "big", &ga), b = tdax_test_new_file(dev, "next", &gb);
	CHECK(a != UINT32_MAX && b != UINT32_MAX);
	uint32_t made = 0;
	for (uint32_t rno = 0; rno < 4 * dev->sb->max_ranges; rno++) {
		struct tdax_range *r = tdax_ranges_get(dev, a, ga, rno, true);
		if (r) {
			made++;
			atomic_store(&r->t.state, TDAX_R_UPGRADED);
		}
	}
	CHECK(made >= dev->sb->max_ranges * 9 / 10);
	uint32_t blocked = 0;
	for (uint32_t rno = 0; rno < 100; rno++)
		blocked += tdax_ranges_get(dev, b, gb, rno, true) == NULL;
	CHECK(blocked > 0); /* the table is full of the big file's ranges */
	tdax_files_forget(dev, a, ga);
	for (uint32_t rno = 0; rno < 100; rno++) {
		struct tdax_range *r = tdax_ranges_get(dev, b, gb, rno, true);
		CHECK(r && tdax_range_file(r) == b && atomic_load(&r->fgen) == gb);
		CHECK(atomic_load(&r->t.state) != TDAX_R_UPGRADED); /* nothing inherited */
	}
	tdax_device_close(dev);
}

/* A child that takes the entry's job lock, says so on ready[1], and exits
 * holding it when hold[1] is closed. */
static pid_t child_taking_lock(struct tdax_range *shared, const int ready[2], const int hold[2])
{
	pid_t pid = fork();
	if (pid == 0) {
		close(hold[1]);
		char c = tdax_pidlock_try(&shared->job_pid) ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1 || read(hold[0], &c, 1) < 0)
			_exit(2);
		_exit(0);
	}
	return pid;
}

TEST(job_lock_is_taken_over_only_from_a_dead_holder)
{
	struct tdax_range *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(r != MAP_FAILED);
	memset(r, 0, sizeof(*r));
	CHECK(tdax_pidlock_try(&r->job_pid));
	CHECK(!tdax_pidlock_try(&r->job_pid)); /* held by this process: not again */
	tdax_pidlock_release(&r->job_pid);

	int ready[2], hold[2];
	CHECK(pipe(ready) == 0 && pipe(hold) == 0);
	pid_t pid = child_taking_lock(r, ready, hold);
	CHECK(pid > 0);
	char c = 0;
	CHECK(read(ready[0], &c, 1) == 1 && c == 'y');
	CHECK(atomic_load(&r->job_pid) == (uint32_t)pid);
	CHECK(!tdax_pidlock_try(&r->job_pid)); /* a live holder keeps it */
	close(hold[1]);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(atomic_load(&r->job_pid) == (uint32_t)pid); /* died holding it */
	CHECK(tdax_pidlock_try(&r->job_pid));
	CHECK(atomic_load(&r->job_pid) == tdax_pid());
	close(ready[0]);
	close(ready[1]);
	close(hold[0]);
	munmap(r, sizeof(*r));
}
