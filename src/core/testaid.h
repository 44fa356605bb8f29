/*
 * testaid -- the switch for test aids: code that only the test build has.
 *
 * The test build (build/test/, `make all` builds it beside the product)
 * compiles every source with -DTDAX_TEST_BUILD. Code that exists only for
 * tests -- a lying sync, a recovery that kills itself, the durable shadow,
 * the persist-order trace -- sits under `#ifdef TDAX_TEST_BUILD`, or reads
 * its switch with TDAX_TEST_ENV(). In the product build the aids compile to
 * nothing, and no TDAX_TEST_ name is in the binaries: setting one there
 * changes nothing (tests/py/test_product.py checks both).
 */
#ifndef TDAX_TESTAID_H
#define TDAX_TESTAID_H

#include <stdlib.h>

#ifdef TDAX_TEST_BUILD
/* The value of the environment variable TDAX_TEST_<name>, or NULL. */
#define TDAX_TEST_ENV(name) secure_getenv("TDAX_TEST_" name)
#else
#define TDAX_TEST_ENV(name) ((const char *)NULL)
#endif

#ifdef TDAX_TEST_BUILD
#include <unistd.h>
/* While the file TDAX_TEST_<name> names exists, wait here: a test holds a
 * race's window open with it. */
#define TDAX_TEST_HOLD_WHILE(name)                                              \
	do {                                                                    \
		const char *flag_ = TDAX_TEST_ENV(name);                        \
		while (flag_ && access(flag_, F_OK) == 0)                       \
			usleep(1000);                                           \
	} while (0)
#else
#define TDAX_TEST_HOLD_WHILE(name) ((void)0)
#endif

#endif
