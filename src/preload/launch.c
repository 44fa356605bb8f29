/*
 * launch -- a managed process starting a program that skips libc (a Go
 * program, a static binary: core/program.h). libtdax.so would see none of
 * its file calls, so the exec and posix_spawn hooks start it through tdax
 * run instead (TDAX_BIN, which tdax run sets), as a command of its own
 * under --intercept auto: a dynamically linked Go program's runtime is
 * rewritten to call tdax (interpose_go.c), another's calls are trapped by
 * a seccomp filter where the kernel can (coherent mode), and tdax run says
 * at start when neither can be. `sh -c etcd`, a wrapper script, a service
 * manager's helper: the program is seen as if tdax run had started it.
 *
 * Where tdax run is not to be used -- TDAX_INTERCEPT=libc, libtdax.so
 * preloaded by hand (no TDAX_BIN) -- one line on stderr says
 * the program is unseen (not under TDAX_QUIET). A program that links
 * libtdax.so itself (include/tdax.h) and runs outside tdax is left alone.
 * It runs between fork and exec: system calls and the stack only.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/env.h"
#include "core/program.h"
#include "core/sys.h"
#include "preload/launch.h"
#include "preload/state.h"

enum { MAX_ARGS = 1024 }; /* a longer command line is started as it is */

/* Write the NULL-terminated words to stderr, as one line. */
static void say(const char *const words[])
{
	char line[2 * PATH_MAX];
	size_t at = 0;
	for (int i = 0; words[i]; i++) {
		size_t n = strlen(words[i]);
		if (at + n + 1 >= sizeof(line))
			n = sizeof(line) - 2 - at;
		memcpy(line + at, words[i], n);
		at += n;
	}
	line[at++] = '\n';
	if (tdax_sys_write(STDERR_FILENO, line, at) < 0)
		return; /* nowhere to say it */
}

/* envp with its LD_PRELOAD as tdax run should see it: without libtdax.so
 * (tdax run itself runs unmanaged, and adds it back for what it starts).
 * Into out (room for all of envp); preload holds the new entry. */
static void env_for_tdax(char *const envp[], char **out, char *preload, size_t len)
{
	int n = 0;
	for (int i = 0; envp && envp[i]; i++) { /* (Linux takes a NULL envp as none) */
		if (!strncmp(envp[i], "LD_PRELOAD=", 11)) {
			memcpy(preload, "LD_PRELOAD=", 11);
			if (!tdax_preload_without_tdax(envp[i] + 11, preload + 11, len - 11) || !preload[11])
				continue;
			out[n++] = preload;
		} else {
			out[n++] = envp[i];
		}
	}
	out[n] = NULL;
}

/* start tdax run --intercept auto -- path argv[1..]: start's result.
 * Apart, so that the start of an ordinary program does not carry its
 * frame (a thread's stack may be small). */
static __attribute__((noinline)) int relaunch(const char *bin, const char *path, char *const argv[], int argc,
					      char *const envp[], tdax_start_fn start, void *ctx)
{
	char *nargv[MAX_ARGS + 6], *nenvp[MAX_ARGS + 1], preload[3 * PATH_MAX];
	const char *head[] = { "tdax", "run", "--intercept", "auto", "--", path };
	int n = 0;
	for (; n < (int)(sizeof(head) / sizeof(head[0])); n++)
		nargv[n] = (char *)head[n];
	for (int i = 1; i < argc; i++)
		nargv[n++] = argv[i];
	nargv[n] = NULL;
	env_for_tdax(envp, nenvp, preload, sizeof(preload));
	return start(bin, nargv, nenvp, ctx);
}

bool tdax_launch(const char *file, bool search, char *const argv[], char *const envp[], tdax_start_fn start,
		 void *ctx)
{
	const char *bin = getenv("TDAX_BIN"), *intercept = getenv("TDAX_INTERCEPT");
	const char *preload = getenv("LD_PRELOAD");
	if ((!bin || !*bin) && (!preload || !strstr(preload, "libtdax.so")))
		return false; /* a program that links libtdax.so itself, outside tdax */
	char path[PATH_MAX];
	enum tdax_program_kind kind = tdax_program_kind(file, search, path, sizeof(path));
	if (!tdax_program_skips_libc(kind))
		return false;
	int argc = 0, envc = 0;
	while (argv && argv[argc] && argc <= MAX_ARGS)
		argc++;
	while (envp && envp[envc] && envc <= MAX_ARGS)
		envc++;
	const char *why = NULL;
	if (!bin || !*bin)
		why = "libtdax.so was not preloaded by tdax run";
	else if (intercept && !strcmp(intercept, "libc"))
		why = "--intercept libc";
	else if (argc > MAX_ARGS || envc > MAX_ARGS)
		why = "its command line is too long to start it through tdax run";
	if (!why) {
		if (relaunch(bin, path, argv, argc, envp, start, ctx) == 0)
			return true;
		why = "tdax run (TDAX_BIN) could not be started";
	}
	if (!tdax_env_on("TDAX_QUIET"))
		say((const char *const[]){ "tdax: ", path,
					   kind == TDAX_PROGRAM_GO ? " is a Go program" : " is statically linked",
					   ", so libtdax.so sees none of its writes and syncs: they go to the "
					   "kernel as without tdax (",
					   why, ")", NULL });
	return false;
}
