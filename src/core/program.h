/*
 * program -- what kind of program a command is, as far as tdax's preload
 * library is concerned: one whose file calls go through a shared libc
 * (libtdax.so sees them) or one that makes its system calls itself (a Go
 * program, a statically linked one: libtdax.so sees none of them), and
 * where a Go runtime's system-call and exit functions are. Used by tdax
 * run for its command, by libtdax.so's exec hooks for every program a
 * managed process starts, and by its rewrite of a Go program's runtime.
 */
#ifndef TDAX_CORE_PROGRAM_H
#define TDAX_CORE_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>

enum tdax_program_kind {
	TDAX_PROGRAM_LIBC,    /* dynamically linked, not Go: the hooks see its calls */
	TDAX_PROGRAM_GO,      /* a Go program: its runtime calls the kernel itself */
	TDAX_PROGRAM_STATIC,  /* statically linked: nothing can be preloaded into it */
	TDAX_PROGRAM_UNKNOWN, /* not found, not readable, not a 64-bit ELF file */
};

/* The kind of the program exec would run for cmd: looked up in PATH when
 * search is set (execvp) and cmd has no '/', and a script ("#!") judged by
 * its interpreter. The file judged goes into path (len bytes).
 * Async-signal-safe (no allocation, no stdio): the exec hooks call it in a
 * child between fork and exec. */
enum tdax_program_kind tdax_program_kind(const char *cmd, bool search, char *path, size_t len);

/* An LD_PRELOAD list (words separated by spaces or colons) without
 * libtdax.so, into out: what a program tdax does not preload into keeps
 * of it; false if it does not fit (out is then empty). Async-signal-safe. */
bool tdax_preload_without_tdax(const char *list, char *out, size_t len);

/*
 * The two functions of a Go runtime (Go 1.19 and later) that libtdax.so
 * rewrites into jumps (interpose_go.c), found by their exact bytes:
 * Syscall6, through which every call of package syscall goes, and
 * runtime.exit, the process's end (exit_group, without libc's exit).
 */
enum tdax_go_site { TDAX_GO_SYSCALL6, TDAX_GO_EXIT, TDAX_GO_SITES };

/* Where the site `which` is in text[0..len): the offset of the bytes to
 * rewrite, or -1 when it is not there exactly once; *found: how many
 * times it is there. */
long tdax_program_go_site(const void *text, size_t len, enum tdax_go_site which, int *found);

/* How many bytes the site `which` has to rewrite (at least a jump's 5). */
size_t tdax_program_go_site_len(enum tdax_go_site which);

/* Can libtdax.so rewrite the Go program at path (tdax run --intercept
 * rewrite): dynamically linked, and each site found once in its
 * executable segments? */
bool tdax_program_go_rewritable(const char *path);

/* Do these ELF notes (a PT_NOTE segment's len bytes, as loaded) hold Go's
 * build ID, which every Go binary -- program or c-shared library -- has? */
bool tdax_program_go_notes(const void *notes, size_t len);

/* Whether a program of this kind makes its file calls without libc. */
static inline bool tdax_program_skips_libc(enum tdax_program_kind kind)
{
	return kind == TDAX_PROGRAM_GO || kind == TDAX_PROGRAM_STATIC;
}

#endif
