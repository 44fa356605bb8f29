/*
 * program -- what kind of program a command is (program.h), read from its
 * ELF headers: a PT_INTERP segment means it is dynamically linked (a
 * preload library can be loaded into it); a .note.go.buildid or
 * .go.buildinfo section means a Go runtime, which issues read, write and
 * fsync as raw system calls whether or not it links libc (cgo). The file
 * is untrusted input: every offset and size is checked against the file
 * before it is used, and anything that does not add up is UNKNOWN.
 *
 * It runs in every exec of a managed process (libtdax.so's hooks), after
 * a fork: system calls and pure functions only, headers read in a few
 * batched preads (an ordinary program costs seven system calls).
 *
 * It also knows the two functions of a Go runtime that libtdax.so
 * rewrites (interpose_go.c) by their bytes, and whether a Go program's
 * file has each once (tdax run's choice of --intercept rewrite).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/program.h"
#include "core/sys.h"

enum { BATCH = 64 }; /* headers read at once */

/* dir (n bytes, empty: the current directory) '/' name into out: false if
 * it does not fit. */
static bool join(char *out, size_t len, const char *dir, size_t n, const char *name)
{
	size_t m = strlen(name), slash = n ? 1 : 0;
	if (n + slash + m + 1 > len)
		return false;
	memcpy(out, dir, n);
	if (slash)
		out[n] = '/';
	memcpy(out + n + slash, name, m + 1);
	return true;
}

/* cmd as exec would find it: into path, 0; -1 if no such executable. */
static int resolve(const char *cmd, bool search, char *path, size_t len)
{
	if (!search || strchr(cmd, '/'))
		return join(path, len, "", 0, cmd) && access(path, X_OK) == 0 ? 0 : -1;
	const char *dirs = getenv("PATH");
	if (!dirs || !*dirs)
		dirs = "/usr/local/bin:/usr/bin:/bin";
	for (const char *d = dirs; d; d = strchr(d, ':') ? strchr(d, ':') + 1 : NULL) {
		struct stat st;
		if (join(path, len, d, strcspn(d, ":"), cmd) && tdax_sys_stat(path, &st) == 0 &&
		    S_ISREG(st.st_mode) && access(path, X_OK) == 0)
			return 0;
	}
	return -1;
}

static bool read_at(int fd, void *buf, size_t n, off_t off, off_t size)
{
	return off >= 0 && (off_t)n <= size && off <= size - (off_t)n &&
	       tdax_sys_pread(fd, buf, n, off) == (ssize_t)n;
}

/* Is the name at off of the section name table (names: its first got
 * bytes, read already) one of Go's? */
static bool go_name(int fd, const Elf64_Shdr *strs, const char *names, size_t got, Elf64_Word off, off_t size)
{
	static const char *const go[] = { ".note.go.buildid", ".go.buildinfo" };
	char name[24] = "";
	if (off >= strs->sh_size)
		return false;
	if (off + sizeof(name) <= got)
		memcpy(name, names + off, sizeof(name));
	else if (!read_at(fd, name, strs->sh_size - off < sizeof(name) ? strs->sh_size - off : sizeof(name),
			  (off_t)(strs->sh_offset + off), size))
		return false;
	name[sizeof(name) - 1] = '\0';
	for (size_t i = 0; i < sizeof(go) / sizeof(go[0]); i++)
		if (!strncmp(name, go[i], sizeof(name)))
			return true;
	return false;
}

/* Does the ELF file have a section whose name is one of Go's? */
static bool has_go_section(int fd, const Elf64_Ehdr *h, off_t size)
{
	if (h->e_shentsize != sizeof(Elf64_Shdr) || h->e_shnum == 0 || h->e_shstrndx >= h->e_shnum)
		return false;
	Elf64_Shdr strs, s[BATCH];
	if (!read_at(fd, &strs, sizeof(strs), (off_t)(h->e_shoff + (Elf64_Off)h->e_shstrndx * sizeof(strs)),
		     size) || strs.sh_size == 0)
		return false;
	char names[4096];
	size_t got = strs.sh_size < sizeof(names) ? strs.sh_size : sizeof(names);
	if (!read_at(fd, names, got, (off_t)strs.sh_offset, size))
		return false;
	for (unsigned first = 0; first < h->e_shnum; first += BATCH) {
		unsigned n = h->e_shnum - first < BATCH ? h->e_shnum - first : BATCH;
		if (!read_at(fd, s, n * sizeof(s[0]), (off_t)(h->e_shoff + (Elf64_Off)first * sizeof(s[0])), size))
			return false;
		for (unsigned i = 0; i < n; i++)
			if (go_name(fd, &strs, names, got, s[i].sh_name, size))
				return true;
	}
	return false;
}

