/* test_recover -- checkpoint and replay, identity and privilege checks,
 * damaged records, and recovery killed half-way then run again. */
#define _GNU_SOURCE
#include "harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/crc32c.h"
#include "core/dirs.h"
#include "core/files.h"
#include "core/log.h"
#include "core/recover.h"

struct tfile {
	char path[512];
	uint32_t idx, gen;
	char expect[1 << 16]; /* what the file must hold after recovery */
	size_t size;
};

static int open_register(struct tdax_device *dev, struct tfile *t, const char *name)
{
	snprintf(t->path, sizeof(t->path), "%s/%s", tdax_test_dir(), name);
	unlink(t->path);
	int fd = open(t->path, O_RDWR | O_CREAT, 0644);
	struct tdax_err e;
	bool created;
	if (fd < 0 || tdax_files_register(dev, fd, t->path, &t->idx, &t->gen, &created, &e)) {
		fprintf(stderr, "  register: %s\n", e.msg);
		return -1;
	}
	t->size = 0;
	/* As after the runtime's first real sync of it: what its records hold
	 * may have been acknowledged since (files.h, rt.synced). */
	atomic_store(&tdax_file_at(dev, t->idx)->rt.synced, 1);
	return fd;
}

/* A write under tdax: optionally into the file (page cache), always into
 * the log; the expected contents follow. */
static int tw(struct tdax_device *dev, struct tfile *t, int fd, uint64_t off, const char *s,
	      bool to_file)
{
	size_t n = strlen(s);
	uint64_t seq;
	if (to_file && pwrite(fd, s, n, (off_t)off) != (ssize_t)n)
		return -1;
	if (off > t->size) /* a hole: zeros */
		memset(t->expect + t->size, 0, off - t->size);
	memcpy(t->expect + off, s, n);
	if (off + n > t->size)
		t->size = off + n;
	return tdax_log_append(dev, t->idx, t->gen, off, s, (uint32_t)n, &seq);
}

static bool file_is(const struct tfile *t)
{
	static char buf[1 << 16];
	int fd = open(t->path, O_RDONLY);
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	return n == (ssize_t)t->size && memcmp(buf, t->expect, t->size) == 0;
}

/* Live records in the device (segments written by this process). */
static uint64_t live_records(struct tdax_device *dev)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < dev->sb->nsegs; i++) {
		const struct tdax_seg *s = tdax_seg_at(dev, i);
		const char *p = (const char *)s + TDAX_SEG_HEADER_SIZE;
		for (uint64_t pos = 0; pos < atomic_load(&s->tail);) {
			const struct tdax_rec *rec = (const struct tdax_rec *)(p + pos);
			n += tdax_rec_live(dev, rec);
			pos += tdax_rec_size(rec->len);
		}
	}
	return n;
}

/* Recovery after a (simulated) power cut: replay. Its return value. */
static int replay(struct tdax_device *dev, struct tdax_recover_report *r)
{
	struct tdax_recover_opts o = { .power_failure = true };
	struct tdax_err e;
	return tdax_recover(dev, &o, r, &e);
}

TEST(replay_rebuilds_files_whose_page_cache_was_lost)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a, b;
	int fa = open_register(dev, &a, "ra"), fb = open_register(dev, &b, "rb");
	CHECK(fa >= 0 && fb >= 0);
	/* Overlapping writes: the later one must win; a write past the end
	 * extends the file. Nothing reaches the files themselves. */
	CHECK(tw(dev, &a, fa, 0, "hello world", false) == 0);
	CHECK(tw(dev, &b, fb, 100, "second file", false) == 0);
	CHECK(tw(dev, &a, fa, 6, "WORLD!", false) == 0);
	CHECK(tw(dev, &a, fa, 3000, "far away", false) == 0);
	close(fa);
	close(fb);
	tdax_log_seal_mine(dev);

	struct tdax_recover_opts o = { .power_failure = true };
	struct tdax_recover_report r;
	struct tdax_err e;
	CHECK(tdax_recover(dev, &o, &r, &e) == 0);
	CHECK(r.replay && r.records == 4 && r.applied == 4 && r.nfiles == 2 && r.failed == 0);
	CHECK(file_is(&a) && file_is(&b));
	CHECK(live_records(dev) == 0);
	tdax_recover_report_free(&r);

	/* Idempotent: nothing left to do, files unchanged. */
	CHECK(tdax_recover(dev, &o, &r, &e) == 0);
	CHECK(r.records == 0 && file_is(&a));
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

/* A truncate under tdax: its record, and the expected contents follow. */
static int tt(struct tdax_device *dev, struct tfile *t, uint64_t size)
{
	uint64_t seq;
	if (size > t->size)
		memset(t->expect + t->size, 0, size - t->size);
	t->size = size;
	return tdax_log_truncate(dev, t->idx, t->gen, size, &seq);
}

