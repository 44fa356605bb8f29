/* test_program -- what core/program.h reads of a loaded object: Go's build
 * ID among its ELF notes, as Go's linker writes it (name "Go" with its NUL
 * in 4 bytes, type 4) and as a bare 3-byte name; other owners and types
 * are not it, and a note that runs past its segment is never read beyond
 * the segment (the sanitized build checks the reads). */
#include "harness.h"

#include <elf.h>
#include <string.h>

#include "core/program.h"

/* A note into buf at *at: header, name padded to 4, desc padded to 4. */
static void note(uint8_t *buf, size_t *at, const char *name, uint32_t namesz, uint32_t type, uint32_t descsz)
{
	Elf64_Nhdr n = { .n_namesz = namesz, .n_descsz = descsz, .n_type = type };
	memcpy(buf + *at, &n, sizeof(n));
	*at += sizeof(n);
	memcpy(buf + *at, name, namesz);
	*at += (namesz + 3) & ~3u;
	memset(buf + *at, 0x5a, descsz);
	*at += (descsz + 3) & ~3u;
}

TEST(go_build_id_after_a_gnu_one_is_found)
{
	uint8_t buf[256] = { 0 };
	size_t n = 0;
	note(buf, &n, "GNU", 4, NT_GNU_BUILD_ID, 20);
	note(buf, &n, "Go\0", 4, 4, 83); /* as readelf shows a c-shared library's */
	CHECK(tdax_program_go_notes(buf, n));
	n = 0;
	note(buf, &n, "Go", 3, 4, 8);
	CHECK(tdax_program_go_notes(buf, n));
}

TEST(other_owners_and_types_are_not_go)
{
	uint8_t buf[256] = { 0 };
	size_t n = 0;
	note(buf, &n, "GNU", 4, NT_GNU_BUILD_ID, 20);
	note(buf, &n, "Go\0", 4, 1, 8);  /* Go's, not its build ID */
	note(buf, &n, "Gox", 4, 4, 8);   /* not Go's */
	note(buf, &n, "G", 2, 4, 8);
	CHECK(!tdax_program_go_notes(buf, n));
	CHECK(!tdax_program_go_notes(buf, 0));
	CHECK(!tdax_program_go_notes(buf, sizeof(Elf64_Nhdr) - 1));
}

TEST(a_note_past_its_segment_is_not_read)
{
	/* Exactly as long as the notes: a name or desc size beyond the end
	 * stops the walk (ASan would see a read past the heap block). */
	uint8_t tmp[64] = { 0 };
	size_t n = 0;
	note(tmp, &n, "Go\0", 4, 4, 8);
	uint8_t *seg = malloc(n);
	CHECK(seg);
	memcpy(seg, tmp, n);
	Elf64_Nhdr h;
	memcpy(&h, seg, sizeof(h));
	h.n_descsz = 0xfffffff0u; /* the desc runs past the end */
	memcpy(seg, &h, sizeof(h));
	bool found = tdax_program_go_notes(seg, n);
	h.n_descsz = 8, h.n_namesz = 0xfffffffcu; /* so does the name */
	memcpy(seg, &h, sizeof(h));
	bool named = tdax_program_go_notes(seg, n);
	CHECK(!tdax_program_go_notes(seg, n - 1)); /* the segment cut inside the desc */
	free(seg);
	CHECK(!found && !named);
}
