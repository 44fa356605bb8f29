/*
 * recover -- checkpoint-or-replay of the device's live records.
 */
#define _GNU_SOURCE
#include "core/recover.h"
#include "core/sys.h"
#include "core/dirs.h"
#include "core/files.h"
#include "core/log.h"
#include "core/shadow.h"
#include "core/testaid.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A live record: a copy of its header (the region can change under
 * recovery; the copy cannot) and where its data is, checked to lie inside
 * the record's segment with the copied length. */
struct live {
	struct tdax_rec h;
	const char *data;
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
	const struct tdax_device *dev = c->dev;
	struct tdax_rec h = *r;
	const char *data = (const char *)(r + 1);
	uint64_t seg = (uint64_t)((const char *)r - dev->base - dev->sb->segs_off) / dev->sb->seg_size;
	const char *end = dev->base + dev->sb->segs_off + (seg + 1) * dev->sb->seg_size;
	if (h.len > (uint64_t)(end - data))
		return 0; /* changed since the scan checked it */
	if (h.seq > c->max_seq)
		c->max_seq = h.seq;
	if (!tdax_rec_live(dev, &h) || (c->only_file >= 0 && h.file != c->only_file))
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
	c->v[c->n++] = (struct live){ h, data };
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
	const struct tdax_rec *x = &((const struct live *)a)->h, *y = &((const struct live *)b)->h;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Test aid (test build only, src/core/testaid.h): SIGKILL ourselves after this
 * many applied records (crash tests of recovery itself); 0 = off. */
static long kill_after(void)
{
	const char *s = TDAX_TEST_ENV("RECOVER_KILL_AFTER");
	return s ? atol(s) : 0;
}

/* Whose rights recovery acts with: see recover.h. */
struct trust {
	uid_t uid;                /* the region's owner */
	gid_t gid;
	unsigned mode;
	bool shared;              /* users other than root may write a root-owned region */
};

static int region_trust(const struct tdax_device *dev, struct trust *t, struct tdax_err *err)
{
	(void)err;
	/* The owner the region had when it was opened (its descriptor's). */
	t->uid = dev->file_uid;
	t->gid = dev->file_gid;
	t->mode = (unsigned)(dev->file_mode & 07777);
	t->shared = (dev->file_mode & S_IWOTH) || ((dev->file_mode & S_IWGRP) && dev->file_gid != 0);
	return 0;
}

/* Why out ended as it did (cut short if long: a path may be). */
static void say(struct tdax_recover_file *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct tdax_recover_file *out, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
	va_end(ap);
}

static int refuse(struct tdax_recover_file *out, enum tdax_file_outcome o, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int refuse(struct tdax_recover_file *out, enum tdax_file_outcome o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
	va_end(ap);
	out->outcome = o;
	return -1;
}

/* The user to act as for entry f, and whether the file must be theirs. */
static int acting_user(const struct trust *t, const struct tdax_file *f, uid_t *uid, gid_t *gid,
		       bool *must_own, struct tdax_recover_file *out)
{
	if (t->uid != 0) {
		if (f->uid != t->uid)
			return refuse(out, TDAX_REFUSED, "the entry names uid %u, but the region belongs "
				"to uid %u: only that user's files are recovered from it", f->uid, t->uid);
		*uid = t->uid;
		*gid = t->gid;
		*must_own = true;
	} else {
		if (t->shared && f->uid == 0)
			return refuse(out, TDAX_REFUSED, "the entry names uid 0, but users other than "
				"root can write this root-owned region (mode %04o): no root file is "
				"recovered from it", t->mode);
		*uid = f->uid;
		*gid = f->gid;
		*must_own = t->shared;
	}
	uid_t me = geteuid();
	if (me != 0 && me != *uid)
		return refuse(out, TDAX_NOT_PERMITTED, "to be recovered as uid %u; run tdax recover "
			"as root or as that user", *uid);
	return 0;
}

/* Is fd still the registered file of entry f (and, if must_own, uid's)? The
 * generation can be read from an opened file only (not through O_PATH),
 * the birth time from either; where the file system has one, it must
 * match: the stored flag saying whether there was one is not believed (a
 * new file on the removed one's inode number must not take its records). */
static bool ident_matches(const struct tdax_ident *now, bool opened, const struct tdax_ident *was)
{
	return now->dev == was->dev && now->ino == was->ino &&
	       !(opened && (now->flags & TDAX_FILE_HAS_IGEN) &&
		 (!(was->flags & TDAX_FILE_HAS_IGEN) || now->igen != was->igen)) &&
	       !((now->flags & TDAX_FILE_HAS_BTIME) &&
		 (!(was->flags & TDAX_FILE_HAS_BTIME) || now->btime != was->btime));
}

/* The identity of the file recovery made anew for entry f, if it did. */
static bool remade_ident(const struct tdax_file *f, struct tdax_ident *id)
{
	if (atomic_load(&f->rt.remade.set) != 1)
		return false;
	*id = (struct tdax_ident){ f->rt.remade.dev, f->rt.remade.ino, f->rt.remade.igen,
				   f->rt.remade.btime, f->rt.remade.flags };
	return true;
}

static int same_file(int fd, bool opened, const struct tdax_file *f, uid_t uid, bool must_own,
		     struct tdax_recover_file *out)
{
	struct stat st;
	struct tdax_ident now, was = tdax_file_ident(f), remade;
	if (tdax_sys_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return refuse(out, TDAX_UNMATCHED, "the path names no regular file now (registered "
			"inode %llu); it was not opened for writing", (unsigned long long)f->ino);
	if (tdax_ident_of_fd(fd, &now) != 0 ||
	    !(ident_matches(&now, opened, &was) ||
	      (remade_ident(f, &remade) && ident_matches(&now, opened, &remade))))
		return refuse(out, TDAX_UNMATCHED, "the path now names another file (registered "
			"inode %llu on device %llu)", (unsigned long long)f->ino,
			(unsigned long long)f->dev);
	if (must_own && st.st_uid != uid)
		return refuse(out, TDAX_REFUSED, "the file belongs to uid %u, not to uid %u who may "
			"write the region: refused", (unsigned)st.st_uid, (unsigned)uid);
	return 0;
}

/* Open the registered file at path for writing, as the user the region's
 * trust allows, once its identity is checked without opening it. */
/* Act on the file system as uid/gid (root only) until as_root(). */
static bool as_user(uid_t uid, gid_t gid)
{
	if (geteuid() != 0)
		return false;
	setfsgid(gid);
	setfsuid(uid);
	return true;
}

static void as_root(bool was_other)
{
	if (was_other) {
		setfsuid(0);
		setfsgid(0);
	}
}

static int open_as_owner(const struct trust *t, const struct tdax_file *f, const char *path,
			 struct tdax_recover_file *out)
{
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;
	bool must_own = true;
	if (acting_user(t, f, &uid, &gid, &must_own, out))
		return -1;
	bool as_other = as_user(uid, gid);
	int fd = -1, e = 0;
	int pfd = tdax_sys_open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
	if (pfd < 0) {
		e = errno;
	} else if (same_file(pfd, false, f, uid, must_own, out) == 0) {
		fd = tdax_fd_reopen(pfd, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		e = fd < 0 ? errno : 0;
	}
	struct statx stx;
	bool sealed = e == EPERM && pfd >= 0 && tdax_statx_fd(pfd, STATX_TYPE, &stx) == 0 &&
		      tdax_statx_sealed(&stx);
	as_root(as_other);
	if (pfd >= 0)
		tdax_sys_close(pfd);
	if (sealed) /* made so after tdax registered it (registration refuses such a file) */
		return refuse(out, TDAX_NOT_PERMITTED, "append-only or immutable (chattr +a, +i): its "
			      "records stay in the device; chattr -a (or -i) the file and run tdax "
			      "recover again");
	/* Only a path that leads nowhere is unmatched (and may be discarded);
	 * any other failure (EMFILE, ENOMEM, EIO ...) may pass: kept. */
	if (e)
		return refuse(out, e == EACCES || e == EPERM ? TDAX_NOT_PERMITTED
				   : e == ENOENT || e == ENOTDIR || e == ELOOP ? TDAX_UNMATCHED
									       : TDAX_IO_FAILED,
			      "cannot open as uid %u: %s", (unsigned)uid, strerror(e));
	if (fd < 0)
		return -1; /* same_file said why */
	if (same_file(fd, true, f, uid, must_own, out)) {
		tdax_sys_close(fd);
		return -1;
	}
	return fd;
}

static const char *kind_name(uint16_t kind)
{
	switch (kind) {
	case TDAX_REC_TRUNCATE: return "truncate";
	case TDAX_REC_CREATE: return "emptying (its creation)";
	case TDAX_REC_FALLOCATE: return "fallocate";
	}
	return "write";
}

/* Apply one record to the file: its bytes, its truncate, its creation
 * (it was empty then), its hole or zeroed range; a rename changed only
 * where the file is. */
static int apply(int fd, const struct live *l)
{
	struct tdax_rec_falloc a;
	switch (l->h.kind) {
	case TDAX_REC_TRUNCATE: return tdax_sys_ftruncate(fd, (off_t)l->h.off);
	case TDAX_REC_CREATE: return tdax_sys_ftruncate(fd, 0);
	case TDAX_REC_RENAME: return 0;
	case TDAX_REC_FALLOCATE:
		memcpy(&a, l->data, sizeof(a)); /* the scan checked the length */
		if (!tdax_falloc_is_record((int)a.mode)) {
			errno = EINVAL; /* not a mode tdax logs: a forged record */
			return -1;
		}
		return tdax_sys_fallocate(fd, (int)a.mode, (off_t)l->h.off, (off_t)a.len);
	}
	struct iovec one = { (void *)l->data, l->h.len };
	return tdax_sys_pwritev_all(fd, &one, 1, l->h.off);
}

/* Write records written back to back (each starting where the one before
 * it ends) together: one pwritev for up to RUN of them. */
#define RUN 256

/* How many records from v[0] (of n) form such a run; 1 for any other. */
static size_t run_of(const struct live *v, size_t n)
{
	size_t k = 1;
	while (v[0].h.kind == TDAX_REC_WRITE && k < n && k < RUN && v[k].h.kind == TDAX_REC_WRITE &&
	       v[k].h.file == v[0].h.file && v[k].h.fgen == v[0].h.fgen &&
	       v[k].h.off == v[k - 1].h.off + v[k - 1].h.len)
		k++;
	return k;
}

/* Apply v[0..k), a run_of(): 0, or -1 and errno. */
static int apply_run(int fd, const struct live *v, size_t k)
{
	if (k == 1)
		return apply(fd, v);
	struct iovec iov[RUN];
	for (size_t i = 0; i < k; i++)
		iov[i] = (struct iovec){ (void *)v[i].data, v[i].h.len };
	return tdax_sys_pwritev_all(fd, iov, (int)k, v[0].h.off);
}

/*
 * Open the file of records v[0..n), wherever it is: a crash may have kept
 * or undone any of its renames, and cut the entry's path short while a
 * rename wrote it. So the names its RENAME records hold, the newest first
 * (where it went, then where it was), then the entry's path; the first
 * that leads to the registered file. -1 with out saying why if none does
 * (the last refusal, or one that is not "unmatched").
 */
static int open_anywhere(const struct trust *t, const struct tdax_file *f, const struct live *v,
			 size_t n, struct tdax_recover_file *out)
{
	for (size_t i = n; i-- > 0;) {
		char names[2 * TDAX_FILE_PATH_MAX]; /* a copy: the region may change meanwhile */
		const char *from, *to;
		if (v[i].h.kind != TDAX_REC_RENAME || v[i].h.len > sizeof(names))
			continue;
		memcpy(names, v[i].data, v[i].h.len);
		if (!tdax_rec_rename_paths(&v[i].h, names, &from, &to))
			continue;
		for (int k = 0; k < 2; k++) {
			const char *p = k ? from : to;
			int fd = open_as_owner(t, f, p, out);
			if (fd >= 0) {
				snprintf(out->path, sizeof(out->path), "%s", p);
				return fd;
			}
			if (out->outcome != TDAX_UNMATCHED)
				return -1;
		}
	}
	return open_as_owner(t, f, f->path, out);
}

/* A file whose creation is a live record, as recovery makes it again if a
 * power cut undid that creation. */
struct lost {
	char name[TDAX_FILE_PATH_MAX];       /* where it belongs */
	char tmp[TDAX_FILE_PATH_MAX + 16];   /* where it is made first */
	char aside[TDAX_FILE_PATH_MAX + 32]; /* where an older file at name went, or "" */
	uint32_t mode;                       /* its permission bits */
	uint64_t seq;                        /* of its create record */
	bool renamed;                        /* name is a rename's, not its creation's */
};

/*
 * Where a file whose creation is a live record belongs: the name it was
 * created with, or the newest a rename record gave it since; false if no
 * create record is live (its name was made durable before the records
 * went).
 */
static bool created_name(const struct live *v, size_t n, struct lost *l)
{
	bool at = false;
	for (size_t i = 0; i < n; i++) {
		const char *p = NULL, *from;
		if (v[i].h.kind == TDAX_REC_CREATE && v[i].h.len <= TDAX_FILE_PATH_MAX) {
			char copy[TDAX_FILE_PATH_MAX]; /* the region may change meanwhile */
			memcpy(copy, v[i].data, v[i].h.len);
			if ((p = tdax_rec_create_path(&v[i].h, copy)) && p[0] == '/') {
				memcpy(l->name, p, v[i].h.len);
				l->mode = (uint32_t)v[i].h.off & 07777;
				l->seq = v[i].h.seq;
				l->renamed = false;
				at = true;
			}
		} else if (at && v[i].h.kind == TDAX_REC_RENAME && v[i].h.len <= 2 * TDAX_FILE_PATH_MAX) {
			char copy[2 * TDAX_FILE_PATH_MAX];
			memcpy(copy, v[i].data, v[i].h.len);
			if (tdax_rec_rename_paths(&v[i].h, copy, &from, &p) && p[0] == '/' &&
			    strlen(p) < TDAX_FILE_PATH_MAX) {
				snprintf(l->name, sizeof(l->name), "%s", p);
				l->renamed = true;
			}
		}
	}
	return at;
}

/*
 * The name the lost file of entry f was created at (not renamed to: a
 * rename may have replaced a file there) holds a file born no later than
 * it (birth times, on the same file system; their clock ticks in jiffies,
 * so "the same tick" counts): one the application removed or renamed away
 * before it made f's file there -- the name was free then -- a removal tdax
 * held no records for, which the crash undid with the creation (a journal
 * keeps metadata changes in order). Move it aside, to
 * name.tdax-displaced.INODE, never over another file: kept, not deleted.
 * 0 with l->aside set, or -1 and errno (EEXIST: not such a file).
 */
static int displace_older(const struct tdax_file *f, struct lost *l)
{
	struct tdax_ident now, was = tdax_file_ident(f);
	if (l->renamed) {
		errno = EEXIST;
		return -1;
	}
	int pfd = tdax_sys_open(l->name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
	if (pfd < 0)
		return -1;
	int rc = tdax_ident_of_fd(pfd, &now);
	tdax_sys_close(pfd);
	if (rc != 0 || now.dev != was.dev || !(now.flags & was.flags & TDAX_FILE_HAS_BTIME) ||
	    now.btime > was.btime || (now.ino == was.ino && now.btime == was.btime)) {
		errno = EEXIST;
		return -1;
	}
	if (snprintf(l->aside, sizeof(l->aside), "%s.tdax-displaced.%llu", l->name,
		     (unsigned long long)now.ino) >= (int)sizeof(l->aside)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return (int)tdax_syscall(SYS_renameat2, AT_FDCWD, l->name, AT_FDCWD, l->aside, RENAME_NOREPLACE);
}

/*
 * The file of entry f is at none of its names, a power cut having undone
 * its creation (a create record is live, and a sync of it was answered):
 * make it anew, as its user, under a temporary name beside the one it
 * belongs at (`name`, which must be free), and note its identity in the
 * entry (rt.remade) before returning it open. The caller applies the
 * records, syncs, and gives it its name (put_in_place): a recovery cut
 * short anywhere leaves either no file at the name (made again next time)
 * or the remade one, which the next recovery takes as the entry's.
 */
static int remake(struct tdax_device *dev, const struct trust *t, const struct tdax_file *f,
		  uint32_t idx, struct lost *l, struct tdax_recover_file *out)
{
	uid_t uid;
	gid_t gid;
	bool must_own;
	if (acting_user(t, f, &uid, &gid, &must_own, out))
		return -1;
	snprintf(l->tmp, sizeof(l->tmp), "%s.tdax-remade", l->name);
	bool as_other = as_user(uid, gid);
	struct stat st;
	int fd = -1, e = 0;
	const char *at = l->tmp; /* where a failure was */
	l->aside[0] = '\0';
	if (tdax_sys_lstat(l->name, &st) == 0 ? displace_older(f, l) != 0 : errno != ENOENT)
		e = errno == ENOENT ? 0 : errno; /* ENOENT: gone meanwhile, the name is free */
	if (e)
		at = l->aside[0] ? l->aside : l->name;
	else if (tdax_sys_unlink(l->tmp) != 0 && errno != ENOENT)
		e = errno;
	else if ((fd = tdax_sys_open(l->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		e = errno;
	else if (tdax_syscall(SYS_fchmod, fd, l->mode) != 0)
		e = errno;
	as_root(as_other);
	struct tdax_ident id;
	if (!e && tdax_ident_of_fd(fd, &id) != 0)
		e = errno;
	if (e) {
		if (fd >= 0)
			tdax_sys_close(fd);
		return refuse(out, e == ENOENT || e == EEXIST ? TDAX_UNMATCHED
				   : e == EACCES || e == EPERM ? TDAX_NOT_PERMITTED : TDAX_IO_FAILED,
			      e == EEXIST ? "the path now names another file (born after it, or at a "
					    "name it was renamed to); the file, whose creation the "
					    "crash undid, was not made again"
					  : "its creation was undone by the crash, and making it again "
					    "(at %s) failed: %s", at, strerror(e));
	}
	tdax_file_set_remade(dev, tdax_file_at(dev, idx), &id);
	snprintf(out->path, sizeof(out->path), "%s", l->name);
	return fd;
}

/* The remade file tmp (synced) takes its name, never over another file,
 * and the name is made durable. */
static int put_in_place(const struct trust *t, const struct tdax_file *f, const struct lost *l,
			struct tdax_recover_file *out)
{
	uid_t uid;
	gid_t gid;
	bool must_own;
	if (acting_user(t, f, &uid, &gid, &must_own, out))
		return -1;
	bool as_other = as_user(uid, gid);
	int rc = (int)tdax_syscall(SYS_renameat2, AT_FDCWD, l->tmp, AT_FDCWD, l->name, RENAME_NOREPLACE);
	int e = errno;
	as_root(as_other);
	if (rc != 0 || tdax_sync_parent_dir(l->name) != 0) {
		if (rc == 0)
			e = errno;
		return refuse(out, TDAX_IO_FAILED, "its creation was undone by the crash; it was made "
			      "again as %s, but giving it its name failed: %s; records kept", l->tmp,
			      strerror(e));
	}
	say(out, "made anew: the crash had undone its creation%s%s",
	    l->aside[0] ? "; the older file it had brought back to the name is kept at " : "", l->aside);
	return 0;
}

/* The file of entry f, found at out->path after a power cut, had been
 * unlinked by the application: unlink it again (as its user), make that
 * durable, and let its records and entry go. */
static void unlink_again(struct tdax_device *dev, const struct trust *t, const struct tdax_file *f,
			 uint32_t idx, uint32_t gen, uint64_t last, struct tdax_recover_file *out)
{
	uid_t uid;
	gid_t gid;
	bool must_own;
	if (acting_user(t, f, &uid, &gid, &must_own, out))
		return;
	bool as_other = as_user(uid, gid);
	int rc = tdax_sys_unlink(out->path);
	int e = errno;
	as_root(as_other);
	if ((rc != 0 && e != ENOENT) || tdax_sync_parent_dir(out->path) != 0) {
		refuse(out, TDAX_IO_FAILED, "it was removed by the application and a power cut brought "
		       "it back; removing it again failed: %s; records kept", strerror(rc ? e : errno));
		return;
	}
	tdax_file_release(dev, idx, gen, last);
	tdax_files_forget(dev, idx, gen);
	snprintf(out->reason, sizeof(out->reason), "removed again: the application had removed it");
	out->outcome = TDAX_DISCARDED;
}

/* Bring one file up to date with its records v[0..n). */
static void recover_file(struct tdax_device *dev, const struct tdax_recover_opts *o,
			 const struct trust *t, struct tdax_recover_report *rep, const struct live *v,
			 size_t n, struct tdax_recover_file *out, long *budget)
{
	uint32_t idx = v[0].h.file, gen = v[0].h.fgen;
	uint64_t last = v[n - 1].h.seq;
	/* A copy of the entry: what is checked is what is used. */
	struct tdax_file entry;
	memcpy(&entry, tdax_file_at(dev, idx), sizeof(entry));
	const struct tdax_file *f = &entry;

	out->idx = idx;
	snprintf(out->path, sizeof(out->path), "%s", f->path);
	out->records = n;
	int fd = -1;
	struct lost lost;
	bool remade = false;
	if (!tdax_file_valid(f) || f->gen != gen)
		refuse(out, TDAX_UNMATCHED, "the file entry changed during recovery; run tdax "
		       "recover again");
	else
		fd = open_anywhere(t, f, v, n, out);
	/* Gone after a power cut, though created in the log, and not removed
	 * by the application; made again if its creation was acknowledged: a
	 * sync of the file was answered, or a directory sync after it (dirs.h,
	 * light_seq; any directory's: which one is not kept). */
	bool created = created_name(v, n, &lost);
	bool acked = atomic_load(&f->rt.synced) ||
		     (created && lost.seq <= atomic_load(&tdax_dirs(dev)->light_seq));
	if (fd < 0 && out->outcome == TDAX_UNMATCHED && rep->replay && !atomic_load(&f->rt.removed) &&
	    created && acked) {
		fd = remake(dev, t, f, idx, &lost, out);
		remade = fd >= 0;
	}
	if (fd < 0) {
		/* A file that is gone -- the application removed it (tdax saw
		 * it: rt.removed), it was never synced (none of its records was
		 * acknowledged: rt.synced, nor its creation by a directory
		 * sync), or the caller says to let such
		 * files go -- loses its records once its directory is synced
		 * (until then a power cut could bring it back, and then it would
		 * need them). */
		if (out->outcome == TDAX_UNMATCHED &&
		    (o->discard_unmatched || atomic_load(&f->rt.removed) || !acked) &&
		    tdax_sync_parent_dir(f->path) == 0) {
			tdax_file_release(dev, idx, gen, last);
			out->outcome = TDAX_DISCARDED;
		}
		return;
	}
	/* Unlinked by the application (its last name), and back after a
	 * power cut: its unlink was done, so it is done again -- a file the
	 * application removed never comes back (a rename over it is left:
	 * undone, the name would lead to neither file). */
	if (rep->replay && atomic_load(&f->rt.removed) == TDAX_REMOVED) {
		tdax_sys_close(fd);
		unlink_again(dev, t, f, idx, gen, last, out);
		return;
	}
	/* Same boot: the page cache has every byte -- but those of a file
	 * promoted in bypass mode (rt.deferred), which went to the device
	 * alone. A promoter that is alive wrote them in before the open above
	 * returned (the open broke its lease, preload/lease.h) and cleared
	 * rt.deferred: still set, it names a process that is dead, or dying
	 * with its files closed, or one that has just promoted and not yet
	 * written -- replaying is right for all of them. Take the release
	 * point before the sync so that it covers writers still running, and
	 * before the look at rt.deferred: a promotion after that look writes
	 * records numbered after it. */
	uint64_t now_seq = atomic_load(dev->seq);
	uint32_t deferred = atomic_load(&tdax_file_at(dev, idx)->rt.deferred);
	bool replay = rep->replay || deferred;
	uint64_t upto = replay ? last : now_seq;
	for (size_t i = 0, k; replay && i < n; i += k) {
		k = run_of(&v[i], n - i);
		if (apply_run(fd, &v[i], k) != 0) {
			const struct tdax_rec *r = &v[i].h;
			out->outcome = TDAX_IO_FAILED;
			snprintf(out->reason, sizeof(out->reason), "%s at offset %llu failed: %s; "
				 "records kept", kind_name(r->kind),
				 (unsigned long long)r->off, strerror(errno));
			tdax_sys_close(fd);
			return;
		}
		for (size_t j = i; j < i + k; j++) {
			const struct tdax_rec *r = &v[j].h;
			uint32_t bytes = r->kind == TDAX_REC_WRITE ? r->len : 0; /* file data, not names */
			out->bytes += bytes;
			rep->applied++;
			rep->bytes += bytes;
			if (*budget > 0 && --*budget == 0)
				raise(SIGKILL);
		}
	}
	tdax_shadow_before_sync(fd, f->path);
	if (tdax_sys_fdatasync(fd) != 0) {
		out->outcome = TDAX_IO_FAILED;
		snprintf(out->reason, sizeof(out->reason), "fdatasync failed: %s; records kept",
			 strerror(errno));
		tdax_sys_close(fd);
		return;
	}
	/* Its renames and creation are durable only once its directory is
	 * synced. */
	bool named = false;
	for (size_t i = 0; i < n; i++)
		named |= v[i].h.kind == TDAX_REC_RENAME || v[i].h.kind == TDAX_REC_CREATE;
	if (named && !remade && tdax_sync_parent_dir(out->path) != 0) {
		out->outcome = TDAX_IO_FAILED;
		snprintf(out->reason, sizeof(out->reason), "syncing its directory failed: %s; records "
			 "kept", strerror(errno));
		tdax_sys_close(fd);
		return;
	}
	tdax_sys_close(fd);
	if (remade && put_in_place(t, f, &lost, out) != 0)
		return;
	tdax_file_release(dev, idx, gen, upto > last ? upto : last);
	if (remade) {
		/* The entry names the lost file; the new one gets its own
		 * entry when it is next opened. */
		tdax_files_forget(dev, idx, gen);
		out->outcome = TDAX_RECOVERED;
		return;
	}
	/* Found under a name: whatever its removal left said, it has one. */
	struct tdax_file *live = tdax_file_at(dev, idx);
	if (live->gen == gen && deferred && replay) {
		atomic_compare_exchange_strong(&live->rt.deferred, &deferred, 0);
		atomic_store(&live->rt.rewrite, 0);
	}
	if (live->gen == gen && atomic_load(&live->rt.removed))
		tdax_file_set_removed(dev, live, 0);
	out->outcome = TDAX_RECOVERED;
}

/* Is the file of records v promoted by a process now dead? */
static bool orphaned(const struct tdax_device *dev, const struct live *v)
{
	if (v->h.file >= dev->sb->max_files)
		return false;
	const struct tdax_file *f = tdax_file_at(dev, v->h.file);
	return f->gen == v->h.fgen && tdax_file_orphaned(f);
}

/* Is the file of records v one the application unlinked (on a replay)? */
static bool unlinked_first(const struct tdax_device *dev, const struct tdax_recover_report *rep,
			   const struct live *v)
{
	if (!rep->replay || v->h.file >= dev->sb->max_files)
		return false;
	const struct tdax_file *f = tdax_file_at(dev, v->h.file);
	return f->gen == v->h.fgen && atomic_load(&f->rt.removed) == TDAX_REMOVED;
}

/* After a power cut, what the directory table said of the directories
 * (their change times, the changes not logged) described the page cache:
 * none of it holds, every directory's next sync is real. light_seq stays
 * (it speaks of records, not of directories). */
static void forget_dirs(struct tdax_device *dev)
{
	struct tdax_dirs *d = tdax_dirs(dev);
	atomic_store(&d->watch_left, 0);
	memset((void *)d->slot, 0, sizeof(d->slot));
	tdax_dev_persist(dev, (const void *)d, sizeof(*d));
}

int tdax_recover(struct tdax_device *dev, const struct tdax_recover_opts *o,
		 struct tdax_recover_report *rep, struct tdax_err *err)
{
	uint64_t t0 = tdax_now_ns();
	memset(rep, 0, sizeof(*rep));
	struct trust t = { .uid = (uid_t)-1, .shared = true };
	if (region_trust(dev, &t, err))
		return -1;
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
	struct tdax_scan_cb cb = { collect_rec, collect_bad, &c, .exact = !rep->replay };
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

	/* The files, each a run of records: file k's are c.v[at[k] .. at[k + 1]). */
	size_t nfiles = 0;
	size_t *at = malloc((c.n + 1) * sizeof(*at));
	for (size_t i = 0; at && i < c.n; i++)
		if (i == 0 || c.v[i].h.file != c.v[i - 1].h.file)
			at[nfiles++] = i;
	bool *first = calloc(nfiles ? nfiles : 1, sizeof(*first));
	rep->files = calloc(nfiles ? nfiles : 1, sizeof(*rep->files));
	if (!at || !first || !rep->files) {
		free(at);
		free(first);
		tdax_recover_report_free(rep);
		free(c.v);
		return tdax_errf(err, "%s: out of memory", dev->path);
	}
	at[nfiles] = c.n;
	/* Files the application unlinked go first: a power cut that brought
	 * one back may have given it the name of a file created after its
	 * unlink (SQLite's next rollback journal), which is made again only
	 * once the name is free. Which ones, decided before either pass (the
	 * first changes their entries). */
	for (size_t k = 0; k < nfiles; k++)
		first[k] = unlinked_first(dev, rep, &c.v[at[k]]);
	long budget = kill_after();
	for (int pass = 0; pass < 2; pass++) {
		for (size_t k = 0; k < nfiles; k++) {
			if (first[k] != (pass == 0) || (o->orphans_only && !orphaned(dev, &c.v[at[k]])))
				continue;
			struct tdax_recover_file *out = &rep->files[rep->nfiles++];
			recover_file(dev, o, &t, rep, &c.v[at[k]], at[k + 1] - at[k], out, &budget);
			rep->failed += out->outcome != TDAX_RECOVERED && out->outcome != TDAX_DISCARDED;
		}
	}
	free(at);
	free(first);
	free(c.v);
	tdax_log_reclaim(dev);
	if (rep->replay)
		forget_dirs(dev);
	if (rep->failed == 0 && !o->orphans_only)
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

int tdax_recover_orphans(struct tdax_device *dev, struct tdax_err *err)
{
	if (!tdax_files_orphaned(dev))
		return 0;
	struct tdax_recover_report r;
	int rc = tdax_recover(dev, &(struct tdax_recover_opts){ .orphans_only = true }, &r, err);
	if (rc >= 0)
		tdax_recover_report_free(&r);
	return rc;
}

int tdax_replay_file(struct tdax_device *dev, uint32_t idx, uint32_t gen, int fd)
{
	/* Through an O_APPEND descriptor (the application's): lifted while
	 * replaying (util.h). */
	int lifted = tdax_append_lift(fd);
	if (lifted < 0)
		return -1;
	struct collect c = { .dev = dev, .only_file = idx };
	/* (Same boot: a demotion or a rewrite after an error.) */
	tdax_log_scan(dev, &(struct tdax_scan_cb){ collect_rec, collect_bad, &c, .exact = true });
	int rc = c.oom ? -1 : 0;
	if (c.n)
		qsort(c.v, c.n, sizeof(*c.v), by_file_seq);
	for (size_t i = 0, k; rc == 0 && i < c.n; i += k) {
		k = run_of(&c.v[i], c.n - i);
		if (c.v[i].h.fgen == gen)
			rc = apply_run(fd, &c.v[i], k);
	}
	free(c.v);
	if (lifted)
		tdax_append_restore(fd);
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
	case TDAX_REFUSED: return "refused";
	}
	return "unknown";
}
