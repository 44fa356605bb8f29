/*
 * program -- what kind of program a command is, as far as tdax's preload
 * library is concerned: one whose file calls go through a shared libc
 * (libtdax.so sees them) or one that makes its system calls itself (a Go
 * program, a statically linked one: libtdax.so sees none of them).
 */
#ifndef TDAX_CLI_PROGRAM_H
#define TDAX_CLI_PROGRAM_H

#include <stddef.h>

enum tdax_program_kind {
	TDAX_PROGRAM_LIBC,    /* dynamically linked, not Go: the hooks see its calls */
	TDAX_PROGRAM_GO,      /* a Go program: its runtime calls the kernel itself */
	TDAX_PROGRAM_STATIC,  /* statically linked: nothing can be preloaded into it */
	TDAX_PROGRAM_UNKNOWN, /* not found, not readable, not a 64-bit ELF file */
};

/* The kind of the program execvp(cmd) would run: cmd is looked up in PATH
 * when it has no '/', and a script ("#!") is judged by its interpreter.
 * The file judged goes into path (len bytes). */
enum tdax_program_kind tdax_program_kind(const char *cmd, char *path, size_t len);

#endif
