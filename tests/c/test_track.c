/* test_track -- the thesis policy and the adaptive one with a fake clock:
 * the reasoning of chapters 4-5 (and section 7.1) as executable cases. */
#include "harness.h"

#include <string.h>

#include "core/control.h"
#include "core/files.h"
#include "policy/track.h"

#define MS 1000000ull
#define US 1000ull

static const struct tdax_tunables T = TDAX_DEFAULT_TUNABLES;

/* A range and the file-level bookkeeping the runtime does around it. */
struct sim {
	struct tdax_range_track r;
	uint64_t last_sync;
	uint32_t upgrades, downgrades;
	uint64_t first_upgrade_at;
	uint32_t syncs, syncs_at_upgrade;
	bool adaptive;  /* decided on tdax_track_adapt's thresholds */
	uint32_t fill;  /* the log's use in %, for them */
};

/* The tunables the range is decided on at now. */
static const struct tdax_tunables *tun(const struct sim *s, uint64_t now, struct tdax_tunables *own)
{
	if (!s->adaptive)
		return &T;
	tdax_track_adapt(&s->r, &T, now, s->fill, own);
	return own;
}

static void sim_init(struct sim *s)
{
	memset(s, 0, sizeof(*s));
	s->last_sync = UINT64_MAX;
}

/* Carry out marked jobs at once (the worker), counting completed ones. */
static void run_jobs(struct sim *s)
{
	enum tdax_decision j = tdax_track_job_begin(&s->r);
	tdax_track_job_end(&s->r, j, true);
	s->upgrades += j == TDAX_UPGRADE;
	s->downgrades += j == TDAX_DOWNGRADE;
}

static void wr(struct sim *s, uint64_t now, uint64_t page, uint64_t n)
{
	tdax_track_write(&s->r, &T, now, page, n);
}

static void sync_at(struct sim *s, uint64_t now)
{
	bool stream = s->last_sync != UINT64_MAX && now - s->last_sync <= T.wb_window_ns;
	s->last_sync = now;
	s->syncs++;
	struct tdax_tunables own;
	tdax_track_sync(&s->r, tun(s, now, &own), now, stream);
	run_jobs(s);
	if (s->upgrades == 1 && !s->first_upgrade_at) {
		s->first_upgrade_at = now;
		s->syncs_at_upgrade = s->syncs;
	}
}

static void reeval(struct sim *s, uint64_t now)
{
	struct tdax_tunables own;
	tdax_track_reevaluate(&s->r, tun(s, now, &own), now);
	run_jobs(s);
}

TEST(window_forgets_each_increment_after_its_window)
{
	struct tdax_window w;
	memset(&w, 0, sizeof(w));
	uint64_t W = 800 * MS; /* 8 buckets of 100 ms */
	tdax_window_add(&w, W, 1000 * MS, 3);
	tdax_window_add(&w, W, 1450 * MS, 2);
	CHECK(tdax_window_sum(&w, W, 1500 * MS) == 5);
	CHECK(tdax_window_sum(&w, W, 1799 * MS) == 5);
	CHECK(tdax_window_sum(&w, W, 1800 * MS) == 2); /* the first is a window old */
	CHECK(tdax_window_sum(&w, W, 2300 * MS) == 0);
	/* A bucket reused a window later starts from zero. */
	tdax_window_add(&w, W, 2800 * MS, 1);
	CHECK(tdax_window_sum(&w, W, 2800 * MS) == 1);
}

TEST(write_sync_stream_is_upgraded_within_a_few_syncs)
{
	struct sim s;
	sim_init(&s);
	uint64_t now = 10000 * MS;
	for (int i = 0; i < 1000; i++, now += 100 * US) {
		wr(&s, now, (uint64_t)i / 32, 1); /* 128 B appends */
		sync_at(&s, now + 10 * US);
	}
	CHECK(s.upgrades == 1 && s.downgrades == 0);
	CHECK(s.syncs_at_upgrade <= T.write_threshold + 2);
	CHECK(atomic_load(&s.r.state) == TDAX_R_UPGRADED);
	int m = tdax_track_metric(&s.r, &T, now);
	CHECK(m > (int)T.upgrade_pct);
}