TEST(replay_applies_truncates_in_order_with_the_writes)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	int fa = open_register(dev, &a, "ta");
	CHECK(fa >= 0);
	/* On the disk, as a power cut would leave it: longer than any record
	 * says, with bytes the truncates removed. */
	CHECK(pwrite(fa, "stale bytes beyond every record", 31, 4000) == 31);
	CHECK(tw(dev, &a, fa, 0, "first generation of the file", false) == 0);
	CHECK(tt(dev, &a, 5) == 0);          /* cuts the write above */
	CHECK(tw(dev, &a, fa, 10, "after the cut", false) == 0);
	CHECK(tt(dev, &a, 8) == 0);          /* cuts into the hole and the write */
	CHECK(tt(dev, &a, 12) == 0);         /* grows: zeros, not the old bytes */
	CHECK(tw(dev, &a, fa, 2, "XY", false) == 0);
	close(fa);
	tdax_log_seal_mine(dev);

	struct tdax_recover_report r;
	CHECK(replay(dev, &r) == 0);
	CHECK(r.records == 6 && r.applied == 6 && r.failed == 0);
	CHECK(file_is(&a));
	CHECK(memcmp(a.expect, "fiXYt\0\0\0\0\0\0\0", 12) == 0);
	tdax_recover_report_free(&r);
	/* Again: the same result (idempotent). */
	CHECK(replay(dev, &r) == 0 && r.records == 0 && file_is(&a));
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

/* A hole punched or a range zeroed under tdax: a record; the expected
 * contents follow (zeros, and the size with them unless KEEP_SIZE). */
static int tf(struct tdax_device *dev, struct tfile *t, int mode, uint64_t off, uint64_t len)
{
	uint64_t seq, end = off + len;
	if ((mode & FALLOC_FL_KEEP_SIZE) && end > t->size)
		end = t->size;
	if (end > off)
		memset(t->expect + off, 0, end - off);
	if (end > t->size)
		t->size = end;
	return tdax_log_fallocate(dev, t->idx, t->gen, mode, off, len, &seq);
}

/* Holes punched and ranges zeroed (fallocate records) are replayed in
 * order: the writes before them do not come back over the zeros, the
 * writes after them land on them; a zeroed range past the end grows the
 * file. */
TEST(replay_applies_fallocates_in_order_with_the_writes)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	int fa = open_register(dev, &a, "fa");
	CHECK(fa >= 0);
	static char page[4097];
	memset(page, 'w', 4096);
	for (int i = 0; i < 3; i++) /* 12 KiB */
		CHECK(tw(dev, &a, fa, (uint64_t)i * 4096, page, false) == 0);
	CHECK(tf(dev, &a, 0x3 /* PUNCH_HOLE | KEEP_SIZE */, 0, 4096) == 0);
	CHECK(tw(dev, &a, fa, 8, "after the hole", false) == 0);
	CHECK(tf(dev, &a, 0x10 /* ZERO_RANGE */, 8192, 8192) == 0);
	close(fa);
	tdax_log_seal_mine(dev);

	struct tdax_recover_report r;
	CHECK(replay(dev, &r) == 0 && r.failed == 0 && r.applied == r.records);
	CHECK(file_is(&a));
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

/* A fallocate record whose mode tdax never logs (here a plain allocation,
 * which would grow the file; a collapse replayed twice would move bytes
 * twice), as a forged region could hold: not applied, the file's records
 * kept and the failure said. */
TEST(a_fallocate_record_of_another_mode_is_not_applied)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	int fa = open_register(dev, &a, "fc");
	uint64_t seq;
	CHECK(fa >= 0 && tw(dev, &a, fa, 0, "written", true) == 0);
	CHECK(tdax_log_fallocate(dev, a.idx, a.gen, 0, 0, 8192, &seq) == 0);
	close(fa);
	tdax_log_seal_mine(dev);
	struct tdax_recover_report r;
	CHECK(replay(dev, &r) == 1 && r.files[0].outcome == TDAX_IO_FAILED);
	CHECK(strstr(r.files[0].reason, "fallocate") && strstr(r.files[0].reason, "records kept"));
	CHECK(live_records(dev) == 2 && file_is(&a));
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

/* A rename under tdax: the file moves on the disk (or, as if the crash
 * undid it, does not), the rename record holds both names, and the entry's
 * path is cut short as a crash in its in-place update could leave it. */
static void check_renamed(bool durable)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	int fa = open_register(dev, &a, "rn");
	CHECK(fa >= 0);
	char to[sizeof(a.path)];
	CHECK(snprintf(to, sizeof(to), "%.500s.moved", a.path) < (int)sizeof(to));
	unlink(to);
	CHECK(tw(dev, &a, fa, 0, "before the rename", false) == 0);
	uint64_t seq;
	CHECK(tdax_log_rename(dev, a.idx, a.gen, a.path, to, &seq) == 0);
	CHECK(tw(dev, &a, fa, 7, "AFTER", false) == 0);
	close(fa);
	if (durable) {
		CHECK(rename(a.path, to) == 0);
		memcpy(a.path, to, sizeof(to));
	}
	tdax_log_seal_mine(dev);
	struct tdax_file *f = tdax_file_at(dev, a.idx);
	snprintf(f->path, sizeof(f->path), "%.*s", 9, to); /* torn: neither name */
	CHECK(tdax_file_valid(f));

	struct tdax_recover_report r;
	CHECK(replay(dev, &r) == 0);
	CHECK(r.nfiles == 1 && r.files[0].outcome == TDAX_RECOVERED && r.applied == 3);
	CHECK(strcmp(r.files[0].path, a.path) == 0);
	CHECK(file_is(&a));
	tdax_recover_report_free(&r);
	unlink(to);
	tdax_device_close(dev);
}

