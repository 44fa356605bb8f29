/*
 * recover -- checkpoint-or-replay of the device's live records.
 */
#define _GNU_SOURCE
#include "recover.h"
#include "files.h"
#include "log.h"
#include "shadow.h"
#include "testaid.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <unistd.h>

struct live {
	const struct tdax_rec *r;
};

struct collect {
	struct tdax_device *dev;
	int64_t only_file;        /* collect one file's records, or -1 for all */
	struct live *v;
	size_t n, cap;
	uint64_t max_seq;
	struct tdax_recover_report *rep;
	int oom;
};

static int collect_rec(void *ctx, const struct tdax_rec *r)
{
	struct collect *c = ctx;
	if (r->seq > c->max_seq)
		c->max_seq = r->seq;
	if (!tdax_rec_live(c->dev, r) || (c->only_file >= 0 && r->file != c->only_file))
		return 0;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 1024;
		struct live *v = realloc(c->v, cap * sizeof(*v));
		if (!v) {
			c->oom = 1;
			return 1;
		}
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++].r = r;
	return 0;
}

static void collect_bad(void *ctx, uint32_t seg, uint64_t pos, enum tdax_rec_damage what,
			const struct tdax_rec *r)
{
	struct tdax_recover_report *rep = ((struct collect *)ctx)->rep;
	if (!rep)
		return;
	if (what == TDAX_REC_CORRUPT)
		rep->corrupt++;
	else
		rep->torn++;
	if (rep->ndamage == TDAX_RECOVER_MAX_DAMAGE)
		return;
	struct tdax_recover_damage *d = &rep->damage[rep->ndamage++];
	*d = (struct tdax_recover_damage){ .seg = seg, .pos = pos, .torn = what == TDAX_REC_TORN,
					   .readable = r != NULL };
	if (r) {
		d->file = r->file;
		d->seq = r->seq;
		d->off = r->off;
		d->len = r->len;
	}
}