static void slow_sync_stream_is_never_upgraded_under(bool adaptive)
{
	/* 4 KiB writes every 10 ms, a sync every 2 s (longer than the
	 * writeback window): every write is synced, but not as a stream. */
	struct sim s;
	sim_init(&s);
	s.adaptive = adaptive;
	uint64_t now = 10000 * MS;
	for (int i = 0; i < 6000; i++, now += 10 * MS) {
		wr(&s, now, (uint64_t)i % 512, 1);
		if (i % 200 == 199)
			sync_at(&s, now);
		if (i % 10 == 0)
			reeval(&s, now);
	}
	CHECK(s.upgrades == 0 && atomic_load(&s.r.transitions) == 0);
}

TEST(slow_sync_stream_is_never_upgraded)
{
	slow_sync_stream_is_never_upgraded_under(false);
	slow_sync_stream_is_never_upgraded_under(true); /* no steady stream either */
}

static void writes_with_rare_syncs_are_never_upgraded_under(bool adaptive)
{
	/* 128 B appends every ms, a sync every 200 ms: a stream of syncs, but
	 * few of the writes are synced one by one. */
	struct sim s;
	sim_init(&s);
	s.adaptive = adaptive;
	uint64_t now = 10000 * MS;
	for (int i = 0; i < 60000; i++, now += MS) {
		wr(&s, now, (uint64_t)i / 32 % 512, 1);
		if (i % 200 == 199)
			sync_at(&s, now);
	}
	CHECK(s.upgrades == 0);
	int m = tdax_track_metric(&s.r, &T, now);
	CHECK(m >= 0 && m < (int)T.downgrade_pct);
}

TEST(writes_with_rare_syncs_are_never_upgraded)
{
	writes_with_rare_syncs_are_never_upgraded_under(false);
	writes_with_rare_syncs_are_never_upgraded_under(true); /* no steady stream either */
}

TEST(no_decision_below_the_write_threshold)
{
	struct sim s;
	sim_init(&s);
	uint64_t now = 10000 * MS;
	for (uint32_t i = 0; i + 1 < T.write_threshold; i++, now += 100 * US) {
		wr(&s, now, i, 1);
		sync_at(&s, now + 10 * US);
		CHECK(tdax_track_metric(&s.r, &T, now + 10 * US) == -1);
	}
	CHECK(s.upgrades == 0 && atomic_load(&s.r.state) == TDAX_R_NONE);
}

static void rare_sync_bursts_amid_steady_writes_do_not_oscillate_under(bool adaptive)
{
	/* Steady 4 KiB writes; every 10 s a burst of 20 syncs 1 ms apart. */
	struct sim s;
	sim_init(&s);
	s.adaptive = adaptive;
	uint64_t now = 10000 * MS;
	for (int i = 0; i < 120000; i++, now += MS) {
		wr(&s, now, (uint64_t)i % 512, 1);
		if (i % 10000 >= 9980)
			sync_at(&s, now);
		if (i % 100 == 0)
			reeval(&s, now);
	}
	CHECK(atomic_load(&s.r.transitions) == 0);
}

TEST(rare_sync_bursts_amid_steady_writes_do_not_oscillate)
{
	rare_sync_bursts_amid_steady_writes_do_not_oscillate_under(false);
	rare_sync_bursts_amid_steady_writes_do_not_oscillate_under(true); /* no steady stream either */
}

TEST(stopped_stream_is_downgraded_by_reevaluation)
{
	struct sim s;
	sim_init(&s);
	uint64_t now = 10000 * MS;
	for (int i = 0; i < 200; i++, now += 100 * US) {
		wr(&s, now, 0, 1);
		sync_at(&s, now + 10 * US);
	}
	CHECK(atomic_load(&s.r.state) == TDAX_R_UPGRADED);
	/* No more syncs, no more writes: after the windows pass, it goes. */
	for (int i = 0; i < 40; i++, now += 100 * MS)
		reeval(&s, now);
	CHECK(s.downgrades == 1 && atomic_load(&s.r.state) == TDAX_R_NONE);
}

