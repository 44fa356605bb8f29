/*
 * test_ranges -- the device's range table: lookup, insertion, and entries
 * of files that are gone being taken over instead of filling the table.
 */
#include "files.h"
#include "harness.h"
#include "ranges.h"

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