TEST(a_renamed_file_is_found_under_its_new_name)
{
	check_renamed(true);
}

TEST(a_rename_a_crash_undid_finds_the_file_under_its_old_name)
{
	check_renamed(false);
}

/*
 * A file created under tdax (a create record), written, its creation
 * acknowledged (synced: 1 by a sync of the file, rt.synced; 2 by a
 * directory sync answered from the log, light_seq; 0 not at all),
 * optionally renamed -- and the power cut undid the creation,
 * so it is at none of its names. Outcome: made anew at its newest name, as
 * created (permission bits), with the records; the entry, which names the
 * lost file, is freed; no temporary file is left. With kill_after, a first
 * recovery is killed after that many applied records and the second
 * finishes the work.
 */
static void check_remade(bool renamed, int synced, int kill_after)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	int fa = open_register(dev, &a, "created");
	CHECK(fa >= 0);
	char to[sizeof(a.path)], tmp[sizeof(a.path) + 16];
	CHECK(snprintf(to, sizeof(to), "%.500s.moved", a.path) < (int)sizeof(to));
	unlink(to);
	uint64_t seq;
	CHECK(tdax_log_create(dev, a.idx, a.gen, a.path, 0640, &seq) == 0);
	CHECK(tw(dev, &a, fa, 0, "acknowledged by a lightweight sync", false) == 0);
	if (renamed)
		CHECK(tdax_log_rename(dev, a.idx, a.gen, a.path, to, &seq) == 0);
	CHECK(tw(dev, &a, fa, 4, "NEW", false) == 0);
	close(fa);
	tdax_log_seal_mine(dev);
	/* synced: 0 never, 1 by a sync of the file, 2 by a directory sync */
	atomic_store(&tdax_file_at(dev, a.idx)->rt.synced, synced == 1);
	if (synced == 2)
		atomic_store(&tdax_dirs(dev)->light_seq, atomic_load(dev->seq));
	CHECK(unlink(a.path) == 0); /* the power cut undid the creation */
	if (renamed)
		memcpy(a.path, to, sizeof(to));
	snprintf(tmp, sizeof(tmp), "%s.tdax-remade", a.path);

	if (kill_after) {
		pid_t pid = fork();
		if (pid == 0) {
			char v[16];
			snprintf(v, sizeof(v), "%d", kill_after);
			setenv("TDAX_TEST_RECOVER_KILL_AFTER", v, 1);
			struct tdax_recover_report r;
			_exit(replay(dev, &r) == 0 ? 0 : 1);
		}
		int st;
		waitpid(pid, &st, 0);
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		CHECK(access(a.path, F_OK) != 0 && access(tmp, F_OK) == 0); /* not in place yet */
	}
	struct tdax_dir_slot *slot = &tdax_dirs(dev)->slot[3];
	atomic_store(&slot->ino, 42); /* what the page cache had: forgotten by the replay */
	atomic_store(&tdax_dirs(dev)->watch_left, TDAX_DIRSYNC_WATCH);
	struct tdax_recover_report r;
	CHECK(replay(dev, &r) == 0);
	CHECK(r.nfiles == 1 && live_records(dev) == 0);
	CHECK(atomic_load(&slot->ino) == 0 && atomic_load(&tdax_dirs(dev)->watch_left) == 0);
	if (!synced) {
		/* No sync of it was answered: nothing to make again. */
		CHECK(r.files[0].outcome == TDAX_DISCARDED && access(a.path, F_OK) != 0);
	} else {
		struct stat st;
		CHECK(r.files[0].outcome == TDAX_RECOVERED && strcmp(r.files[0].path, a.path) == 0);
		CHECK(strstr(r.files[0].reason, "made anew") != NULL);
		CHECK(file_is(&a) && stat(a.path, &st) == 0 && (st.st_mode & 07777) == 0640);
		CHECK(atomic_load(&tdax_file_at(dev, a.idx)->state) != TDAX_FILE_ACTIVE);
	}
	CHECK(access(tmp, F_OK) != 0);
	tdax_recover_report_free(&r);
	unlink(a.path);
	tdax_device_close(dev);
}

TEST(a_file_whose_creation_the_crash_undid_is_made_anew)
{
	check_remade(false, 1, 0);
}

TEST(a_created_and_renamed_file_the_crash_undid_is_made_at_its_new_name)
{
	check_remade(true, 1, 0);
}

TEST(a_created_file_never_synced_is_not_made_again)
{
	check_remade(false, 0, 0);
}

/* Never synced itself, but a directory sync answered from the log after
 * its creation promised its name (dirs.h, light_seq): made again. */
TEST(a_created_file_a_directory_sync_promised_is_made_again)
{
	check_remade(false, 2, 0);
}

TEST(recovery_killed_while_making_a_file_anew_completes_when_run_again)
{
	check_remade(true, 1, 2);
}