TEST(an_upgraded_range_carries_its_state_into_the_next_one)
{
	/* Policy "adaptive": range 0 of an append stream is upgraded; its state
	 * carried into range 1 marks it for an upgrade with range 0's counts,
	 * so its metric is the stream's and it is not idle at once. */
	struct sim s, next;
	sim_init(&s);
	sim_init(&next);
	uint64_t now = 10000 * MS;
	CHECK(!tdax_track_carry(&s.r, &next.r, &T, now)); /* not upgraded: nothing to carry */
	for (int i = 0; i < 200; i++, now += 100 * US) {
		wr(&s, now, (uint64_t)i / 32, 1);
		sync_at(&s, now + 10 * US);
	}
	CHECK(atomic_load(&s.r.state) == TDAX_R_UPGRADED);
	CHECK(tdax_track_carry(&s.r, &next.r, &T, now));
	CHECK(atomic_load(&next.r.state) == TDAX_R_TO_UPGRADE);
	CHECK(tdax_track_metric(&next.r, &T, now) == tdax_track_metric(&s.r, &T, now));
	CHECK(!tdax_track_carry(&s.r, &next.r, &T, now)); /* once */
	run_jobs(&next);
	CHECK(next.upgrades == 1 && atomic_load(&next.r.state) == TDAX_R_UPGRADED);
	reeval(&next, now + 100 * MS);
	CHECK(atomic_load(&next.r.state) == TDAX_R_UPGRADED); /* not idle: the stream's counts */
	/* The stream never comes: once the counts decay, it is downgraded. */
	for (int i = 0; i < 40; i++, now += 100 * MS)
		reeval(&next, now);
	CHECK(next.downgrades == 1 && atomic_load(&next.r.state) == TDAX_R_NONE);
}

TEST(a_new_file_at_a_removed_ones_name_takes_up_its_stream)
{
	/* Heirs: the first range of a removed file leaves its counts and its
	 * upgrade; the untouched first range of a new file takes them up, the
	 * upgrade at once (nothing to move in a new empty file). */
	struct sim s, heir, touched;
	sim_init(&s);
	sim_init(&heir);
	sim_init(&touched);
	uint64_t now = 10000 * MS;
	for (int i = 0; i < 200; i++, now += 100 * US) {
		wr(&s, now, (uint64_t)i / 32, 1);
		sync_at(&s, now + 10 * US);
	}
	CHECK(atomic_load(&s.r.state) == TDAX_R_UPGRADED);
	struct tdax_track_legacy l;
	tdax_track_bequeath(&s.r, &T, now, &l);
	CHECK(l.upgraded && l.writes == tdax_window_sum(&s.r.wr, T.wr_window_ns, now));
	CHECK(l.syncs > TDAX_TRACK_STEADY && l.syncs == tdax_window_sum(&s.r.sy, T.wb_window_ns, now));
	CHECK(tdax_track_inherit(&heir.r, &l, &T, now));
	CHECK(tdax_window_sum(&heir.r.sy, T.wb_window_ns, now) == l.syncs); /* still a steady stream */
	CHECK(atomic_load(&heir.r.state) == TDAX_R_UPGRADED);
	CHECK(tdax_track_metric(&heir.r, &T, now) == tdax_track_metric(&s.r, &T, now));
	reeval(&heir, now + 100 * MS);
	CHECK(atomic_load(&heir.r.state) == TDAX_R_UPGRADED); /* not idle: the stream's counts */
	/* A range written already is no heir: it keeps what it has. */
	wr(&touched, now, 0, 1);
	CHECK(!tdax_track_inherit(&touched.r, &l, &T, now));
	CHECK(atomic_load(&touched.r.state) == TDAX_R_NONE &&
	      tdax_window_sum(&touched.r.wr, T.wr_window_ns, now) == 1);
	/* A stream that was not upgraded leaves its counts only. */
	struct sim plain, heir2;
	sim_init(&plain);
	sim_init(&heir2);
	wr(&plain, now, 0, 3);
	tdax_track_bequeath(&plain.r, &T, now, &l);
	CHECK(!l.upgraded && l.writes == 3);
	CHECK(!tdax_track_inherit(&heir2.r, &l, &T, now));
	CHECK(atomic_load(&heir2.r.state) == TDAX_R_NONE &&
	      tdax_window_sum(&heir2.r.wr, T.wr_window_ns, now) == 3);
}

/* A rollback journal's transaction (SQLite, in pages of the range): small
 * writes that touch pages 0-2 ten times, a sync, a header write, a sync:
 * 4 pages written back for 10 written (M = 35 with the default windows). */
