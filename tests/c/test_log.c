/* test_log -- append, scan, release, reclaim, space, concurrency, damage. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/files.h"
#include "core/log.h"

/* Register a scratch file on the disk; returns its entry index. */
static void fill(char *buf, uint32_t n, uint64_t tag)
{
	for (uint32_t k = 0; k < n; k++)
		buf[k] = (char)((tag * 31 + k * 7) & 0xff);
}

/* Scan collector: every valid record, plus damage counts. */
#define MAXR (1u << 22)
struct seen {
	struct tdax_device *dev;
	uint64_t n, corrupt, torn, live, bad_data;
	uint8_t *has; /* by seq */
};

static int on_rec(void *ctx, const struct tdax_rec *r)
{
	struct seen *s = ctx;
	char buf[70000];
	fill(buf, r->len, r->off);
	s->n++;
	s->live += tdax_rec_live(s->dev, r);
	if (memcmp(buf, r + 1, r->len) != 0)
		s->bad_data++;
	if (r->seq < MAXR)
		s->has[r->seq] = 1;
	return 0;
}

static void on_bad(void *ctx, uint32_t seg, uint64_t pos, enum tdax_rec_damage what,
		   const struct tdax_rec *r)
{
	(void)seg, (void)pos, (void)r;
	struct seen *s = ctx;
	if (what == TDAX_REC_CORRUPT)
		s->corrupt++;
	else
		s->torn++;
}

/* exact: as on the same boot (log.h), only the segments in use, to their tails. */
static void scan_as(struct tdax_device *dev, struct seen *s, bool exact)
{
	static uint8_t has[MAXR];
	memset(has, 0, sizeof(has));
	*s = (struct seen){ .dev = dev, .has = has };
	tdax_log_scan(dev, &(struct tdax_scan_cb){ on_rec, on_bad, s, exact });
}

static void scan(struct tdax_device *dev, struct seen *s)
{
	scan_as(dev, s, false);
}

/* Append one record whose data is derived from its offset. */
static int put(struct tdax_device *dev, uint32_t f, uint32_t g, uint64_t off, uint32_t len,
	       uint64_t *seq)
{
	static __thread char buf[70000];
	fill(buf, len, off);
	return tdax_log_append(dev, f, g, off, buf, len, seq);
}

TEST(append_then_scan_returns_every_record_intact)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	uint32_t g, f = tdax_test_new_file(dev, "a", &g);
	uint64_t last = 0, seq;
	uint32_t sizes[] = { 1, 63, 64, 65, 128, 4096, 65536 };
	for (int i = 0; i < 7; i++) {
		CHECK(put(dev, f, g, (uint64_t)i * 100000, sizes[i], &seq) == 0);
		CHECK(seq > last);
		last = seq;
	}
	struct seen s;
	scan(dev, &s);
	CHECK(s.n == 7 && s.live == 7 && s.bad_data == 0 && s.corrupt == 0 && s.torn == 0);
	tdax_device_close(dev);
}

TEST(release_kills_records_and_reuses_space)
{
	struct tdax_device *dev = tdax_test_new_device(16 << 20, 256 << 10);
	CHECK(dev);
	uint32_t g, f = tdax_test_new_file(dev, "b", &g);
	uint64_t seq = 0;
	for (int i = 0; i < 100; i++)
		CHECK(put(dev, f, g, (uint64_t)i * 4096, 4096, &seq) == 0);
	struct tdax_log_usage u1, u2;
	tdax_log_usage(dev, &u1);
	CHECK(u1.used >= 100 * 4096);
	tdax_log_release(dev, f, g, seq - 10); /* all but the last 10 */
	struct seen s;
	scan(dev, &s);
	CHECK(s.live == 10);
	tdax_log_release(dev, f, g, seq);
	scan(dev, &s);
	CHECK(s.live == 0);
	tdax_log_usage(dev, &u2);
	CHECK(u2.segs_sealed == 0); /* every sealed segment was reclaimed */
	/* The owner's own segment starts over at its next append. */
	CHECK(put(dev, f, g, 0, 100, &seq) == 0);
	tdax_log_usage(dev, &u2);
	CHECK(u2.used == tdax_rec_size(100));
	tdax_device_close(dev);
}

