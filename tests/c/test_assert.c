/* test_assert -- TDAX_ASSERT (core/util.h) in the test build: a holding
 * invariant costs one evaluation and nothing else; a broken one names
 * file:line and the condition on fd 2 and aborts. */
#include "harness.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util.h"

#ifndef TDAX_TEST_BUILD
#error "the unit tests are built with -DTDAX_TEST_BUILD"
#endif

TEST(a_holding_assertion_evaluates_its_condition_once)
{
	int n = 0;
	TDAX_ASSERT(++n == 1);
	CHECK(n == 1);
}

TEST(a_broken_assertion_names_file_line_and_condition_and_aborts)
{
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 2);
		int three = 3;
		TDAX_ASSERT(three % 2 == 0);
		_exit(0);
	}
	close(fds[1]);
	char out[1024] = "";
	size_t len = 0;
	ssize_t r;
	while (len < sizeof(out) - 1 && (r = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += (size_t)r;
	close(fds[0]);
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	CHECK(strstr(out, "test_assert.c:") != NULL);
	CHECK(strstr(out, "assertion failed: three % 2 == 0") != NULL);
}