static void journal_tx(struct sim *s, uint64_t *now)
{
	static const uint64_t w[][2] = { { 0, 1 }, { 0, 1 }, { 0, 2 }, { 1, 1 }, { 1, 1 }, { 1, 2 }, { 2, 1 } };
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		wr(s, *now, w[i][0], w[i][1]);
	sync_at(s, *now += 100 * US);
	wr(s, *now, 0, 1);
	sync_at(s, *now += 100 * US);
	*now += 300 * US;
}

TEST(a_steady_stream_is_upgraded_below_the_thesis_threshold)
{
	struct sim thesis, adaptive;
	sim_init(&thesis);
	sim_init(&adaptive);
	adaptive.adaptive = true;
	uint64_t t1 = 10000 * MS, t2 = t1;
	for (int i = 0; i < 2000; i++) {
		journal_tx(&thesis, &t1);
		journal_tx(&adaptive, &t2);
	}
	int m = tdax_track_metric(&thesis.r, &T, t1);
	CHECK(m > (int)T.downgrade_pct && m < (int)T.upgrade_pct);
	CHECK(thesis.upgrades == 0); /* M < U, for good */
	CHECK(adaptive.upgrades == 1 && adaptive.downgrades == 0);
	CHECK(adaptive.syncs_at_upgrade <= 2 * TDAX_TRACK_STEADY);
	struct tdax_tunables own;
	tdax_track_adapt(&adaptive.r, &T, t2, 0, &own);
	CHECK(own.upgrade_pct < 40 && own.downgrade_pct <= own.upgrade_pct);
	CHECK(own.write_threshold == T.write_threshold && own.wb_window_ns == T.wb_window_ns);
	/* The stream stops: its syncs decay, the thresholds come back, and the
	 * range is downgraded as the thesis would. */
	for (int i = 0; i < 40; i++, t2 += 100 * MS)
		reeval(&adaptive, t2);
	CHECK(adaptive.downgrades == 1 && atomic_load(&adaptive.r.state) == TDAX_R_NONE);
	tdax_track_adapt(&adaptive.r, &T, t2, 0, &own);
	CHECK(own.upgrade_pct == T.upgrade_pct && own.downgrade_pct == T.downgrade_pct);
}

TEST(a_bulk_write_before_a_stream_does_not_hold_its_upgrade_back)
{
	/* PostgreSQL's WAL segment (docs/policy.md): one write of 394 pages,
	 * then the backends rewrite 2 pages and sync, every 0.5 ms. Under the
	 * thesis M stays below U until the bulk write decays or is outweighed
	 * (~290 syncs); a steady stream lowers the threshold. */
	struct sim thesis, adaptive;
	sim_init(&thesis);
	sim_init(&adaptive);
	adaptive.adaptive = true;
	struct sim *both[] = { &thesis, &adaptive };
	for (int k = 0; k < 2; k++) {
		uint64_t now = 10000 * MS;
		wr(both[k], now, 0, 394);
		for (int i = 0; i < 1000 && !both[k]->upgrades; i++, now += 500 * US) {
			wr(both[k], now, 394 + (uint64_t)i / 8 * 2, 2);
			sync_at(both[k], now + 10 * US);
		}
	}
	CHECK(thesis.upgrades == 1 && thesis.syncs_at_upgrade > 200);
	CHECK(adaptive.upgrades == 1 && adaptive.syncs_at_upgrade < 60);
}

TEST(thresholds_rise_as_the_device_fills)
{
	struct tdax_range_track r;
	memset(&r, 0, sizeof(r));
	struct tdax_tunables own;
	uint32_t u[][2] = { { 0, 60 }, { 50, 60 }, { 70, 80 }, { 90, 100 }, { 100, 100 } };
	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
		tdax_track_adapt(&r, &T, 10000 * MS, u[i][0], &own);
		CHECK(own.upgrade_pct == u[i][1] && own.downgrade_pct == T.downgrade_pct);
	}
	/* A steady stream on a full device: nothing new is upgraded. */
	struct sim s;
	sim_init(&s);
	s.adaptive = true;
	s.fill = 95;
	uint64_t now = 10000 * MS;
	for (int i = 0; i < 1000; i++, now += 100 * US) {
		wr(&s, now, (uint64_t)i / 32, 1);
		sync_at(&s, now + 10 * US);
	}
	CHECK(s.upgrades == 0);
}