TEST(releases_in_a_row_scan_once_and_leave_the_rest_due)
{
	struct tdax_device *dev = tdax_test_new_device(16 << 20, 256 << 10);
	CHECK(dev);
	uint32_t ga, gb, a = tdax_test_new_file(dev, "ra", &ga), b = tdax_test_new_file(dev, "rb", &gb);
	uint64_t seq = 0;
	for (int i = 0; i < 60; i++)
		CHECK(put(dev, a, ga, (uint64_t)i * 4096, 4096, &seq) == 0);
	for (int i = 0; i < 60; i++) /* b's fill segments of their own, sealed as they fill */
		CHECK(put(dev, b, gb, (uint64_t)i * 4096, 4096, &seq) == 0);
	usleep(11000); /* the last scan (another test's) is over 10 ms old */
	struct tdax_log_usage u;
	tdax_log_release(dev, a, ga, atomic_load(dev->seq)); /* scans: a's segments go */
	tdax_log_release(dev, b, gb, atomic_load(dev->seq)); /* within 10 ms: due */
	tdax_log_reclaim_due(dev);
	tdax_log_usage(dev, &u);
	CHECK(u.segs_sealed == 0);
	tdax_log_reclaim_due(dev); /* nothing due: nothing to do */
	tdax_device_close(dev);
}

TEST(full_log_fails_cleanly_then_recovers_after_release)
{
	struct tdax_device *dev = tdax_test_new_device(8 << 20, 1 << 20);
	CHECK(dev);
	uint32_t g, f = tdax_test_new_file(dev, "c", &g);
	uint64_t seq = 0, ok = 0;
	int rc;
	while ((rc = put(dev, f, g, 0, 60000, &seq)) == 0)
		ok++;
	CHECK(rc == -ENOSPC);
	CHECK(ok > 50);
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	CHECK(u.segs_free == 0);
	struct seen s;
	scan(dev, &s);
	CHECK(s.live == ok && s.corrupt == 0);
	CHECK(put(dev, f, g, 0, 60000, &seq) == -ENOSPC); /* still full, still clean */
	tdax_log_release(dev, f, g, atomic_load(dev->seq));
	CHECK(put(dev, f, g, 0, 60000, &seq) == 0);
	CHECK(tdax_log_append(dev, f, g, 0, "", tdax_log_max_len(dev) + 1, &seq) == -EFBIG);
	tdax_device_close(dev);
}

TEST(one_segment_serves_at_most_its_slots_of_files)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	uint64_t seq;
	for (int i = 0; i < 3 * TDAX_SEG_SLOTS; i++) {
		char name[16];
		snprintf(name, sizeof(name), "m%d", i);
		uint32_t g, f = tdax_test_new_file(dev, name, &g);
		CHECK(put(dev, f, g, 0, 64, &seq) == 0);
	}
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	CHECK(u.segs_sealed == 2 && u.segs_owned == 1);
	struct seen s;
	scan(dev, &s);
	CHECK(s.live == 3 * TDAX_SEG_SLOTS);
	tdax_device_close(dev);
}

struct worker {
	struct tdax_device *dev;
	uint32_t f, g;
	int n;
	uint64_t seqs[2000];
};

static void *thread_main(void *p)
{
	struct worker *w = p;
	char buf[512];
	for (int i = 0; i < w->n; i++) {
		memset(buf, (int)(w->f + i), sizeof(buf));
		if (tdax_log_append(w->dev, w->f, w->g, (uint64_t)i * 512, buf, 512, &w->seqs[i]))
			w->seqs[i] = 0;
	}
	return NULL;
}

static int count_rec(void *ctx, const struct tdax_rec *r)
{
	(void)r;
	++*(uint64_t *)ctx;
	return 0;
}

