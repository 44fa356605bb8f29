/*
 * cmd_python -- benchmarks, the simulator and plots are Python's: tdax
 * bench, trace and sim hand over to the project's virtual environment
 * (build/bin/tdax -> build/venv/bin/python -m MODULE, with bench/ on the path).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmd_python.h"
#include "cli/out.h"

/* Exec the venv's python -m module with argv[first..]; returns only on failure. */
static int handover(const char *module, int first, int argc, char **argv)
{
	char exe[PATH_MAX - 64], py[PATH_MAX], path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return fail(&(struct tdax_err){ "cannot find where tdax is installed" });
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(py, sizeof(py), "%s/../venv/bin/python", exe);
	snprintf(path, sizeof(path), "%s/../../bench", exe);
	if (access(py, X_OK) != 0) {
		fprintf(stderr, "tdax %s: no Python environment at %s; run 'make deps' first\n", argv[0], py);
		return EXIT_FAIL;
	}
	setenv("PYTHONPATH", path, 1);
	char **args = calloc((size_t)argc + 4, sizeof(char *));
	args[0] = py;
	args[1] = "-m";
	args[2] = (char *)module;
	for (int i = first; i < argc; i++)
		args[i - first + 3] = argv[i];
	execv(py, args);
	fprintf(stderr, "tdax %s: cannot run %s: %s\n", argv[0], py, strerror(errno));
	free(args);
	return EXIT_FAIL;
}

int cmd_bench(int argc, char **argv)
{
	return handover("tdaxbench", 1, argc, argv);
}

int cmd_trace(int argc, char **argv)
{
	return handover("tdaxsim", 0, argc, argv);
}
