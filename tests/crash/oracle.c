/*
 * tdax-oracle -- the crash suite's raw oracle workload and its checker, in C,
 * for machines without Python (the guest of `make vmtest`).
 *
 *   tdax-oracle run DIR ORACLE     write records into files in DIR forever;
 *                                  after each sync returns, append a line to
 *                                  ORACLE (a file or a serial port)
 *   tdax-oracle check DIR ORACLE   every acknowledged record must be in DIR;
 *                                  prints "acked N lost M" and exits 1 on loss
 *
 * Records are those of tests/crash/workloads.py: "TDXO", u32 payload length,
 * u64 sequence, u32 CRC-32 of the payload, then the payload. The files are
 * written through every path the runtime intercepts: O_APPEND write +
 * fdatasync, pwrite + fsync, writev + fdatasync, O_DSYNC writes, pwritev2
 * RWF_DSYNC; the append log is renamed every 300 records and the pwrite
 * file truncated to zero every 200 (by ftruncate, truncate and an open with
 * O_TRUNC in turn). The oracle notes a rename or truncation before it
 * happens, so a crash in between only makes the check weaker. Every 10
 * records a scratch file is created, written and synced twice, noted, and
 * unlinked (SQLite's rollback journal): if a power cut brings it back, it
 * must hold both records.
 *
 * ORACLE for check may be a block device holding the text padded with NULs;
 * a last line without its newline (cut off by the crash) is ignored.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <termios.h>
#include <unistd.h>

#define MAGIC "TDXO"
#define HDR_SIZE 20
#define MAX_FILES 256
#define NAME_MAX_LEN 256

enum kind { K_APPEND, K_PWRITE, K_WRITEV, K_DSYNC, K_RWF, K_NKINDS };

static const char *const base_name[K_NKINDS] = { "append", "pwrite", "writev", "dsync", "rwf" };

static _Noreturn void die(const char *what, const char *path)
{
	fprintf(stderr, "tdax-oracle: %s %s: %s\n", what, path, strerror(errno));
	exit(2);
}

/* Build record seq into buf; returns its length. */
static size_t make_record(char *buf, uint64_t seq)
{
	char digits[16];
	snprintf(digits, sizeof(digits), "%08llu", (unsigned long long)seq);
	size_t dl = strlen(digits), reps = 1 + seq % 7;
	uint32_t len = (uint32_t)(dl * reps);
	for (size_t i = 0; i < reps; i++)
		memcpy(buf + HDR_SIZE + i * dl, digits, dl);
	uint32_t crc = crc32_gzip_refl(0, (const unsigned char *)buf + HDR_SIZE, len);
	memcpy(buf, MAGIC, 4);
	memcpy(buf + 4, &len, 4);
	memcpy(buf + 8, &seq, 8);
	memcpy(buf + 16, &crc, 4);
	return HDR_SIZE + len;
}

static void sync_dir(const char *dir)
{
	int d = open(dir, O_RDONLY | O_DIRECTORY);
	if (d < 0 || fsync(d) != 0)
		die("cannot sync directory", dir);
	close(d);
}

__attribute__((format(printf, 2, 3))) static void note(int oracle, const char *fmt, ...)
{
	char line[600];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (write(oracle, line, (size_t)len) != len)
		die("cannot write the oracle", "");
}

static int open_oracle(const char *path)
{
	int o = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOCTTY, 0644);
	if (o < 0)
		die("cannot open oracle", path);
	struct termios t;
	if (tcgetattr(o, &t) == 0) { /* a serial port: bytes as they are */
		cfmakeraw(&t);
		tcsetattr(o, TCSANOW, &t);
	}
	return o;
}

/* A file that lives for two syncs: created, written and synced twice,
 * noted as acknowledged, removed. */
static void scratch(const char *dir, int oracle, const char *rec, size_t n, uint64_t seq)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/scratch", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, rec, n) != (ssize_t)n || fdatasync(fd) != 0 ||
	    write(fd, rec, n) != (ssize_t)n || fdatasync(fd) != 0 || close(fd) != 0)
		die("cannot write or sync", path);
	note(oracle, "scratch %llu\n", (unsigned long long)seq);
	if (unlink(path) != 0)
		die("cannot unlink", path);
}