TEST(concurrent_threads_append_without_losing_or_sharing_sequence_numbers)
{
	struct tdax_device *dev = tdax_test_new_device(64 << 20, 0);
	CHECK(dev);
	enum { T = 8 };
	static struct worker w[T];
	pthread_t th[T];
	for (int t = 0; t < T; t++) {
		char name[16];
		snprintf(name, sizeof(name), "t%d", t);
		w[t] = (struct worker){ .dev = dev, .n = 2000 };
		w[t].f = tdax_test_new_file(dev, name, &w[t].g);
		CHECK(pthread_create(&th[t], NULL, thread_main, &w[t]) == 0);
	}
	for (int t = 0; t < T; t++)
		pthread_join(th[t], NULL);
	static uint8_t used[T * 2000 + 1];
	memset(used, 0, sizeof(used));
	for (int t = 0; t < T; t++)
		for (int i = 0; i < 2000; i++) {
			uint64_t q = w[t].seqs[i];
			CHECK(q >= 1 && q <= T * 2000 && !used[q]);
			used[q] = 1;
		}
	uint64_t n = 0;
	tdax_log_scan(dev, &(struct tdax_scan_cb){ count_rec, NULL, &n, false });
	CHECK(n == T * 2000);
	n = 0;
	tdax_log_scan(dev, &(struct tdax_scan_cb){ count_rec, NULL, &n, true });
	CHECK(n == T * 2000);
	tdax_device_close(dev);
}

/* Children append as fast as they can and report each acknowledged
 * sequence number on a pipe; the parent kills them at random instants.
 * Every acknowledged record must be found intact afterwards, and the torn
 * tails (at most one per killed writer) hide nothing. */
TEST(sigkilled_writer_processes_lose_nothing_acknowledged)
{
	struct tdax_device *dev = tdax_test_new_device(128 << 20, 256 << 10);
	CHECK(dev);
	srand((unsigned)time(NULL));
	for (int round = 0; round < 5; round++) {
		enum { P = 4 };
		int fds[2];
		CHECK(pipe(fds) == 0);
		pid_t pids[P];
		uint32_t files[P], gens[P];
		for (int p = 0; p < P; p++) {
			char name[32];
			snprintf(name, sizeof(name), "p%d-%d", round, p);
			files[p] = tdax_test_new_file(dev, name, &gens[p]);
			pids[p] = fork();
			if (pids[p] == 0) {
				close(fds[0]);
				for (uint64_t i = 0;; i++) {
					uint64_t seq;
					uint64_t msg[2] = { 0, (uint64_t)p };
					if (put(dev, files[p], gens[p], i * 1000, 100 + (uint32_t)(i % 300),
						&seq) == 0 &&
					    (msg[0] = seq, write(fds[1], msg, sizeof(msg)) != sizeof(msg)))
						_exit(1);
				}
			}
		}
		close(fds[1]);
		/* Every writer holds a segment (has acknowledged a record) before
		 * the kill, however slow the machine. */
		uint64_t msg[2], *early = NULL;
		size_t nearly = 0, cap = 0;
		unsigned seen_mask = 0;
		while (seen_mask != (1u << P) - 1 && read(fds[0], msg, sizeof(msg)) == sizeof(msg)) {
			if (nearly == cap) {
				cap = cap ? 2 * cap : 1024;
				early = realloc(early, cap * sizeof(*early));
				CHECK(early);
			}
			early[nearly++] = msg[0];
			seen_mask |= 1u << msg[1];
		}
		CHECK(seen_mask == (1u << P) - 1);
		usleep(10000 + (useconds_t)(rand() % 40000));
		for (int p = 0; p < P; p++)
			kill(pids[p], SIGKILL);
		for (int p = 0; p < P; p++)
			waitpid(pids[p], NULL, 0);
		CHECK(tdax_log_seal_dead(dev) == P);
		while (read(fds[0], msg, sizeof(msg)) == sizeof(msg)) {
			if (nearly == cap) {
				cap *= 2;
				early = realloc(early, cap * sizeof(*early));
				CHECK(early);
			}
			early[nearly++] = msg[0];
		}
		close(fds[0]);
		CHECK(nearly > 0);
		/* Found by a scan of the whole log, and by one that reads the
		 * segments in use to their tails only (the same boot's). */
		for (int exact = 0; exact < 2; exact++) {
			struct seen s;
			scan_as(dev, &s, exact);
			uint64_t missing = 0;
			for (size_t i = 0; i < nearly; i++)
				missing += early[i] >= MAXR || !s.has[early[i]];
			CHECK(missing == 0);
			CHECK(s.corrupt == 0 && s.bad_data == 0 && s.torn <= P);
		}
		free(early);
		/* Releases in a row scan once (log.h): the rest is due at the
		 * write-back's next pass. */
		for (int p = 0; p < P; p++)
			tdax_log_release(dev, files[p], gens[p], atomic_load(dev->seq));
		tdax_log_reclaim_due(dev);
		struct tdax_log_usage u;
		tdax_log_usage(dev, &u);
		CHECK(u.segs_sealed == 0 && u.segs_owned == 0);
	}
	tdax_device_close(dev);
}