TEST(reactivity_is_timed_from_the_stream_to_the_job)
{
	struct tdax_range_track r;
	memset(&r, 0, sizeof(r));
	uint64_t now = 10000 * MS, stream_at = 0, last = 0;
	CHECK(tdax_track_reaction(&r, TDAX_UPGRADE, now) == 0); /* no stream seen */
	for (int i = 0; i < 100 && atomic_load(&r.state) == TDAX_R_NONE; i++, now += 100 * US) {
		tdax_track_write(&r, &T, now, 0, 1);
		tdax_track_sync(&r, &T, now + 10 * US, i > 0); /* the first sync begins it */
		if (i == 1)
			stream_at = now + 10 * US;
		last = now + 10 * US;
	}
	CHECK(atomic_load(&r.state) == TDAX_R_TO_UPGRADE && stream_at);
	CHECK(tdax_track_job_begin(&r) == TDAX_UPGRADE);
	tdax_track_job_end(&r, TDAX_UPGRADE, true);
	CHECK(tdax_track_reaction(&r, TDAX_UPGRADE, now + MS) == now + MS - stream_at);
	CHECK(tdax_track_reaction(&r, TDAX_UPGRADE, now + MS) == 0); /* timed once */
	CHECK(tdax_track_reaction(&r, TDAX_DOWNGRADE, now + 2000 * MS) == now + 2000 * MS - last);
	/* A sync that is no stream's ends the one before: the next is timed
	 * from its own first stream sync. */
	tdax_track_job_end(&r, TDAX_DOWNGRADE, true);
	tdax_track_write(&r, &T, now + 5000 * MS, 0, 1);
	tdax_track_sync(&r, &T, now + 5000 * MS, true);
	tdax_track_write(&r, &T, now + 9000 * MS, 0, 1);
	tdax_track_sync(&r, &T, now + 9000 * MS, false);
	tdax_track_write(&r, &T, now + 9001 * MS, 0, 1);
	tdax_track_sync(&r, &T, now + 9001 * MS, true);
	CHECK(tdax_track_reaction(&r, TDAX_UPGRADE, now + 9003 * MS) == 2 * MS);
}

/* n syncs counted at once (bypass mode's lightweight ones, told later)
 * leave the range as n syncs one at a time would: a 128 B append stream
 * that syncs each append writes its tail page back at every sync, so
 * each of them must count that page again -- each sync moves the last
 * page back (the runtime does it at the sync: tdax_tracking_sync_later),
 * the writebacks wait in the range's dirty count. */
TEST(syncs_counted_at_once_count_as_many_one_at_a_time)
{
	struct tdax_range_track one, many;
	memset(&one, 0, sizeof(one));
	memset(&many, 0, sizeof(many));
	uint64_t now = 20000 * MS;
	for (uint32_t i = 0; i < 64; i++, now += 100 * US) {
		uint64_t page = i / 32; /* 32 appends of 128 B a page */
		tdax_track_write(&one, &T, now, page, 1);
		tdax_track_sync(&one, &T, now + 10 * US, true);
		tdax_track_write(&many, &T, now, page, 1);
		atomic_store(&many.last_page, 0); /* the sync, told later */
	}
	tdax_track_syncs(&many, &T, now, true, 64);
	CHECK(tdax_window_sum(&one.wb, T.wb_window_ns, now) == 64);
	CHECK(tdax_window_sum(&many.wb, T.wb_window_ns, now) == 64);
	CHECK(tdax_window_sum(&many.sy, T.wb_window_ns, now) == 64);
	CHECK(tdax_track_metric(&many, &T, now) == tdax_track_metric(&one, &T, now));
	CHECK(atomic_load(&many.state) == atomic_load(&one.state));
	CHECK(atomic_load(&many.state) == TDAX_R_TO_UPGRADE);
}

TEST(the_carry_page_starts_the_last_quarter)
{
	CHECK(tdax_track_carry_page(9) == 384);
	CHECK(tdax_track_carry_page(2) == 3);
	CHECK(tdax_track_carry_page(0) == 0); /* a one-page range: its page */
}