static enum tdax_program_kind elf_kind(int fd, off_t size)
{
	Elf64_Ehdr h;
	if (!read_at(fd, &h, sizeof(h), 0, size) || memcmp(h.e_ident, ELFMAG, SELFMAG) ||
	    h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_phentsize != sizeof(Elf64_Phdr))
		return TDAX_PROGRAM_UNKNOWN;
	if (has_go_section(fd, &h, size))
		return TDAX_PROGRAM_GO;
	Elf64_Phdr p[BATCH];
	for (unsigned first = 0; first < h.e_phnum; first += BATCH) {
		unsigned n = h.e_phnum - first < BATCH ? h.e_phnum - first : BATCH;
		if (!read_at(fd, p, n * sizeof(p[0]), (off_t)(h.e_phoff + (Elf64_Off)first * sizeof(p[0])), size))
			return TDAX_PROGRAM_UNKNOWN;
		for (unsigned i = 0; i < n; i++)
			if (p[i].p_type == PT_INTERP)
				return TDAX_PROGRAM_LIBC;
	}
	return TDAX_PROGRAM_STATIC;
}

/* A script's interpreter ("#!/usr/bin/env NAME" looks NAME up) into cmd;
 * *search: whether to look it up in PATH. */
static bool interpreter(int fd, char *cmd, size_t len, bool *search)
{
	char line[256];
	ssize_t n = tdax_sys_pread(fd, line, sizeof(line) - 1, 0);
	if (n < 3 || line[0] != '#' || line[1] != '!')
		return false;
	line[n] = '\0';
	line[strcspn(line, "\n")] = '\0';
	char *save = NULL, *word = strtok_r(line + 2, " \t", &save);
	if (!word)
		return false;
	const char *slash = strrchr(word, '/');
	*search = false;
	if (slash && !strcmp(slash + 1, "env")) {
		while ((word = strtok_r(NULL, " \t", &save)) && word[0] == '-')
			;
		*search = true;
	}
	return word && join(cmd, len, "", 0, word);
}

enum tdax_program_kind tdax_program_kind(const char *cmd, bool search, char *path, size_t len)
{
	char name[PATH_MAX];
	if (!join(name, sizeof(name), "", 0, cmd))
		return TDAX_PROGRAM_UNKNOWN;
	for (int depth = 0; depth < 2; depth++) {
		if (resolve(name, search, path, len) != 0)
			return TDAX_PROGRAM_UNKNOWN;
		int fd = tdax_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
		struct stat st;
		if (fd < 0 || tdax_sys_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
			if (fd >= 0)
				tdax_sys_close(fd);
			return TDAX_PROGRAM_UNKNOWN;
		}
		bool script = interpreter(fd, name, sizeof(name), &search);
		enum tdax_program_kind kind = script ? TDAX_PROGRAM_UNKNOWN : elf_kind(fd, st.st_size);
		tdax_sys_close(fd);
		if (!script)
			return kind;
	}
	return TDAX_PROGRAM_UNKNOWN;
}

/* Go's linker names its build ID note "Go" (with its NUL: 3 or 4 bytes,
 * padded to 4). */
#define GO_NOTE_BUILDID 4

bool tdax_program_go_notes(const void *notes, size_t len)
{
	const uint8_t *p = notes;
	size_t left = len;
	while (left >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr n;
		memcpy(&n, p, sizeof(n));
		size_t name = ((size_t)n.n_namesz + 3) & ~(size_t)3, desc = ((size_t)n.n_descsz + 3) & ~(size_t)3;
		left -= sizeof(n);
		p += sizeof(n);
		if (name > left || desc > left - name)
			return false;
		if (n.n_type == GO_NOTE_BUILDID && (n.n_namesz == 3 || n.n_namesz == 4) && !memcmp(p, "Go", 3))
			return true;
		left -= name + desc;
		p += name + desc;
	}
	return false;
}

/* Each site's function body (or its start), where in it the bytes to
 * rewrite begin, and how many. */