static int first_seg(void *ctx, const struct tdax_rec *r)
{
	*(uint32_t *)ctx = r->seg;
	return 1;
}

/* The record area of the (only) segment holding records, to damage it. */
static char *rec_area(struct tdax_device *dev)
{
	uint32_t seg = 0;
	tdax_log_scan(dev, &(struct tdax_scan_cb){ first_seg, NULL, &seg, false });
	return (char *)tdax_seg_at(dev, seg) + TDAX_SEG_HEADER_SIZE;
}

/* Ten 200-byte records of one file in segment 0; returns the device. */
static struct tdax_device *ten_records(uint64_t *size_each)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	if (!dev)
		return NULL;
	uint32_t g, f = tdax_test_new_file(dev, "d", &g);
	uint64_t seq;
	for (int i = 0; i < 10; i++)
		put(dev, f, g, (uint64_t)i * 200, 200, &seq);
	*size_each = tdax_rec_size(200);
	return dev;
}

TEST(flipped_bit_in_data_skips_only_that_record)
{
	uint64_t sz;
	struct tdax_device *dev = ten_records(&sz);
	CHECK(dev);
	rec_area(dev)[4 * sz + sizeof(struct tdax_rec) + 17] ^= 0x10;
	struct seen s;
	scan(dev, &s);
	CHECK(s.n == 9 && s.corrupt == 1 && s.torn == 0 && s.bad_data == 0);
	tdax_device_close(dev);
}

TEST(flipped_bit_in_header_skips_only_that_record)
{
	uint64_t sz;
	struct tdax_device *dev = ten_records(&sz);
	CHECK(dev);
	rec_area(dev)[4 * sz + offsetof(struct tdax_rec, len)] ^= 0x01;
	struct seen s;
	scan(dev, &s);
	CHECK(s.n == 9 && s.corrupt == 1 && s.torn == 0);
	tdax_device_close(dev);
}

TEST(zeroed_page_skips_only_the_records_in_it)
{
	uint64_t sz;
	struct tdax_device *dev = ten_records(&sz);
	CHECK(dev);
	memset(rec_area(dev) + 2 * sz, 0, 2 * sz); /* records 2 and 3 */
	struct seen s;
	scan(dev, &s);
	CHECK(s.n == 8 && s.corrupt == 1 && s.torn == 0);
	tdax_device_close(dev);
}

TEST(record_cut_mid_write_is_a_torn_tail)
{
	uint64_t sz;
	struct tdax_device *dev = ten_records(&sz);
	CHECK(dev);
	memset(rec_area(dev) + 9 * sz + 100, 0, sz - 100); /* second half of the last */
	struct seen s;
	scan(dev, &s);
	CHECK(s.n == 9 && s.torn == 1 && s.corrupt == 0);
	tdax_device_close(dev);
}

TEST(records_of_an_earlier_epoch_are_never_read_again)
{
	uint64_t sz;
	struct tdax_device *dev = ten_records(&sz);
	CHECK(dev);
	struct tdax_rec *r = (struct tdax_rec *)rec_area(dev);
	tdax_log_release(dev, r->file, r->fgen, atomic_load(dev->seq));
	uint64_t seq;
	CHECK(put(dev, r->file, r->fgen, 0, 100, &seq) == 0); /* segment reset, 1 new record */
	tdax_file_at(dev, r->file)->released_seq = 0;         /* make old records "live" */
	struct seen s;
	scan(dev, &s);
	CHECK(s.n == 1 && s.corrupt == 0);
	tdax_device_close(dev);
}

