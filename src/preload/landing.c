/*
 * landing -- where a write at the file position lands, known without
 * asking the kernel (landing.h: why each check is there).
 */
#define _GNU_SOURCE
#include "preload/landing.h"

#include <stdlib.h>

#include "core/testaid.h"
#include "preload/lease.h"
#include "preload/state.h"

struct tdax_landing *tdax_landings;

/* end_plus1 of a file whose place a write is finding out: not known yet,
 * and any forget meanwhile (a change in flight) keeps it from becoming so. */
#define PENDING UINT64_MAX

/* Calls that change a file other than by a write: begun, finished. */
static _Atomic uint64_t resizes_begun, resizes_done;

#ifdef TDAX_TEST_BUILD
bool tdax_landing_blind;
#endif

bool tdax_landing_init(uint32_t max_files)
{
#ifdef TDAX_TEST_BUILD
	const char *blind = TDAX_TEST_ENV("LANDING_BLIND");
	tdax_landing_blind = blind && blind[0] == '1';
#endif
	tdax_landings = calloc(max_files, sizeof(*tdax_landings));
	return tdax_landings != NULL;
}

static void count(_Atomic uint64_t *c)
{
#ifdef TDAX_TEST_BUILD
	if (tdax_landing_blind)
		return;
#endif
	atomic_fetch_add(c, 1);
}

void tdax_landing_resize_begin(void)
{
	count(&resizes_begun);
}

void tdax_landing_resize_end(void)
{
	count(&resizes_done);
}

/* The lease still held, granted no other time, no resize begun since l. */
static bool nothing_since(const struct tdax_fd *e, const struct tdax_landing_look *l)
{
	return atomic_load(&e->lease) == TDAX_LEASE_HELD && atomic_load(&tdax_lease_grants) == l->grants &&
	       atomic_load(&resizes_begun) == l->resizes;
}

/* Nothing but this write (its in-flight count taken) changing the file:
 * no other tdax write, cold write or resize on its way. */
static bool only_this_write(const struct tdax_file_rt *rt)
{
	return atomic_load(&rt->inflight) == 1 && atomic_load(&rt->cold_started) == atomic_load(&rt->cold_done) &&
	       atomic_load(&resizes_begun) == atomic_load(&resizes_done);
}

/* Descriptors looked through for one of the file's in unregistered mode
 * before a place becomes known; a process with more goes without. */
#define SCAN_MAX 1024

/* Every descriptor of the file in this process is one of its entry's: a
 * duplicate still in unregistered mode (its file registered through
 * another descriptor meanwhile) writes with no in-flight count to see,
 * and says so only after its write (unregistered.c). */
static bool only_entry_descriptors(const struct tdax_fd *e)
{
	if (tdax_fd_hiwater() >= SCAN_MAX)
		return false;
	for (int i = tdax_fd_naming(e->dev, e->ino, 0); i >= 0; i = tdax_fd_naming(e->dev, e->ino, i + 1))
		if (__atomic_load_n(&tdax_fds[i].mode, __ATOMIC_ACQUIRE) != e->mode ||
		    __atomic_load_n(&tdax_fds[i].file_plus1, __ATOMIC_ACQUIRE) != e->file_plus1)
			return false;
	return true;
}

void tdax_landing_streamed(int fd)
{
	const struct tdax_fd *e = tdax_fd_get(fd);
	if (!e || e->file_plus1 == TDAX_FD_UNREGISTERED || !tdax_landings)
		return;
	atomic_store(&tdax_landings[e->file_plus1 - 1].streamed, e->gen + 1);
	tdax_landing_forget(e->file_plus1 - 1);
}

void tdax_landing_look(int fd, const struct tdax_fd *e, const struct tdax_file_rt *rt, bool at_end,
		       struct tdax_landing_look *l)
{
	struct tdax_landing *k = &tdax_landings[e->file_plus1 - 1];
	l->at_end = at_end;
	/* The lease first: a grant counts before its state says held, so
	 * the count read after this look is that lease's. (Never in the
	 * supervisor of --intercept syscall: the program's own reads, seeks
	 * and copies of a descriptor it placed reach the kernel untrapped.) */
	l->held = !tdax_rt.supervisor && tdax_lease_sole(fd, e, rt);
	l->grants = atomic_load(&tdax_lease_grants);
	l->resizes = atomic_load(&resizes_begun);
	l->end_plus1 = atomic_load(&k->end_plus1);
	l->seen = atomic_load(&rt->size_seen);
	l->quiet = only_this_write(rt);
	l->covered = atomic_load(&rt->uncovered) == 0;
	if (l->held && l->end_plus1 && l->end_plus1 != PENDING && k->gen == e->gen && k->at_end == at_end &&
	    k->grants == l->grants && k->resizes == l->resizes)
		return; /* known */
	l->end_plus1 = 0;
	if (k->gen != e->gen)
		k->unused = 0; /* (another file's count) */
	if (!l->held || !l->quiet || (!at_end && atomic_load(&k->streamed) == e->gen + 1) ||
	    (k->unused > 4 && (k->unused++ & 15))) {
		/* A write at the position all the same, which will not move
		 * the place on. */
		tdax_landing_forget(e->file_plus1 - 1);
		return;
	}
	/* Find it out: pending from now, so that any change that begins
	 * after this store forgets it; one begun before is in flight (or
	 * done, before this write). */
	atomic_store(&k->end_plus1, PENDING);
	if (!only_this_write(rt) || !only_entry_descriptors(e)) {
		uint64_t pending = PENDING;
		atomic_compare_exchange_strong(&k->end_plus1, &pending, 0);
		return;
	}
	k->unused++;
	k->gen = e->gen;
	k->at_end = at_end;
	k->grants = l->grants;
	k->resizes = l->resizes;
}

int64_t tdax_landing_next(const struct tdax_fd *e, const struct tdax_landing_look *l, size_t r)
{
	if (!l->end_plus1)
		return -1;
	if (!nothing_since(e, l)) {
		tdax_landing_forget(e->file_plus1 - 1);
		return -1;
	}
	uint64_t was = l->end_plus1;
	struct tdax_landing *k = &tdax_landings[e->file_plus1 - 1];
	if (!atomic_compare_exchange_strong(&k->end_plus1, &was, was + r))
		return -1; /* forgotten meanwhile: a change on its way */
	k->unused = 0;
	tdax_count(TDAX_ST_KNOWN_LANDINGS, 1);
	return (int64_t)(was - 1 + r);
}

bool tdax_landing_learned(const struct tdax_fd *e, const struct tdax_file_rt *rt,
			  const struct tdax_landing_look *l, uint64_t end, size_t r, bool alone)
{
	uint64_t pending = PENDING;
	_Atomic uint64_t *k = &tdax_landings[e->file_plus1 - 1].end_plus1;
	if (l->held)
		atomic_compare_exchange_strong(k, &pending, alone && nothing_since(e, l) ? end + 1 : 0);
	return !(l->at_end && l->covered && l->quiet && alone && only_this_write(rt) &&
		 atomic_load(&resizes_begun) == l->resizes && end - r != l->seen);
}