static const struct {
	uint8_t body[20];
	size_t n, at, len;
} go_sites[TDAX_GO_SITES] = {
	/* Syscall6: MOVQ SI, R10; MOVQ DI, DX; MOVQ CX, SI; MOVQ BX, DI;
	 * SYSCALL; CMPQ AX, $-4095 -- the last move and the SYSCALL. */
	[TDAX_GO_SYSCALL6] = { { 0x49, 0x89, 0xf2, 0x48, 0x89, 0xfa, 0x48, 0x89, 0xce, 0x48, 0x89, 0xdf, 0x0f,
				 0x05, 0x48, 0x3d, 0x01, 0xf0, 0xff, 0xff },
			       20, 9, 5 },
	/* runtime.exit: MOVL code+0(FP), DI; MOVL $SYS_exit_group, AX;
	 * SYSCALL; RET -- the number's move and the SYSCALL. */
	[TDAX_GO_EXIT] = { { 0x8b, 0x7c, 0x24, 0x08, 0xb8, 0xe7, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xc3 }, 12, 4, 7 },
};

long tdax_program_go_site(const void *text, size_t len, enum tdax_go_site which, int *found)
{
	const uint8_t *t = text, *first = NULL;
	*found = 0;
	for (const uint8_t *at = t; (size_t)(at - t) < len; at++) {
		at = memmem(at, len - (size_t)(at - t), go_sites[which].body, go_sites[which].n);
		if (!at)
			break;
		first = first ? first : at;
		++*found;
	}
	return *found == 1 ? (long)(first - t + go_sites[which].at) : -1;
}

size_t tdax_program_go_site_len(enum tdax_go_site which)
{
	return go_sites[which].len;
}

bool tdax_program_go_rewritable(const char *path)
{
	int fd = tdax_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	struct stat st;
	if (fd < 0 || tdax_sys_fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		if (fd >= 0)
			tdax_sys_close(fd);
		return false;
	}
	size_t size = (size_t)st.st_size;
	const uint8_t *m = tdax_sys_mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	tdax_sys_close(fd);
	if (m == MAP_FAILED)
		return false;
	const Elf64_Ehdr *h = (const Elf64_Ehdr *)m;
	bool dynamic = false;
	int sites[TDAX_GO_SITES] = { 0 };
	if (!memcmp(h->e_ident, ELFMAG, SELFMAG) && h->e_ident[EI_CLASS] == ELFCLASS64 &&
	    h->e_phentsize == sizeof(Elf64_Phdr) && h->e_phoff < size &&
	    h->e_phnum <= (size - h->e_phoff) / sizeof(Elf64_Phdr)) {
		const Elf64_Phdr *p = (const Elf64_Phdr *)(m + h->e_phoff);
		for (unsigned i = 0; i < h->e_phnum; i++) {
			dynamic |= p[i].p_type == PT_INTERP;
			if (p[i].p_type == PT_LOAD && (p[i].p_flags & PF_X) && p[i].p_offset < size &&
			    p[i].p_filesz <= size - p[i].p_offset) {
				for (int w = 0; w < TDAX_GO_SITES; w++) {
					int n;
					tdax_program_go_site(m + p[i].p_offset, p[i].p_filesz, w, &n);
					sites[w] += n;
				}
			}
		}
	}
	tdax_sys_munmap((void *)m, size);
	return dynamic && sites[TDAX_GO_SYSCALL6] == 1 && sites[TDAX_GO_EXIT] == 1;
}

bool tdax_preload_without_tdax(const char *list, char *out, size_t len)
{
	static const char lib[] = "libtdax.so";
	size_t at = 0;
	out[0] = '\0';
	for (const char *w = list ? list : ""; *w;) {
		size_t n = strcspn(w, " :");
		const char *base = w + n;
		while (base > w && base[-1] != '/')
			base--;
		bool tdax = (size_t)(w + n - base) == sizeof(lib) - 1 && !memcmp(base, lib, sizeof(lib) - 1);
		if (n && !tdax) {
			if (at + (at ? 1 : 0) + n + 1 > len) {
				out[0] = '\0';
				return false;
			}
			if (at)
				out[at++] = ' ';
			memcpy(out + at, w, n);
			out[at += n] = '\0';
		}
		w += n + (w[n] ? 1 : 0);
	}
	return true;
}
