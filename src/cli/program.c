/*
 * program -- what kind of program a command is (program.h), read from its
 * ELF headers: a PT_INTERP segment means it is dynamically linked (a
 * preload library can be loaded into it); a .note.go.buildid or
 * .go.buildinfo section means a Go runtime, which issues read, write and
 * fsync as raw system calls whether or not it links libc (cgo). The file
 * is untrusted input: every offset and size is checked against the file
 * before it is used, and anything that does not add up is UNKNOWN.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/program.h"

/* cmd as execvp would find it: into path, 0; -1 if no such executable. */
static int resolve(const char *cmd, char *path, size_t len)
{
	if (strchr(cmd, '/')) {
		snprintf(path, len, "%s", cmd);
		return access(path, X_OK);
	}
	const char *dirs = getenv("PATH");
	if (!dirs || !*dirs)
		dirs = "/usr/local/bin:/usr/bin:/bin";
	for (const char *d = dirs; d; d = strchr(d, ':') ? strchr(d, ':') + 1 : NULL) {
		size_t n = strcspn(d, ":");
		if ((size_t)snprintf(path, len, "%.*s%s%s", (int)n, d, n ? "/" : "", cmd) >= len)
			continue;
		struct stat st;
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0)
			return 0;
	}
	return -1;
}

static bool read_at(int fd, void *buf, size_t n, off_t off, off_t size)
{
	return off >= 0 && (off_t)n <= size && off <= size - (off_t)n && pread(fd, buf, n, off) == (ssize_t)n;
}

/* Does the ELF file have a section whose name is one of Go's? */
static bool has_go_section(int fd, const Elf64_Ehdr *h, off_t size)
{
	if (h->e_shentsize != sizeof(Elf64_Shdr) || h->e_shnum == 0 || h->e_shstrndx >= h->e_shnum)
		return false;
	Elf64_Shdr strs;
	if (!read_at(fd, &strs, sizeof(strs), (off_t)(h->e_shoff + (Elf64_Off)h->e_shstrndx * sizeof(strs)),
		     size) || strs.sh_size == 0 || strs.sh_size > (1u << 20))
		return false;
	char *names = malloc(strs.sh_size + 1);
	if (!names || !read_at(fd, names, strs.sh_size, (off_t)strs.sh_offset, size)) {
		free(names);
		return false;
	}
	names[strs.sh_size] = '\0';
	bool go = false;
	for (unsigned i = 0; i < h->e_shnum && !go; i++) {
		Elf64_Shdr s;
		if (!read_at(fd, &s, sizeof(s), (off_t)(h->e_shoff + (Elf64_Off)i * sizeof(s)), size))
			break;
		if (s.sh_name < strs.sh_size)
			go = !strcmp(names + s.sh_name, ".note.go.buildid") ||
			     !strcmp(names + s.sh_name, ".go.buildinfo");
	}
	free(names);
	return go;
}

static enum tdax_program_kind elf_kind(int fd, off_t size)
{
	Elf64_Ehdr h;
	if (!read_at(fd, &h, sizeof(h), 0, size) || memcmp(h.e_ident, ELFMAG, SELFMAG) ||
	    h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_phentsize != sizeof(Elf64_Phdr))
		return TDAX_PROGRAM_UNKNOWN;
	if (has_go_section(fd, &h, size))
		return TDAX_PROGRAM_GO;
	for (unsigned i = 0; i < h.e_phnum; i++) {
		Elf64_Phdr p;
		if (!read_at(fd, &p, sizeof(p), (off_t)(h.e_phoff + (Elf64_Off)i * sizeof(p)), size))
			return TDAX_PROGRAM_UNKNOWN;
		if (p.p_type == PT_INTERP)
			return TDAX_PROGRAM_LIBC;
	}
	return TDAX_PROGRAM_STATIC;
}

/* A script's interpreter ("#!/usr/bin/env NAME" looks NAME up) into cmd. */
static bool interpreter(int fd, char *cmd, size_t len)
{
	char line[256];
	ssize_t n = pread(fd, line, sizeof(line) - 1, 0);
	if (n < 3 || line[0] != '#' || line[1] != '!')
		return false;
	line[n] = '\0';
	line[strcspn(line, "\n")] = '\0';
	char *save = NULL, *word = strtok_r(line + 2, " \t", &save);
	if (!word)
		return false;
	const char *slash = strrchr(word, '/');
	if (slash && !strcmp(slash + 1, "env"))
		while ((word = strtok_r(NULL, " \t", &save)) && word[0] == '-')
			;
	if (!word)
		return false;
	snprintf(cmd, len, "%s", word);
	return true;
}

enum tdax_program_kind tdax_program_kind(const char *cmd, char *path, size_t len)
{
	char name[PATH_MAX];
	snprintf(name, sizeof(name), "%s", cmd);
	for (int depth = 0; depth < 2; depth++) {
		if (resolve(name, path, len) != 0)
			return TDAX_PROGRAM_UNKNOWN;
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
			if (fd >= 0)
				close(fd);
			return TDAX_PROGRAM_UNKNOWN;
		}
		bool script = interpreter(fd, name, sizeof(name));
		enum tdax_program_kind kind = script ? TDAX_PROGRAM_UNKNOWN : elf_kind(fd, st.st_size);
		close(fd);
		if (!script)
			return kind;
	}
	return TDAX_PROGRAM_UNKNOWN;
}
