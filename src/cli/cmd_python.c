/*
 * cmd_python -- benchmarks, the simulator and plots are Python's: tdax
 * bench, trace and sim hand over to Python (cli/paths.h): in a build tree
 * to its virtual environment (build/bin/tdax -> build/venv/bin/python -m
 * MODULE, with bench/ on the path); installed, to the system's python3
 * with PREFIX/lib/tdax/python on the path (the simulator only: the
 * benchmarks build and run their workloads in a source tree).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmd_python.h"
#include "cli/out.h"
#include "cli/paths.h"

/* Exec python -m module with argv[first..]; returns only on failure. */
static int handover(const char *module, int first, int argc, char **argv)
{
	char exe[PATH_MAX - 64], py[PATH_MAX], path[PATH_MAX], lib[PATH_MAX - 32], track[PATH_MAX];
	if (tdax_paths_self(exe, sizeof(exe)) != 0)
		return fail(&(struct tdax_err){ "cannot find where tdax is installed" });
	bool have_lib = tdax_paths_libdir(lib, sizeof(lib)) == 0;
	snprintf(path, sizeof(path), "%s/../../bench/tdaxsim", exe);
	bool tree = access(path, R_OK) == 0;
	if (tree) {
		snprintf(py, sizeof(py), "%s/../venv/bin/python", exe);
		snprintf(path, sizeof(path), "%s/../../bench", exe);
		if (access(py, X_OK) != 0) {
			fprintf(stderr, "tdax %s: no Python environment at %s; run 'make deps' first\n", argv[0], py);
			return EXIT_FAIL;
		}
	} else if (strcmp(module, "tdaxbench") == 0 || !have_lib) {
		fprintf(stderr, "tdax %s: not part of this installation; it runs from a tdax source tree "
			"(git clone, then 'make %s')\n", argv[0], strcmp(module, "tdaxbench") == 0 ? "bench" : "");
		return EXIT_FAIL;
	} else {
		snprintf(py, sizeof(py), "python3");
		snprintf(path, sizeof(path), "%s/python", lib);
		setenv("PYTHONDONTWRITEBYTECODE", "1", 1); /* nothing left for removal to miss */
	}
	setenv("PYTHONPATH", path, 1);
	/* The policy's own code, for the simulator (bench/tdaxsim/ctrack.py). */
	if (have_lib) {
		snprintf(track, sizeof(track), "%s/libtdaxtrack.so", lib);
		if (access(track, R_OK) == 0)
			setenv("TDAX_TRACK_LIB", track, 1);
	}
	char **args = calloc((size_t)argc + 4, sizeof(char *));
	args[0] = py;
	args[1] = "-m";
	args[2] = (char *)module;
	for (int i = first; i < argc; i++)
		args[i - first + 3] = argv[i];
	execvp(py, args);
	fprintf(stderr, "tdax %s: cannot run %s: %s%s\n", argv[0], py, strerror(errno),
		tree ? "" : " (install python3)");
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