/* A file created under tdax (a create record), written, closed -- and the
 * crash undid its creation: gone from its name. */
static int created_then_lost(struct tdax_device *dev, struct tfile *a, const char *name)
{
	int fa = open_register(dev, a, name);
	uint64_t seq;
	if (fa < 0 || tdax_log_create(dev, a->idx, a->gen, a->path, 0644, &seq) != 0 ||
	    tw(dev, a, fa, 0, "acknowledged", false) != 0)
		return -1;
	close(fa);
	tdax_log_seal_mine(dev);
	return unlink(a->path);
}

/* Another file, born after it, took the name of one whose creation the
 * crash undid: it is neither written nor replaced nor moved, and the
 * records stay (unmatched). */
TEST(a_created_files_name_taken_by_another_file_is_left_alone)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	CHECK(created_then_lost(dev, &a, "taken") == 0);
	a.size = strlen("someone else's");
	memcpy(a.expect, "someone else's", a.size);
	usleep(50000); /* birth times tick in jiffies: born strictly later */
	int other = open(a.path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	CHECK(other >= 0 && write(other, a.expect, a.size) == (ssize_t)a.size);
	close(other);
	struct tdax_recover_report r;
	CHECK(replay(dev, &r) == 1);
	CHECK(r.nfiles == 1 && r.files[0].outcome == TDAX_UNMATCHED && file_is(&a));
	CHECK(live_records(dev) == 2);
	tdax_recover_report_free(&r);
	unlink(a.path);
	tdax_device_close(dev);
}

/* The name of one whose creation the crash undid holds a file born before
 * it, which the application had removed (no records: the crash undid that
 * too): moved aside, kept whole, and the acknowledged file made anew. */
TEST(an_older_file_at_a_lost_files_name_is_moved_aside)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	char old[600], aside[640];
	snprintf(old, sizeof(old), "%s/older", tdax_test_dir());
	int o = open(old, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	struct stat st;
	CHECK(o >= 0 && write(o, "older", 5) == 5 && fstat(o, &st) == 0 && close(o) == 0);
	CHECK(created_then_lost(dev, &a, "brought-back") == 0);
	CHECK(rename(old, a.path) == 0); /* its removal undone */
	snprintf(aside, sizeof(aside), "%s.tdax-displaced.%llu", a.path, (unsigned long long)st.st_ino);
	struct tdax_recover_report r;
	CHECK(replay(dev, &r) == 0);
	CHECK(r.nfiles == 1 && r.files[0].outcome == TDAX_RECOVERED && file_is(&a));
	CHECK(strstr(r.files[0].reason, aside) != NULL);
	char buf[8] = { 0 };
	int fd = open(aside, O_RDONLY);
	CHECK(fd >= 0 && read(fd, buf, sizeof(buf)) == 5 && memcmp(buf, "older", 5) == 0);
	close(fd);
	CHECK(live_records(dev) == 0);
	tdax_recover_report_free(&r);
	unlink(a.path);
	unlink(aside);
	tdax_device_close(dev);
}

/* A recovery cut short after the remade file took its name (before the
 * records went): the next one takes that file -- another inode than the
 * entry names -- as the entry's, by the identity noted in rt.remade. */
TEST(a_file_remade_by_a_recovery_cut_short_is_the_entrys)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	CHECK(created_then_lost(dev, &a, "remade") == 0);
	int remade = open(a.path, O_RDWR | O_CREAT | O_EXCL, 0644); /* another inode */
	struct tdax_ident id;
	CHECK(remade >= 0 && tdax_ident_of_fd(remade, &id) == 0);
	close(remade);
	struct tdax_recover_report r;
	CHECK(replay(dev, &r) == 1 && r.files[0].outcome == TDAX_UNMATCHED); /* not without the note */
	tdax_recover_report_free(&r);
	tdax_file_set_remade(dev, tdax_file_at(dev, a.idx), &id);
	CHECK(replay(dev, &r) == 0 && r.files[0].outcome == TDAX_RECOVERED && file_is(&a));
	CHECK(live_records(dev) == 0);
	tdax_recover_report_free(&r);
	unlink(a.path);
	tdax_device_close(dev);
}

/* A crash while the application removed a file with records (tdax marks
 * the entry first, names.c): if the name is gone, the records go after a
 * sync of the directory (not "unmatched", which would need the user); if it
 * is still there (the removal did not happen, or was not durable), they are
 * applied and the mark goes -- unless the file was unlinked (TDAX_REMOVED):
 * then it is unlinked again. */
static void check_removed(uint32_t state, bool gone)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	int fa = open_register(dev, &a, "removing");
	CHECK(fa >= 0 && tw(dev, &a, fa, 0, "acknowledged, then removed", false) == 0);
	close(fa);
	tdax_log_seal_mine(dev);
	struct tdax_file *f = tdax_file_at(dev, a.idx);
	atomic_store(&f->rt.removed, state);
	if (gone)
		CHECK(unlink(a.path) == 0);
	bool goes = gone || state == TDAX_REMOVED;

	struct tdax_recover_report r;
	CHECK(replay(dev, &r) == 0);
	CHECK(r.nfiles == 1 && r.files[0].outcome == (goes ? TDAX_DISCARDED : TDAX_RECOVERED));
	CHECK(live_records(dev) == 0);
	CHECK(goes ? access(a.path, F_OK) != 0 : file_is(&a) && atomic_load(&f->rt.removed) == 0);
	if (state == TDAX_REMOVED && !gone)
		CHECK(strstr(r.files[0].reason, "removed again") &&
		      atomic_load(&f->state) != TDAX_FILE_ACTIVE);
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