static int by_file_seq(const void *a, const void *b)
{
	const struct tdax_rec *x = ((const struct live *)a)->r, *y = ((const struct live *)b)->r;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Test aid (test build only, src/testaid.h): SIGKILL ourselves after this
 * many applied records (crash tests of recovery itself); 0 = off. */
static long kill_after(void)
{
	const char *s = TDAX_TEST_ENV("RECOVER_KILL_AFTER");
	return s ? atol(s) : 0;
}

/* Open the registered file as its registering user; check it is the same. */
static int open_as_owner(const struct tdax_file *f, struct tdax_recover_file *out)
{
	uid_t me = geteuid();
	if (me != 0 && me != f->uid) {
		out->outcome = TDAX_NOT_PERMITTED;
		snprintf(out->reason, sizeof(out->reason), "recorded by uid %u; run tdax recover as "
			 "root or as that user", f->uid);
		return -1;
	}
	if (me == 0) {
		setfsgid(f->gid);
		setfsuid(f->uid);
	}
	int fd = open(f->path, O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	int e = errno;
	if (me == 0) {
		setfsuid(0);
		setfsgid(0);
	}
	if (fd < 0) {
		out->outcome = e == EACCES || e == EPERM ? TDAX_NOT_PERMITTED : TDAX_UNMATCHED;
		snprintf(out->reason, sizeof(out->reason), "cannot open as uid %u: %s", f->uid,
			 strerror(e));
		return -1;
	}
	struct tdax_ident now, was = { f->dev, f->ino, f->igen, f->flags };
	if (tdax_ident_of_fd(fd, &now) != 0 || !tdax_ident_same(&now, &was)) {
		close(fd);
		out->outcome = TDAX_UNMATCHED;
		snprintf(out->reason, sizeof(out->reason), "the path now names another file "
			 "(registered inode %llu on device %llu)", (unsigned long long)f->ino,
			 (unsigned long long)f->dev);
		return -1;
	}
	return fd;
}

static int write_all(int fd, const char *p, size_t n, uint64_t off)
{
	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* Bring one file up to date with its records v[0..n). */
static void recover_file(struct tdax_device *dev, const struct tdax_recover_opts *o,
			 struct tdax_recover_report *rep, const struct live *v, size_t n,
			 struct tdax_recover_file *out, long *budget)
{
	const struct tdax_file *f = tdax_file_at(dev, v[0].r->file);
	uint32_t idx = v[0].r->file, gen = v[0].r->fgen;
	uint64_t last = v[n - 1].r->seq;

	out->idx = idx;
	snprintf(out->path, sizeof(out->path), "%s", f->path);
	out->records = n;
	int fd = open_as_owner(f, out);
	if (fd < 0) {
		if (out->outcome == TDAX_UNMATCHED && o->discard_unmatched) {
			tdax_file_release(dev, idx, gen, last);
			out->outcome = TDAX_DISCARDED;
		}
		return;
	}
	/* Same boot: the page cache has every byte; take the release point
	 * before the sync so that it covers writers still running. */
	uint64_t upto = rep->replay ? last : atomic_load(dev->seq);
	for (size_t i = 0; rep->replay && i < n; i++) {
		const struct tdax_rec *r = v[i].r;
		if (write_all(fd, (const char *)(r + 1), r->len, r->off) != 0) {
			out->outcome = TDAX_IO_FAILED;
			snprintf(out->reason, sizeof(out->reason), "write at offset %llu failed: %s; "
				 "records kept", (unsigned long long)r->off, strerror(errno));
			close(fd);
			return;
		}
		out->bytes += r->len;
		rep->applied++;
		rep->bytes += r->len;
		if (*budget > 0 && --*budget == 0)
			raise(SIGKILL);
	}
	if (!rep->replay)
		tdax_shadow_before_sync(fd, f->path);
	if (fdatasync(fd) != 0) {
		out->outcome = TDAX_IO_FAILED;
		snprintf(out->reason, sizeof(out->reason), "fdatasync failed: %s; records kept",
			 strerror(errno));
		close(fd);
		return;
	}
	close(fd);
	tdax_file_release(dev, idx, gen, upto > last ? upto : last);
	out->outcome = TDAX_RECOVERED;
}

int tdax_recover(struct tdax_device *dev, const struct tdax_recover_opts *o,
		 struct tdax_recover_report *rep, struct tdax_err *err)
{
	uint64_t t0 = tdax_now_ns();
	memset(rep, 0, sizeof(*rep));
	rep->replay = o->power_failure || tdax_device_boot_changed(dev);
	if (rep->replay) {
		uint32_t pid = tdax_log_live_owner(dev);
		if (pid)
			return tdax_errf(err, "%s: process %u is writing to this device; replaying "
				"records now could overwrite its newer data. Stop it, then run "
				"'tdax recover --power-failure' again", dev->path, pid);
	}
	rep->sealed = tdax_log_seal_dead(dev);

	struct collect c = { .dev = dev, .only_file = -1, .rep = rep };
	struct tdax_scan_cb cb = { collect_rec, collect_bad, &c };
	tdax_log_scan(dev, &cb);
	if (c.oom) {
		free(c.v);
		return tdax_errf(err, "%s: out of memory collecting records", dev->path);
	}
	/* The counter may lag its records after a power cut: never reuse one. */
	uint64_t cur = atomic_load(dev->seq);
	while (cur < c.max_seq && !atomic_compare_exchange_weak(dev->seq, &cur, c.max_seq))
		;
	rep->records = c.n;
	if (c.n)
		qsort(c.v, c.n, sizeof(*c.v), by_file_seq);

	size_t nfiles = 0;
	for (size_t i = 0; i < c.n; i++)
		nfiles += i == 0 || c.v[i].r->file != c.v[i - 1].r->file;
	rep->files = calloc(nfiles ? nfiles : 1, sizeof(*rep->files));
	if (!rep->files) {
		free(c.v);
		return tdax_errf(err, "%s: out of memory", dev->path);
	}
	long budget = kill_after();
	for (size_t i = 0, j; i < c.n; i = j) {
		for (j = i + 1; j < c.n && c.v[j].r->file == c.v[i].r->file; j++)
			;
		struct tdax_recover_file *out = &rep->files[rep->nfiles++];
		recover_file(dev, o, rep, &c.v[i], j - i, out, &budget);
		rep->failed += out->outcome != TDAX_RECOVERED && out->outcome != TDAX_DISCARDED;
	}
	free(c.v);
	tdax_log_reclaim(dev);
	if (rep->failed == 0)
		tdax_device_set_state(dev, tdax_log_live_owner(dev) ? TDAX_STATE_UNCLEAN
								    : TDAX_STATE_CLEAN);
	rep->seconds = (double)(tdax_now_ns() - t0) / 1e9;
	return rep->failed ? 1 : 0;
}

void tdax_recover_report_free(struct tdax_recover_report *rep)
{
	free(rep->files);
	rep->files = NULL;
}

int tdax_replay_file(struct tdax_device *dev, uint32_t idx, uint32_t gen, int fd)
{
	struct collect c = { .dev = dev, .only_file = idx };
	tdax_log_scan(dev, &(struct tdax_scan_cb){ collect_rec, collect_bad, &c });
	int rc = c.oom ? -1 : 0;
	if (c.n)
		qsort(c.v, c.n, sizeof(*c.v), by_file_seq);
	for (size_t i = 0; rc == 0 && i < c.n; i++) {
		const struct tdax_rec *r = c.v[i].r;
		if (r->fgen == gen)
			rc = write_all(fd, (const char *)(r + 1), r->len, r->off);
	}
	free(c.v);
	return rc;
}

const char *tdax_outcome_name(enum tdax_file_outcome o)
{
	switch (o) {
	case TDAX_RECOVERED: return "recovered";
	case TDAX_UNMATCHED: return "unmatched";
	case TDAX_DISCARDED: return "discarded";
	case TDAX_NOT_PERMITTED: return "not-permitted";
	case TDAX_IO_FAILED: return "io-failed";
	}
	return "unknown";
}