static int run(const char *dir, const char *oracle_path)
{
	int oracle = open_oracle(oracle_path);
	int fds[K_NKINDS];
	off_t offs[K_NKINDS] = { 0 };
	unsigned gen = 0;
	char names[K_NKINDS][NAME_MAX_LEN], path[4096], rec[HDR_SIZE + 8 * 20];
	static const int flags[K_NKINDS] = { O_APPEND, 0, O_APPEND, O_APPEND | O_DSYNC, 0 };

	for (int k = 0; k < K_NKINDS; k++)
		fds[k] = -1;
	for (uint64_t seq = 1;; seq++) {
		enum kind k = (enum kind)(seq % K_NKINDS);
		if (fds[k] < 0) {
			if (k == K_APPEND)
				snprintf(names[k], NAME_MAX_LEN, "append.%u", gen);
			else
				snprintf(names[k], NAME_MAX_LEN, "%s", base_name[k]);
			snprintf(path, sizeof(path), "%s/%s", dir, names[k]);
			fds[k] = open(path, O_WRONLY | O_CREAT | flags[k], 0644);
			if (fds[k] < 0 || fsync(fds[k]) != 0)
				die("cannot create", path);
			sync_dir(dir); /* the name is durable before anything is acknowledged in it */
		}
		size_t n = make_record(rec, seq);
		struct iovec iov[2] = { { rec, 10 }, { rec + 10, n - 10 } };
		ssize_t w;
		int s = 0;
		switch (k) {
		case K_APPEND: w = write(fds[k], rec, n); s = fdatasync(fds[k]); break;
		case K_PWRITE: w = pwrite(fds[k], rec, n, offs[k]); s = fsync(fds[k]); break;
		case K_WRITEV: w = writev(fds[k], iov, 2); s = fdatasync(fds[k]); break;
		case K_DSYNC: w = write(fds[k], rec, n); break;
		default: w = pwritev2(fds[k], iov, 2, offs[k], RWF_DSYNC); break;
		}
		if (w != (ssize_t)n || s != 0)
			die("cannot write or sync a record in", names[k]);
		offs[k] += (off_t)n;
		note(oracle, "%s %llu\n", names[k], (unsigned long long)seq);

		if (k == K_APPEND && seq % 300 == 0) { /* rotate the append log */
			note(oracle, "rename %s %s.old\n", names[k], names[k]);
			char to[4200];
			snprintf(path, sizeof(path), "%s/%s", dir, names[k]);
			snprintf(to, sizeof(to), "%s.old", path);
			if (rename(path, to) != 0)
				die("cannot rename", path);
			sync_dir(dir);
			close(fds[k]);
			fds[k] = -1;
			gen++;
		} else if (k == K_PWRITE && seq % 200 == 1) { /* start the pwrite file over */
			note(oracle, "truncate %s\n", names[k]);
			snprintf(path, sizeof(path), "%s/%s", dir, names[k]);
			int how = (int)(seq / 200 % 3), t = -1;
			if ((how == 0 && ftruncate(fds[k], 0) != 0) || (how == 1 && truncate(path, 0) != 0) ||
			    (how == 2 && ((t = open(path, O_WRONLY | O_TRUNC)) < 0 || close(t) != 0)) ||
			    fsync(fds[k]) != 0)
				die("cannot truncate", names[k]);
			offs[k] = 0;
		}
		if (seq % 10 == 0)
			scratch(dir, oracle, rec, n, seq);
	}
}

/* ---- check ------------------------------------------------------------- */

struct file_seqs {
	char name[NAME_MAX_LEN];
	uint64_t *seq;
	size_t n;
};

static struct file_seqs files[MAX_FILES];
static size_t nfiles;

static struct file_seqs *find(const char *name)
{
	for (size_t i = 0; i < nfiles; i++)
		if (strcmp(files[i].name, name) == 0)
			return &files[i];
	return NULL;
}

static bool has(const char *name, uint64_t seq)
{
	const struct file_seqs *f = find(name);
	for (size_t i = 0; f && i < f->n; i++)
		if (f->seq[i] == seq)
			return true;
	return false;
}