/* Unlinked by the application, and a power cut brought it back: unlinked
 * again (an acknowledged removal must not be undone: a directory sync
 * after it may have been answered). */
TEST(a_file_unlinked_and_brought_back_by_a_power_cut_is_unlinked_again)
{
	check_removed(TDAX_REMOVED, false);
}

/* Replaced by a rename, and a power cut undid the rename: the old file is
 * back at its name with its records (removing it would leave the name to
 * neither file). */
TEST(a_file_replaced_and_brought_back_by_a_power_cut_keeps_its_records)
{
	check_removed(TDAX_REPLACED, false);
}

/*
 * One name, two entries, as SQLite's rollback journal leaves them: the
 * journal of a committed transaction (unlinked: TDAX_REMOVED, its records
 * kept until the directory is synced) and the next transaction's journal
 * at the same name (created, synced: acknowledged). The power cut undid
 * both the unlink and the creation: the name holds the old journal. Were
 * the new one handled first, its remake would find the name taken and stay
 * unmatched, and the old one's unlink would then leave no journal at all --
 * the database keeps the half-written transaction (found by the crash
 * suite: sqlite-delete-always, "database disk image is malformed"). So the
 * unlinks are done again first, whatever the order of the entries.
 */
TEST(an_unlinked_file_back_at_a_name_a_new_file_needs_goes_first)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile next, old;
	CHECK(created_then_lost(dev, &next, "journal") == 0); /* the lower entry */
	int fo = open_register(dev, &old, "journal");
	CHECK(fo >= 0 && old.idx > next.idx);
	CHECK(tw(dev, &old, fo, 0, "a committed transaction's journal", true) == 0);
	close(fo);
	tdax_log_seal_mine(dev);
	atomic_store(&tdax_file_at(dev, old.idx)->rt.removed, TDAX_REMOVED);
	struct tdax_recover_report r;
	CHECK(replay(dev, &r) == 0);
	CHECK(r.nfiles == 2 && live_records(dev) == 0);
	for (size_t i = 0; i < r.nfiles; i++)
		CHECK(r.files[i].outcome == (r.files[i].idx == old.idx ? TDAX_DISCARDED : TDAX_RECOVERED));
	CHECK(file_is(&next));
	tdax_recover_report_free(&r);
	unlink(next.path);
	tdax_device_close(dev);
}

/* A file created, written and never synced, whose creation the power cut
 * undid: no sync of it was ever lightweight, so none of its records was
 * acknowledged -- they go (not "unmatched", which would need the user). */
TEST(records_of_a_file_never_synced_go_when_it_is_gone)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	int fa = open_register(dev, &a, "never-synced");
	CHECK(fa >= 0 && tw(dev, &a, fa, 0, "never acknowledged", false) == 0);
	close(fa);
	tdax_log_seal_mine(dev);
	atomic_store(&tdax_file_at(dev, a.idx)->rt.synced, 0);
	CHECK(unlink(a.path) == 0);
	struct tdax_recover_report r;
	CHECK(replay(dev, &r) == 0);
	CHECK(r.nfiles == 1 && r.files[0].outcome == TDAX_DISCARDED && live_records(dev) == 0);
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

TEST(records_of_a_file_removed_at_the_crash_go_without_a_user)
{
	check_removed(TDAX_REMOVING, true);
}

TEST(a_file_whose_removal_did_not_last_gets_its_records)
{
	check_removed(TDAX_REMOVING, false);
}

TEST(same_boot_recovery_only_syncs_and_releases)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	int fa = open_register(dev, &a, "ca");
	CHECK(tw(dev, &a, fa, 0, "in the page cache", true) == 0);
	/* A later write tdax did not log: replay would wrongly undo it. */
	CHECK(pwrite(fa, "IN", 2, 0) == 2);
	memcpy(a.expect, "IN", 2);
	close(fa);
	struct tdax_recover_opts o = { 0 };
	struct tdax_recover_report r;
	struct tdax_err e;
	CHECK(tdax_recover(dev, &o, &r, &e) == 0);
	CHECK(!r.replay && r.records == 1 && r.applied == 0 && r.files[0].outcome == TDAX_RECOVERED);
	CHECK(file_is(&a));
	CHECK(live_records(dev) == 0);
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