/* A free segment's header is not trusted when it is claimed: a forged tail
 * sent the record copy out of the mapping (SIGSEGV), a forged slot count
 * wrote the slot over the records. */
TEST(forged_free_segment_header_is_emptied_when_claimed)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	uint32_t g, f = tdax_test_new_file(dev, "forged-free", &g);
	for (uint32_t i = 0; i < dev->sb->nsegs; i++) {
		struct tdax_seg *s = tdax_seg_at(dev, i);
		atomic_store(&s->tail, UINT64_MAX - 63);
		s->nslots = 4000;
		s->written = UINT64_MAX;
	}
	uint64_t seq;
	CHECK(put(dev, f, g, 0, 300, &seq) == 0);
	struct seen sn;
	scan(dev, &sn);
	CHECK(sn.n == 1 && sn.bad_data == 0 && sn.has[seq]);
	uint32_t seg = 0;
	tdax_log_scan(dev, &(struct tdax_scan_cb){ first_seg, NULL, &seg, false });
	const struct tdax_seg *s = tdax_seg_at(dev, seg);
	CHECK(s->nslots == 1 && s->slot[0].file == f && atomic_load(&s->tail) == tdax_rec_size(300));
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	CHECK(u.used <= u.capacity);
	tdax_device_close(dev);
}

/* The segment being appended to is rewritten behind its owner's back: the
 * owner keeps appending inside its segment, with its own tail and slots. */
TEST(owned_segment_header_changed_under_the_writer_is_not_followed)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	uint32_t g, f = tdax_test_new_file(dev, "forged-owned", &g);
	uint64_t seq;
	CHECK(put(dev, f, g, 0, 100, &seq) == 0);
	uint32_t seg = 0;
	tdax_log_scan(dev, &(struct tdax_scan_cb){ first_seg, NULL, &seg, false });
	struct tdax_seg *s = tdax_seg_at(dev, seg);
	atomic_store(&s->tail, UINT64_MAX - 63);
	s->nslots = 4000;
	CHECK(put(dev, f, g, 100, 100, &seq) == 0);
	struct seen sn;
	scan(dev, &sn);
	CHECK(sn.n == 2 && sn.bad_data == 0 && sn.has[seq]);
	CHECK(atomic_load(&s->tail) == 2 * (uint64_t)tdax_rec_size(100));
	tdax_device_close(dev);
}

static bool area_has(const char *p, size_t n, const char *what)
{
	return memmem(p, n, what, strlen(what)) != NULL;
}

/* Released records do not stay readable in the region: a reclaimed
 * segment's record area is zeroed, whatever its owner reset in place. */
TEST(reclaimed_segment_is_wiped)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	uint32_t g, f = tdax_test_new_file(dev, "wiped", &g);
	uint64_t seq;
	static const char secret[] = "correct horse battery staple";
	char buf[4096];
	for (int i = 0; i < 8; i++) {
		memset(buf, 'x', sizeof(buf));
		memcpy(buf + 100, secret, sizeof(secret) - 1);
		CHECK(tdax_log_append(dev, f, g, (uint64_t)i * 4096, buf, sizeof(buf), &seq) == 0);
		if (i == 3) /* released: the owner resets its segment in place */
			tdax_file_release(dev, f, g, seq);
	}
	uint32_t seg = 0;
	tdax_log_scan(dev, &(struct tdax_scan_cb){ first_seg, NULL, &seg, false });
	const char *area = (const char *)tdax_seg_at(dev, seg) + TDAX_SEG_HEADER_SIZE;
	size_t room = dev->sb->seg_size - TDAX_SEG_HEADER_SIZE;
	CHECK(area_has(area, room, secret));
	tdax_log_seal_mine(dev);
	tdax_log_release(dev, f, g, seq);
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	CHECK(u.segs_sealed == 0 && u.segs_owned == 0);
	CHECK(!area_has(area, room, secret));
	CHECK(tdax_seg_at(dev, seg)->written == 0);
	tdax_device_close(dev);
}

/* One record of w's file at w->n * 512, then the thread exits (its
 * segment goes to the process: log.c, orphans). */