TEST(alternating_phases_transition_once_per_phase)
{
	/* 3 s of a write+sync stream, 3 s of writes only, 10 times: at most
	 * one upgrade and one downgrade per cycle, never more. */
	struct sim s;
	sim_init(&s);
	uint64_t now = 10000 * MS;
	for (int cycle = 0; cycle < 10; cycle++) {
		for (int i = 0; i < 3000; i++, now += MS) {
			wr(&s, now, (uint64_t)i / 32 % 512, 1);
			sync_at(&s, now + 10 * US);
		}
		for (int i = 0; i < 3000; i++, now += MS) {
			wr(&s, now, (uint64_t)i / 32 % 512, 1);
			if (i % 100 == 0)
				reeval(&s, now);
		}
	}
	CHECK(s.upgrades == 10 && s.downgrades == 10);
}

TEST(failed_job_rolls_back_and_is_retried_never_run_twice)
{
	struct tdax_range_track r;
	memset(&r, 0, sizeof(r));
	atomic_store(&r.state, TDAX_R_TO_UPGRADE);
	CHECK(tdax_track_job_begin(&r) == TDAX_UPGRADE);
	CHECK(tdax_track_job_begin(&r) == TDAX_KEEP); /* running: nobody else takes it */
	tdax_track_job_end(&r, TDAX_UPGRADE, false);
	CHECK(atomic_load(&r.state) == TDAX_R_TO_UPGRADE);
	CHECK(tdax_track_job_begin(&r) == TDAX_UPGRADE);
	tdax_track_job_end(&r, TDAX_UPGRADE, true);
	CHECK(atomic_load(&r.state) == TDAX_R_UPGRADED);
	CHECK(tdax_track_force_downgrade(&r));
	CHECK(!tdax_track_force_downgrade(&r)); /* never queued twice */
	CHECK(tdax_track_job_begin(&r) == TDAX_DOWNGRADE);
	tdax_track_job_end(&r, TDAX_DOWNGRADE, false);
	CHECK(atomic_load(&r.state) == TDAX_R_TO_DOWNGRADE);
	CHECK(tdax_range_logged(atomic_load(&r.state))); /* still logged until the checkpoint */
	CHECK(tdax_track_job_begin(&r) == TDAX_DOWNGRADE);
	tdax_track_job_end(&r, TDAX_DOWNGRADE, true);
	CHECK(atomic_load(&r.state) == TDAX_R_NONE && !tdax_range_logged(TDAX_R_NONE));
}

TEST(an_explicit_mapping_pins_its_range_logged_at_once)
{
	struct tdax_range_track r;
	memset(&r, 0, sizeof(r));
	/* Cold, or marked either way: upgraded now, no job left to run. */
	static const uint32_t now_logged[] = { TDAX_R_NONE, TDAX_R_TO_UPGRADE, TDAX_R_TO_DOWNGRADE,
					       TDAX_R_UPGRADED };
	for (size_t i = 0; i < sizeof(now_logged) / sizeof(now_logged[0]); i++) {
		atomic_store(&r.state, now_logged[i]);
		CHECK(tdax_track_pin(&r));
		CHECK(atomic_load(&r.state) == TDAX_R_UPGRADED);
		CHECK(tdax_track_job_begin(&r) == TDAX_KEEP);
	}
	/* A job running: its end decides; the mapping asks again. */
	atomic_store(&r.state, TDAX_R_DOWNGRADING);
	CHECK(!tdax_track_pin(&r));
	CHECK(atomic_load(&r.state) == TDAX_R_DOWNGRADING);
	tdax_track_job_end(&r, TDAX_DOWNGRADE, true);
	CHECK(tdax_track_pin(&r) && tdax_range_logged(atomic_load(&r.state)));
	atomic_store(&r.state, TDAX_R_UPGRADING);
	CHECK(!tdax_track_pin(&r));
	atomic_store(&r.state, 77); /* damaged: left alone */
	CHECK(!tdax_track_pin(&r) && atomic_load(&r.state) == 77);
}