TEST(replaced_file_is_not_written_and_is_reported)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	int fa = open_register(dev, &a, "ia");
	CHECK(tw(dev, &a, fa, 0, "old inode data", false) == 0);
	close(fa);
	tdax_log_seal_mine(dev);
	/* The path now names another file. */
	CHECK(unlink(a.path) == 0);
	int fd = open(a.path, O_CREAT | O_WRONLY, 0644);
	CHECK(write(fd, "new", 3) == 3);
	close(fd);
	memcpy(a.expect, "new", 3);
	a.size = 3;

	struct tdax_recover_opts o = { .power_failure = true };
	struct tdax_recover_report r;
	struct tdax_err e;
	CHECK(tdax_recover(dev, &o, &r, &e) == 1);
	CHECK(r.nfiles == 1 && r.files[0].outcome == TDAX_UNMATCHED && r.applied == 0);
	CHECK(strstr(r.files[0].reason, "another file"));
	CHECK(file_is(&a));
	CHECK(live_records(dev) == 1); /* kept */
	tdax_recover_report_free(&r);

	o.discard_unmatched = true;
	CHECK(tdax_recover(dev, &o, &r, &e) == 0);
	CHECK(r.files[0].outcome == TDAX_DISCARDED && file_is(&a));
	CHECK(live_records(dev) == 0);
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