static void *append_once(void *p)
{
	struct worker *w = p;
	if (put(w->dev, w->f, w->g, (uint64_t)w->n * 512, 512, &w->seqs[0]))
		w->seqs[0] = 0;
	return NULL;
}

/* Segments whose owner is neither free nor sealed, and sealed ones. */
static void owned_segments(struct tdax_device *dev, uint32_t *owned, uint32_t *sealed)
{
	*owned = *sealed = 0;
	for (uint32_t i = 0; i < dev->sb->nsegs; i++) {
		uint64_t o = atomic_load(&tdax_seg_at(dev, i)->owner);
		*owned += o != TDAX_SEG_FREE && o != TDAX_SEG_SEALED;
		*sealed += o == TDAX_SEG_SEALED;
	}
}

TEST(threads_one_after_another_hand_their_segment_on)
{
	struct tdax_device *dev = tdax_test_new_device(16 << 20, 0);
	CHECK(dev);
	static struct worker w;
	w = (struct worker){ .dev = dev };
	w.f = tdax_test_new_file(dev, "seq", &w.g);
	uint64_t last = 0;
	for (w.n = 0; w.n < 100; w.n++) {
		pthread_t t;
		CHECK(pthread_create(&t, NULL, append_once, &w) == 0 && pthread_join(t, NULL) == 0);
		CHECK(w.seqs[0] > last);
		last = w.seqs[0];
	}
	/* One segment for all of them (it was 100), kept for the process while
	 * it lives: not a dead owner's, so not sealed by the look for them. */
	uint32_t owned, sealed;
	owned_segments(dev, &owned, &sealed);
	CHECK(owned == 1 && sealed == 0);
	CHECK(tdax_log_seal_dead(dev) == 0);
	struct seen s;
	scan_as(dev, &s, true); /* its owner alive: to its tail */
	CHECK(s.n == 100 && s.bad_data == 0 && s.corrupt == 0 && s.torn == 0);
	scan(dev, &s);
	CHECK(s.n == 100 && s.bad_data == 0);
	tdax_log_seal_mine(dev); /* at exit: the orphan is sealed too */
	owned_segments(dev, &owned, &sealed);
	CHECK(owned == 0 && sealed == 1);
	tdax_device_close(dev);
}

/* Spawns w->n threads one after the other, each appending once. */
static void *spawner(void *p)
{
	struct worker *w = p;
	int n = w->n;
	for (int i = 0; i < n; i++) {
		struct worker one = { .dev = w->dev, .f = w->f, .g = w->g, .n = i };
		pthread_t t;
		if (pthread_create(&t, NULL, append_once, &one) != 0 || pthread_join(t, NULL) != 0)
			return NULL;
		w->seqs[i] = one.seqs[0];
	}
	return NULL;
}

TEST(threads_that_come_and_go_at_once_adopt_without_losing_or_sharing)
{
	struct tdax_device *dev = tdax_test_new_device(64 << 20, 0);
	CHECK(dev);
	enum { T = 4, N = 60 };
	static struct worker w[T];
	pthread_t th[T];
	for (int t = 0; t < T; t++) {
		char name[16];
		snprintf(name, sizeof(name), "c%d", t);
		w[t] = (struct worker){ .dev = dev, .n = N };
		w[t].f = tdax_test_new_file(dev, name, &w[t].g);
		CHECK(pthread_create(&th[t], NULL, spawner, &w[t]) == 0);
	}
	for (int t = 0; t < T; t++)
		pthread_join(th[t], NULL);
	static uint8_t used[T * N + 1];
	memset(used, 0, sizeof(used));
	for (int t = 0; t < T; t++)
		for (int i = 0; i < N; i++) {
			uint64_t q = w[t].seqs[i];
			CHECK(q >= 1 && q <= T * N && !used[q]);
			used[q] = 1;
		}
	uint64_t n = 0;
	tdax_log_scan(dev, &(struct tdax_scan_cb){ count_rec, NULL, &n, true });
	CHECK(n == T * N);
	uint32_t owned, sealed;
	owned_segments(dev, &owned, &sealed);
	CHECK(owned <= T); /* (a claim only when no orphan is left: one a line at most) */
	tdax_device_close(dev);
}