/* The sequence numbers of the valid records of a file, up to its first torn one. */
static void scan_file(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *fp = fopen(path, "rb");
	if (!fp || nfiles == MAX_FILES)
		die("cannot read", path);
	struct file_seqs *f = &files[nfiles++];
	snprintf(f->name, sizeof(f->name), "%s", name);
	size_t cap = 0;
	unsigned char hdr[HDR_SIZE], body[4096];
	while (fread(hdr, 1, HDR_SIZE, fp) == HDR_SIZE) {
		uint32_t len, crc;
		uint64_t seq;
		memcpy(&len, hdr + 4, 4);
		memcpy(&seq, hdr + 8, 8);
		memcpy(&crc, hdr + 16, 4);
		if (memcmp(hdr, MAGIC, 4) != 0 || len > sizeof(body) || fread(body, 1, len, fp) != len ||
		    crc32_gzip_refl(0, body, len) != crc)
			break; /* a torn tail: only writes in flight may be here */
		if (f->n == cap) {
			cap = cap ? 2 * cap : 256;
			f->seq = realloc(f->seq, cap * sizeof(*f->seq));
			if (!f->seq)
				die("out of memory reading", path);
		}
		f->seq[f->n++] = seq;
	}
	fclose(fp);
}

static int check(const char *dir, const char *oracle_path)
{
	DIR *d = opendir(dir);
	if (!d)
		die("cannot open directory", dir);
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_type == DT_REG)
			scan_file(dir, e->d_name);
	closedir(d);

	FILE *o = fopen(oracle_path, "r");
	if (!o)
		die("cannot open oracle", oracle_path);
	struct ack { char name[NAME_MAX_LEN]; uint64_t seq; bool dropped; } *acks = NULL;
	size_t nacks = 0, cap = 0, nrenamed = 0;
	char line[600], renamed[MAX_FILES][2][NAME_MAX_LEN];
	/* A scratch file back from the dead: the one acknowledged last whose
	 * first record it holds must hold both. */
	const struct file_seqs *back = find("scratch");
	bool back_acked = false;
	while (fgets(line, sizeof(line), o) && line[0] && strchr(line, '\n')) {
		char a[NAME_MAX_LEN], b[NAME_MAX_LEN];
		unsigned long long seq;
		if (sscanf(line, "scratch %llu", &seq) == 1) {
			back_acked |= back && back->n && back->seq[0] == seq;
		} else if (sscanf(line, "rename %255s %255s", a, b) == 2 && nrenamed < MAX_FILES) {
			snprintf(renamed[nrenamed][0], NAME_MAX_LEN, "%s", a);
			snprintf(renamed[nrenamed++][1], NAME_MAX_LEN, "%s", b);
		} else if (sscanf(line, "truncate %255s", a) == 1) {
			for (size_t i = 0; i < nacks; i++) /* emptied on purpose: forget them */
				acks[i].dropped |= strcmp(acks[i].name, a) == 0;
		} else if (sscanf(line, "%255s %llu", a, &seq) == 2) {
			if (nacks == cap) {
				cap = cap ? 2 * cap : 1024;
				acks = realloc(acks, cap * sizeof(*acks));
				if (!acks)
					die("out of memory reading", oracle_path);
			}
			acks[nacks++] = (struct ack){ .seq = seq };
			snprintf(acks[nacks - 1].name, NAME_MAX_LEN, "%s", a);
		}
	}
	fclose(o);
	unsigned long long acked = 0, lost = 0;
	for (size_t i = 0; i < nacks; i++) {
		if (acks[i].dropped)
			continue;
		acked++;
		bool ok = has(acks[i].name, acks[i].seq);
		for (size_t r = 0; !ok && r < nrenamed; r++)
			if (strcmp(renamed[r][0], acks[i].name) == 0)
				ok = has(renamed[r][1], acks[i].seq);
		if (!ok && lost++ < 3)
			fprintf(stderr, "tdax-oracle: lost: %s %llu\n", acks[i].name,
				(unsigned long long)acks[i].seq);
	}
	free(acks);
	if (back_acked && (back->n != 2 || back->seq[1] != back->seq[0])) {
		lost++;
		fprintf(stderr, "tdax-oracle: lost: scratch %llu came back with %zu records\n",
			(unsigned long long)back->seq[0], back->n);
	}
	printf("acked %llu lost %llu\n", acked, lost);
	return lost ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "run") == 0)
		return run(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "check") == 0)
		return check(argv[2], argv[3]);
	fprintf(stderr, "usage: tdax-oracle run|check DIR ORACLE\n");
	return 2;
}