TEST(records_are_applied_only_with_the_recorders_privileges)
{
	if (geteuid() != 0) {
		fprintf(stderr, "  needs root to act as another user\n");
		tdax_test_failed = 1;
		return;
	}
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	/* A root-owned file nobody may write... */
	char path[512];
	snprintf(path, sizeof(path), "%s/rootfile", tdax_test_dir());
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
	CHECK(fd >= 0 && write(fd, "root data", 9) == 9);
	CHECK(chmod(tdax_test_dir(), 0755) == 0);
	/* ...registered and logged by user nobody (65534), through an fd that
	 * nobody was handed (as a forged record would be). */
	pid_t pid = fork();
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(1);
		uint32_t idx, gen;
		uint64_t seq;
		struct tdax_err e;
		bool created;
		if (tdax_files_register(dev, fd, path, &idx, &gen, &created, &e) ||
		    tdax_log_append(dev, idx, gen, 0, "PWNED", 5, &seq))
			_exit(2);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(fd);
	struct tdax_recover_opts o = { .power_failure = true };
	struct tdax_recover_report r;
	struct tdax_err e;
	CHECK(tdax_recover(dev, &o, &r, &e) == 1);
	CHECK(r.nfiles == 1 && r.files[0].outcome == TDAX_NOT_PERMITTED && r.applied == 0);
	char buf[16] = { 0 };
	fd = open(path, O_RDONLY);
	CHECK(read(fd, buf, sizeof(buf)) == 9 && memcmp(buf, "root data", 9) == 0);
	close(fd);
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

TEST(corrupt_record_is_skipped_and_every_other_one_applied)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	int fa = open_register(dev, &a, "xa");
	char line[64];
	for (int i = 0; i < 20; i++) {
		snprintf(line, sizeof(line), "record %02d|", i);
		CHECK(tw(dev, &a, fa, (uint64_t)i * 10, line, false) == 0);
	}
	close(fa);
	/* Flip a bit in the data of record 7. */
	struct tdax_seg *s = NULL;
	for (uint32_t i = 0; i < dev->sb->nsegs && !s; i++)
		if (atomic_load(&tdax_seg_at(dev, i)->tail))
			s = tdax_seg_at(dev, i);
	CHECK(s);
	char *rec7 = (char *)s + TDAX_SEG_HEADER_SIZE + 7 * tdax_rec_size(10);
	rec7[sizeof(struct tdax_rec) + 3] ^= 0x04;
	memset(a.expect + 70, 0, 10); /* record 7 is lost: its bytes stay a hole */
	tdax_log_seal_mine(dev);

	struct tdax_recover_report r;
	CHECK(replay(dev, &r) == 0);
	CHECK(r.corrupt == 1 && r.applied == 19 && r.ndamage == 1 && !r.damage[0].torn);
	CHECK(r.damage[0].readable && r.damage[0].off == 70 && r.damage[0].len == 10);
	CHECK(file_is(&a));
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

TEST(recovery_killed_half_way_completes_when_run_again)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a, b;
	int fa = open_register(dev, &a, "ka"), fb = open_register(dev, &b, "kb");
	char line[64];
	for (int i = 0; i < 200; i++) {
		snprintf(line, sizeof(line), "<%03d>", i);
		CHECK(tw(dev, i % 2 ? &a : &b, i % 2 ? fa : fb, (uint64_t)(i / 2) * 5, line, false) == 0);
		CHECK(tw(dev, i % 2 ? &a : &b, i % 2 ? fa : fb, (uint64_t)(i / 4) * 5, "#", false) == 0);
	}
	close(fa);
	close(fb);
	tdax_log_seal_mine(dev);
	int killed = 0;
	for (int kill_after = 1; kill_after <= 300; kill_after += 37) {
		pid_t pid = fork();
		if (pid == 0) {
			char v[16];
			snprintf(v, sizeof(v), "%d", kill_after);
			setenv("TDAX_TEST_RECOVER_KILL_AFTER", v, 1);
			struct tdax_recover_opts o = { .power_failure = true };
			struct tdax_recover_report r;
			struct tdax_err e;
			_exit(tdax_recover(dev, &o, &r, &e) == 0 ? 0 : 1);
		}
		int st;
		waitpid(pid, &st, 0);
		/* Killed, or done once fewer records than kill_after were left. */
		CHECK((WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) || (WIFEXITED(st) && !WEXITSTATUS(st)));
		killed += WIFSIGNALED(st);
	}
	CHECK(killed >= 4);
	struct tdax_recover_opts o = { .power_failure = true };
	struct tdax_recover_report r;
	struct tdax_err e;
	CHECK(tdax_recover(dev, &o, &r, &e) == 0);
	CHECK(r.failed == 0);
	CHECK(file_is(&a) && file_is(&b));
	CHECK(live_records(dev) == 0);
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

TEST(replay_is_refused_while_a_writer_is_alive)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	int fa = open_register(dev, &a, "la");
	CHECK(tw(dev, &a, fa, 0, "x", true) == 0); /* this thread now owns a segment */
	close(fa);
	struct tdax_recover_opts o = { .power_failure = true };
	struct tdax_recover_report r;
	struct tdax_err e;
	CHECK(tdax_recover(dev, &o, &r, &e) == -1);
	CHECK(strstr(e.msg, "is writing to this device"));
	o.power_failure = false; /* a checkpoint is safe while others write */
	CHECK(tdax_recover(dev, &o, &r, &e) == 0 && r.files[0].outcome == TDAX_RECOVERED);
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

/* ---- whose rights recovery acts with (issue 15) ---- */

#define NOBODY 65534

static bool holds(const char *path, const char *what)
{
	char buf[64] = { 0 };
	int fd = open(path, O_RDONLY);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n == (ssize_t)strlen(what) && memcmp(buf, what, (size_t)n) == 0;
}

static int make_file(const char *name, const char *data, mode_t mode, uid_t owner, char *path)
{
	snprintf(path, 512, "%s/%s", tdax_test_dir(), name);
	unlink(path);
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, mode);
	if (fd < 0 || write(fd, data, strlen(data)) != (ssize_t)strlen(data) ||
	    fchmod(fd, mode) || fchown(fd, owner, owner)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Register fd as path and log data at offset 0, as user uid (in a child:
 * the entry records the registering process's uid). */
static int log_as(struct tdax_device *dev, uid_t uid, int fd, const char *path, const char *data)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (setgid(uid) || setuid(uid))
			_exit(1);
		uint32_t idx, gen;
		uint64_t seq;
		struct tdax_err e;
		bool created;
		if (tdax_files_register(dev, fd, path, &idx, &gen, &created, &e) ||
		    tdax_log_append(dev, idx, gen, 0, data, (uint32_t)strlen(data), &seq))
			_exit(2);
		_exit(0);
	}
	int st;
	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static const struct tdax_recover_file *outcome_of(const struct tdax_recover_report *r,
						  const char *path)
{
	for (uint32_t i = 0; i < r->nfiles; i++)
		if (strcmp(r->files[i].path, path) == 0)
			return &r->files[i];
	return NULL;
}

/*
 * An attacker who can write a region gets root's 'tdax recover' to write
 * root's files: an entry claiming uid 0, or an entry of the attacker naming
 * a root-owned file the attacker may write (mode 0666). Recovery acts as
 * the region's owner (or, for a root-owned region others can write, never
 * as root) and only on files that user owns; the user's own file is
 * recovered as before.
 */
static void check_region_trust(uid_t region_owner, mode_t region_mode)
{
	if (geteuid() != 0) {
		fprintf(stderr, "  needs root to act as another user\n");
		tdax_test_failed = 1;
		return;
	}
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	CHECK(chown(dev->path, region_owner, region_owner) == 0 && chmod(dev->path, region_mode) == 0);
	/* Recovery trusts the region as it was when opened: open it again. */
	char region[PATH_MAX];
	snprintf(region, sizeof(region), "%s", dev->path);
	struct tdax_err oe;
	tdax_device_close(dev);
	CHECK(tdax_device_open(region, TDAX_OPEN_ANY_OWNER | TDAX_OPEN_ALLOW_SHARED, &dev, &oe) == 0);
	CHECK(chmod(tdax_test_dir(), 0755) == 0);
	char root_claimed[512], root_open[512], mine[512], readonly[512];
	int f1 = make_file("root-claimed", "root data", 0644, 0, root_claimed);
	int f2 = make_file("root-0666", "root data", 0666, 0, root_open);
	int f3 = make_file("users", "old", 0644, NOBODY, mine);
	/* the user's, read-only to the user, writable by root's group: the
	 * owner bits alone decide, root's groups (kept under setfsuid) do not */
	int f4 = make_file("users-ro", "old", 0464, NOBODY, readonly);
	CHECK(f1 >= 0 && f2 >= 0 && f3 >= 0 && f4 >= 0 && fchown(f4, NOBODY, 0) == 0);
	CHECK(log_as(dev, 0, f1, root_claimed, "PWNED") == 0);  /* entry says uid 0 */
	CHECK(log_as(dev, NOBODY, f2, root_open, "PWNED") == 0);
	CHECK(log_as(dev, NOBODY, f3, mine, "new") == 0);
	CHECK(log_as(dev, NOBODY, f4, readonly, "new") == 0);
	close(f1), close(f2), close(f3), close(f4);

	struct tdax_recover_opts o = { .power_failure = true };
	struct tdax_recover_report r;
	struct tdax_err e;
	CHECK(tdax_recover(dev, &o, &r, &e) == 1);
	const struct tdax_recover_file *a = outcome_of(&r, root_claimed), *b = outcome_of(&r, root_open),
				       *c = outcome_of(&r, mine), *d = outcome_of(&r, readonly);
	CHECK(r.nfiles == 4 && a && b && c && d);
	CHECK(a->outcome == TDAX_REFUSED && strstr(a->reason, "uid 0"));
	CHECK(b->outcome == TDAX_REFUSED && strstr(b->reason, "belongs to uid 0"));
	CHECK(c->outcome == TDAX_RECOVERED && r.applied == 1);
	CHECK(d->outcome == TDAX_NOT_PERMITTED && holds(readonly, "old"));
	CHECK(strcmp(tdax_outcome_name(a->outcome), "refused") == 0);
	CHECK(holds(root_claimed, "root data") && holds(root_open, "root data") && holds(mine, "new"));
	struct stat st;
	CHECK(stat(mine, &st) == 0 && st.st_uid == NOBODY);
	tdax_recover_report_free(&r);
	/* refused records are kept, and stay refused */
	CHECK(tdax_recover(dev, &o, &r, &e) == 1 && r.nfiles == 3 && r.applied == 0);
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

TEST(root_recovering_a_users_region_acts_only_as_that_user_on_their_files)
{
	check_region_trust(NOBODY, 0600);
}

TEST(root_owned_region_others_can_write_recovers_no_root_file)
{
	check_region_trust(0, 0666);
}

/* Re-sign a file entry after changing it, as a forger would (the checksum
 * covers the identity, not the path: files.c). */
static void resign_entry(struct tdax_file *f)
{
	f->crc = tdax_crc32c(0, &f->gen, offsetof(struct tdax_file, crc) - offsetof(struct tdax_file, gen));
}

/*
 * Where the file system has an inode generation or a birth time (the test
 * files are on the disk), it must match: an entry that claims to have none,
 * or another one, is not believed (a new file on a reused inode number
 * must not take a removed file's records).
 */
static void check_forged_identity(unsigned what)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	int fa = open_register(dev, &a, "ident");
	struct tdax_ident id;
	CHECK(tdax_ident_of_fd(fa, &id) == 0);
	if (!(id.flags & what)) {
		fprintf(stderr, "  %s has no %s: nothing to check\n", tdax_test_dir(),
			what == TDAX_FILE_HAS_IGEN ? "inode generations" : "birth times");
		close(fa);
		tdax_device_close(dev);
		return;
	}
	CHECK(tw(dev, &a, fa, 0, "from another inode", false) == 0);
	close(fa);
	tdax_log_seal_mine(dev);
	struct tdax_file *f = tdax_file_at(dev, a.idx);
	CHECK(f->flags & what);
	if (what == TDAX_FILE_HAS_IGEN) {
		f->flags = 0; /* "no generation here", and another one */
		f->igen++;
	} else {
		f->flags &= ~(unsigned)TDAX_FILE_HAS_IGEN; /* only the birth time tells */
		f->btime++;
	}
	resign_entry(f);
	CHECK(tdax_file_valid(f));

	struct tdax_recover_report r;
	CHECK(replay(dev, &r) == 1);
	CHECK(r.nfiles == 1 && r.files[0].outcome == TDAX_UNMATCHED && r.applied == 0);
	struct stat st;
	CHECK(stat(a.path, &st) == 0 && st.st_size == 0);
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}

TEST(stored_no_generation_flag_is_not_believed)
{
	check_forged_identity(TDAX_FILE_HAS_IGEN);
}

TEST(another_birth_time_is_another_file)
{
	check_forged_identity(TDAX_FILE_HAS_BTIME);
}

TEST(non_regular_file_at_recorded_path_is_not_opened)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	static struct tfile a;
	int fa = open_register(dev, &a, "fifo");
	CHECK(tw(dev, &a, fa, 0, "data", false) == 0);
	close(fa);
	tdax_log_seal_mine(dev);
	CHECK(unlink(a.path) == 0 && mkfifo(a.path, 0666) == 0);
	int reader = open(a.path, O_RDONLY | O_NONBLOCK);
	CHECK(reader >= 0);

	struct tdax_recover_opts o = { .power_failure = true };
	struct tdax_recover_report r;
	struct tdax_err e;
	CHECK(tdax_recover(dev, &o, &r, &e) == 1);
	CHECK(r.nfiles == 1 && r.files[0].outcome == TDAX_UNMATCHED);
	CHECK(strstr(r.files[0].reason, "no regular file"));
	struct pollfd p = { .fd = reader, .events = POLLIN };
	CHECK(poll(&p, 1, 0) == 0 && !(p.revents & POLLHUP)); /* no writer ever came */
	close(reader);
	tdax_recover_report_free(&r);
	tdax_device_close(dev);
}