TEST(job_left_running_by_a_dead_worker_is_marked_again)
{
	struct tdax_range_track r;
	memset(&r, 0, sizeof(r));
	static const struct { uint32_t from, to; bool pending; } cases[] = {
		{ TDAX_R_UPGRADING, TDAX_R_TO_UPGRADE, true },
		{ TDAX_R_DOWNGRADING, TDAX_R_TO_DOWNGRADE, true },
		{ TDAX_R_TO_UPGRADE, TDAX_R_TO_UPGRADE, true },
		{ TDAX_R_TO_DOWNGRADE, TDAX_R_TO_DOWNGRADE, true },
		{ TDAX_R_UPGRADED, TDAX_R_UPGRADED, false },
		{ TDAX_R_NONE, TDAX_R_NONE, false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		atomic_store(&r.state, cases[i].from);
		CHECK(tdax_track_job_pending(&r) == cases[i].pending);
		tdax_track_job_reclaim(&r);
		CHECK(atomic_load(&r.state) == cases[i].to);
	}
	/* The job marked again is run once, as any marked job. */
	atomic_store(&r.state, TDAX_R_DOWNGRADING);
	tdax_track_job_reclaim(&r);
	CHECK(tdax_track_job_begin(&r) == TDAX_DOWNGRADE);
	CHECK(tdax_track_job_begin(&r) == TDAX_KEEP);
	tdax_track_job_end(&r, TDAX_DOWNGRADE, true);
	CHECK(atomic_load(&r.state) == TDAX_R_NONE);
}

TEST(tunables_are_validated)
{
	struct tdax_tunables t = T;
	CHECK(tdax_tunables_check(&t) == NULL);
	t.upgrade_pct = 101;
	CHECK(tdax_tunables_check(&t) != NULL);
	t = T;
	t.downgrade_pct = 70;
	CHECK(tdax_tunables_check(&t) != NULL);
	t = T;
	t.gran_order = 21;
	CHECK(tdax_tunables_check(&t) != NULL);
	t = T;
	t.wb_window_ns = 0;
	CHECK(tdax_tunables_check(&t) != NULL);
}

/* Tunables come from a region others may write: a set that could not have
 * been stored by 'tdax set' reads as the defaults (gran_order=64 was an
 * undefined shift in every writing process). */
TEST(tunables_read_from_a_damaged_region_are_the_defaults)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	const struct tdax_tunables dflt = TDAX_DEFAULT_TUNABLES;
	struct tdax_control *c = tdax_control(dev);
	struct tdax_tunables t;
	atomic_store(&c->gran_order, 64);
	tdax_control_get(dev, &t);
	CHECK(t.gran_order == dflt.gran_order && !tdax_tunables_check(&t));
	atomic_store(&c->gran_order, 4);
	atomic_store(&c->wr_window_ns, 0);
	tdax_control_get(dev, &t);
	CHECK(t.gran_order == dflt.gran_order && t.wr_window_ns == dflt.wr_window_ns);
	atomic_store(&c->wr_window_ns, UINT64_MAX);
	atomic_store(&c->downgrade_pct, 90);
	tdax_control_get(dev, &t);
	CHECK(memcmp(&t, &dflt, sizeof(t)) == 0);
	/* a valid set is read as it is */
	atomic_store(&c->wr_window_ns, 2000000000ull);
	atomic_store(&c->downgrade_pct, 10);
	tdax_control_get(dev, &t);
	CHECK(t.gran_order == 4 && t.wr_window_ns == 2000000000ull && t.downgrade_pct == 10);
	tdax_device_close(dev);
}

TEST(windows_longer_than_a_day_are_refused)
{
	struct tdax_tunables t = TDAX_DEFAULT_TUNABLES;
	t.wb_window_ns = TDAX_MAX_WINDOW_NS + 1;
	CHECK(tdax_tunables_check(&t) && strstr(tdax_tunables_check(&t), "a day"));
	t.wb_window_ns = TDAX_MAX_WINDOW_NS;
	CHECK(!tdax_tunables_check(&t));
}

/* A file's granularity is stored in its entry and used as a shift: a value
 * no tdax writes is cut to the largest G. */
TEST(stored_file_granularity_is_cut_to_the_largest)
{
	struct tdax_file_rt rt;
	memset(&rt, 0, sizeof(rt));
	CHECK(tdax_file_gran(&rt) == 0);
	atomic_store(&rt.gran, 10);
	CHECK(tdax_file_gran(&rt) == 10);
	atomic_store(&rt.gran, UINT32_MAX);
	CHECK(tdax_file_gran(&rt) == TDAX_MAX_GRAN_ORDER + 1);
}
