/*
 * cache -- bypass mode's block cache (cache.h): the blocks, their arenas,
 * the pool of free blocks and the S3-FIFO queues.
 */
#define _GNU_SOURCE
#include "preload/cache.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/testaid.h"
#include "core/util.h"
#include "policy/s3fifo.h"
#include "preload/state.h"
#include "preload/wake.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A block's state: its arena not claimed, in the pool, a file's, or
 * dropped by its file (back to the pool at the write-back thread's pass). */
enum { NONE = 0, FREE, USED, DROPPED };

struct block {
	char *mem;                 /* in the device */
	_Atomic uint32_t state;
	_Atomic uint32_t next;     /* the pool's link: block + 1 */
	uint32_t file;             /* USED: its file's entry (under its lock) */
	uint64_t bno;              /* and where in it */
	uint32_t hi;               /* bytes [0, hi) are the file's */
	_Atomic uint32_t wver;     /* writes into it */
	uint32_t cver;             /* the writes its file has (written back) */
	uint32_t fver;             /* a checkpoint's: its writes when marked (flushing) */
	bool flushing;
	_Atomic uint32_t hits;     /* accesses S3-FIFO has not counted yet */
};

/* Blocks free after a pass at least: a quarter of the share, from 16 to
 * 1,024 (a writer at a GB/s takes 250 of 4 KiB between two passes). */
#define POOL_MIN 16u
#define POOL_MAX 1024u
/* No block in use for this long: the arenas go back to the log. */
#define IDLE_NS 1000000000ull
/* Blocks written into the file in one call. */
#define BATCH 64

static struct {
	struct tdax_device *dev;
	uint32_t size, shift;      /* a block's bytes, their log2 */
	uint32_t per_arena;        /* blocks in one arena */
	uint32_t max_arenas;       /* room in the arrays: the whole log's */
	uint32_t limit;            /* arenas the share allows now */
	uint32_t narenas;          /* arenas claimed (above limit: the last ones go back) */
	uint32_t *arena;           /* arena i's segment */
	struct block *b;           /* max_arenas * per_arena, touched as claimed */
	uint32_t nb;               /* blocks of the arenas claimed */
	uint32_t retire;           /* the next block a shrinking share evicts */
	_Atomic uint64_t pool;     /* tag << 32 | block + 1 */
	_Atomic uint32_t nfree;
	uint32_t want;             /* free blocks a pass leaves */
	_Atomic uint64_t changes;  /* blocks taken or dropped since init */
	uint64_t seen;             /* the changes the queues have */
	struct tdax_s3fifo q;
	void *qmem;
	_Atomic uint64_t share;    /* bytes the selection gives it (tdax_cache_set_share) */
	_Atomic bool wanted;       /* arenas are claimed only while blocks are wanted */
	_Atomic bool prepared;     /* tdax_cache_prepare wanted them */
	uint64_t idle_since;       /* coarse ns; 0: a block is in use */
} c;

static size_t blocks_bytes(void)
{
	return (size_t)c.max_arenas * c.per_arena * sizeof(*c.b);
}

static size_t queues_bytes(void)
{
	return tdax_s3fifo_bytes(c.max_arenas * c.per_arena);
}

/* Zeroed address space for the arrays (at, if not NULL: the same place
 * anew, in a fork's child): only the pages the claimed arenas' blocks use
 * are ever touched, whatever the share grows to. */
static void *zeroed(void *at, size_t bytes)
{
	void *m = tdax_sys_mmap(at, bytes, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (at ? MAP_FIXED : 0), -1, 0);
	return m == MAP_FAILED ? NULL : m;
}

bool tdax_cache_init(struct tdax_device *dev)
{
	struct tdax_log_usage u;
	tdax_log_usage(dev, &u);
	struct tdax_tunables t;
	tdax_bypass_tunables(dev, &t);
	uint32_t seg = dev->sb->seg_size;
	uint64_t bs = t.bypass_block < seg / 2 ? t.bypass_block : seg / 2;
	c.shift = 63u - (uint32_t)__builtin_clzll(bs); /* a power of two, rounded down */
	c.size = 1u << c.shift;
	c.per_arena = seg / c.size - 1; /* the first block's room holds the header */
	c.max_arenas = (uint32_t)(u.capacity / seg) ? (uint32_t)(u.capacity / seg) : 1;
	c.arena = calloc(c.max_arenas, sizeof(*c.arena));
	c.b = zeroed(NULL, blocks_bytes());
	c.qmem = zeroed(NULL, queues_bytes());
	if (!c.arena || !c.b || !c.qmem)
		return false;
	tdax_s3fifo_init(&c.q, c.max_arenas * c.per_arena, c.qmem);
	c.dev = dev;
	return true;
}

/* ---- the pool: a lock-free stack, tagged against ABA ----------------- */

static int64_t take(void)
{
	uint64_t h = atomic_load(&c.pool);
	uint32_t top;
	do {
		top = (uint32_t)h;
		if (!top)
			return -1;
	} while (!atomic_compare_exchange_weak(&c.pool, &h,
					       ((h >> 32) + 1) << 32 | atomic_load(&c.b[top - 1].next)));
	if (atomic_fetch_sub(&c.nfree, 1) <= c.want / 2)
		tdax_wake();
	return top - 1;
}

/* The blocks below it stay; those above are of arenas going back to the
 * log (the share shrank). */
static uint32_t keep(void)
{
	return (c.narenas < c.limit ? c.narenas : c.limit) * c.per_arena;
}

/* Block id free (by the write-back thread only): into the pool, or out
 * of use if its arena goes back. */
static void give(uint32_t id)
{
	if (id >= keep()) {
		atomic_store(&c.b[id].state, NONE);
		return;
	}
	atomic_store(&c.b[id].state, FREE);
	uint64_t h = atomic_load(&c.pool);
	do
		atomic_store(&c.b[id].next, (uint32_t)h);
	while (!atomic_compare_exchange_weak(&c.pool, &h, ((h >> 32) + 1) << 32 | (id + 1)));
	atomic_fetch_add(&c.nfree, 1);
}

void tdax_cache_prepare(void)
{
	if (c.dev && !atomic_load_explicit(&c.prepared, memory_order_relaxed) && !atomic_exchange(&c.prepared, true)) {
		atomic_store(&c.wanted, true);
		tdax_wake();
	}
}

/* ---- a file's blocks ------------------------------------------------- */

bool tdax_cache_promote(struct tdax_cached *f, uint32_t idx, uint64_t ksize)
{
	if (!f->map) {
		void *m = zeroed(NULL, TDAX_CACHE_MAP_BLOCKS * sizeof(*f->map));
		if (!m)
			return false;
		f->map = m;
		f->lo = UINT64_MAX;
		f->hi = 0;
	}
	/* No free block yet: the write-back thread claims arenas now, and the
	 * file is promoted at a later sync (its first writes would otherwise
	 * find no block and go to the kernel). */
	atomic_store(&c.wanted, true);
	if (!atomic_load(&c.nfree)) {
		tdax_wake();
		return false;
	}
	f->idx = idx;
	f->ksize = ksize;
	f->drop = false;
	return true;
}

static struct block *cached(const struct tdax_cached *f, uint64_t bno)
{
	uint32_t id = bno < TDAX_CACHE_MAP_BLOCKS ? atomic_load_explicit(&f->map[bno], memory_order_relaxed) : 0;
	return id ? &c.b[id - 1] : NULL;
}

/* Copy len bytes from byte pos of iov[0..n) to dst (or the other way). */
static void gather(char *dst, const struct iovec *iov, int n, size_t pos, size_t len)
{
	for (int i = 0; i < n && len > 0; i++) {
		if (pos >= iov[i].iov_len) {
			pos -= iov[i].iov_len;
			continue;
		}
		size_t k = iov[i].iov_len - pos < len ? iov[i].iov_len - pos : len;
		memcpy(dst, (const char *)iov[i].iov_base + pos, k);
		dst += k;
		len -= k;
		pos = 0;
	}
}

static void scatter(const struct iovec *iov, int n, size_t pos, const char *src, size_t len)
{
	for (int i = 0; i < n && len > 0; i++) {
		if (pos >= iov[i].iov_len) {
			pos -= iov[i].iov_len;
			continue;
		}
		size_t k = iov[i].iov_len - pos < len ? iov[i].iov_len - pos : len;
		if (src)
			memcpy((char *)iov[i].iov_base + pos, src, k);
		else
			memset((char *)iov[i].iov_base + pos, 0, k);
		len -= k;
		if (src)
			src += k;
		pos = 0;
	}
}

/* The bytes [off, off + len) of block k's place in the file into iov at
 * pos: what k holds, zeros past its end. */
static void out_of(const struct block *k, uint32_t off, const struct iovec *iov, int n, size_t pos, size_t len)
{
	size_t have = k->hi > off ? k->hi - off : 0;
	if (have > len)
		have = len;
	scatter(iov, n, pos, k->mem + off, have);
	scatter(iov, n, pos + have, NULL, len - have);
}

/*
 * A free block for block bno of f (locked), about to take a write of
 * [off, off + len) of it: filled from the file through fd first if the file
 * has bytes there the write does not cover. NULL if none can be had.
 */
static struct block *allocate(struct tdax_cached *f, int fd, uint64_t bno, uint32_t off, uint32_t len)
{
	if (bno >= TDAX_CACHE_MAP_BLOCKS)
		return NULL;
	int64_t id = take();
	if (id < 0) {
		atomic_store(&c.wanted, true); /* (the arenas went back while it was idle) */
		tdax_wake();
		return NULL;
	}
	struct block *k = &c.b[id];
	uint64_t start = bno << c.shift;
	uint32_t file_has = f->ksize > start ? (uint32_t)(f->ksize - start < c.size ? f->ksize - start : c.size) : 0;
	k->hi = 0;
	if (file_has && !(off == 0 && len >= file_has)) {
		ssize_t r = tdax_sys_pread(fd, k->mem, file_has, (off_t)start);
		if (r < 0) { /* a block not to be trusted: dropped, the write goes to the file */
			atomic_store(&k->state, DROPPED);
			atomic_fetch_add(&c.changes, 1);
			return NULL;
		}
		memset(k->mem + r, 0, file_has - (size_t)r);
		k->hi = file_has;
		tdax_count(TDAX_ST_CACHE_FILLS, 1);
	}
	k->file = f->idx;
	k->bno = bno;
	k->cver = atomic_load(&k->wver);
	atomic_store(&k->hits, 0);
	atomic_store(&k->state, USED);
	uint32_t none = 0;
	if (!atomic_compare_exchange_strong(&f->map[bno], &none, (uint32_t)id + 1)) {
		/* A signal handler's write took one first: its block it is. */
		atomic_store(&k->state, DROPPED);
		atomic_fetch_add(&c.changes, 1);
		return &c.b[none - 1];
	}
	atomic_fetch_add(&c.changes, 1);
	f->blocks++;
	f->lo = bno < f->lo ? bno : f->lo;
	f->hi = bno + 1 > f->hi ? bno + 1 : f->hi;
	return k;
}

/* len bytes from byte pos of iov into block k at off. */
static void put_in(struct block *k, uint32_t off, const struct iovec *iov, int n, size_t pos, uint32_t len)
{
	if (off > k->hi)
		memset(k->mem + k->hi, 0, off - k->hi); /* a hole: zeros, as the file would read */
	gather(k->mem + off, iov, n, pos, len);
	if (off + len > k->hi)
		k->hi = off + len;
	/* Not a locked add: one would wait for the write-back of the record
	 * just appended. Every writer holds the file's lock, and so does
	 * every reader of the version; a signal handler's write that lands
	 * between this load and store is over before it, so the version
	 * still moves past any taken before either write. */
	atomic_store_explicit(&k->wver, atomic_load_explicit(&k->wver, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/* Write the pieces iov[0..cnt) at off into the file through fd, O_APPEND
 * lifted (*lifted: -1 not yet asked, else tdax_append_lift's answer). */
static int into_file(int fd, struct iovec *iov, int cnt, uint64_t off, int *lifted)
{
	if (*lifted < 0 && (*lifted = tdax_append_lift(fd)) < 0)
		return -1;
	return tdax_sys_pwritev_all(fd, iov, cnt, off);
}

/* The part of [at + pos, at + len) in one block: its length; the block's
 * number and the part's offset in it. */
static uint32_t part(uint64_t at, size_t pos, size_t len, uint64_t *bno, uint32_t *off)
{
	*bno = (at + pos) >> c.shift;
	*off = (uint32_t)((at + pos) & (c.size - 1));
	return c.size - *off < len - pos ? c.size - *off : (uint32_t)(len - pos);
}

/* Block bno of f, or NULL, counted as a hit or a miss. */
static struct block *look(struct tdax_cached *f, uint64_t bno)
{
	struct block *k = cached(f, bno);
	/* (Into the process's counters later, tdax_cache_count: a locked add
	 * here, after the record's write-back began, would wait for it.) */
	if (k)
		f->hits++;
	else
		f->misses++;
	return k;
}

void tdax_cache_count(struct tdax_cached *f)
{
	tdax_count(TDAX_ST_CACHE_HITS, f->hits - f->hits_counted);
	tdax_count(TDAX_ST_CACHE_MISSES, f->misses - f->misses_counted);
	f->hits_counted = f->hits;
	f->misses_counted = f->misses;
}

/* An access S3-FIFO counts: a read, or a write over bytes the block has
 * (an append into it is the one access that filled it). A load and a
 * store, no locked add (it would wait for the record's write-back, begun
 * just before), up to the count S3-FIFO saturates at: its callers hold the
 * file's lock; the write-back's exchange (hits_of) between the two may
 * leave one access counted twice, which the saturation absorbs. */
static void accessed(struct block *k)
{
	uint32_t h = atomic_load_explicit(&k->hits, memory_order_relaxed);
	if (h < TDAX_S3FIFO_FREQ_MAX)
		atomic_store_explicit(&k->hits, h + 1, memory_order_relaxed);
}

/* Until no write of the write-back thread into f's file is in flight (its
 * evictions and checkpoint flushes: each begins under f's lock). */
static void writes_out(struct tdax_cached *f)
{
	while (atomic_load(&f->evicting))
		sched_yield();
}

/* No block for len bytes from byte pos of iov: into the file at `at` now
 * (a hole the cache has below them reads as zeros there meanwhile, and the
 * cache's bytes win over it). On a kernel without RWF_NOAPPEND (sys.h),
 * not while the write-back thread writes into the file: its descriptor (a
 * pidfd_getfd copy) shares the open file, and so its O_APPEND, with this
 * one; one side giving the flag back while the other's write is under way
 * would put that write at the file's end, far from its offset (the crash
 * suite caught 63 blocks missing from the middle of a Redis AOF). f's lock,
 * which the caller holds, keeps new ones from beginning. */
static int past_the_cache(struct tdax_cached *f, int fd, uint64_t at, const struct iovec *iov, int n, size_t pos,
			  uint32_t len, int *lifted)
{
	char piece[4096];
	int rc = 0;
	if (*lifted < 0 && !tdax_sys_noappend())
		writes_out(f);
	for (uint32_t done = 0; done < len && rc == 0;) {
		uint32_t m = len - done < sizeof(piece) ? len - done : (uint32_t)sizeof(piece);
		gather(piece, iov, n, pos + done, m);
		struct iovec v = { piece, m };
		rc = into_file(fd, &v, 1, at + done, lifted);
		done += m;
	}
	if (rc == 0 && at + len > f->ksize)
		f->ksize = at + len;
	tdax_count(TDAX_ST_CACHE_NOBLOCK, 1);
	return rc;
}

int tdax_cache_write(struct tdax_cached *f, int fd, uint64_t at, const struct iovec *iov, int n, size_t len)
{
	int lifted = -1, rc = 0;
	for (size_t pos = 0; pos < len && rc == 0;) {
		uint64_t bno;
		uint32_t off, k_len = part(at, pos, len, &bno, &off);
		struct block *k = look(f, bno);
		if (k && off < k->hi)
			accessed(k);
		if (!k)
			k = allocate(f, fd, bno, off, k_len);
		if (k)
			put_in(k, off, iov, n, pos, k_len);
		else
			rc = past_the_cache(f, fd, at + pos, iov, n, pos, k_len, &lifted);
		pos += k_len;
	}
	if (lifted > 0)
		tdax_append_restore(fd);
	return rc;
}

bool tdax_cache_read(struct tdax_cached *f, uint64_t at, const struct iovec *iov, int n, size_t len)
{
	if (!len)
		return true;
	uint64_t first = at >> c.shift, last = (at + len - 1) >> c.shift;
	for (uint64_t bno = first; bno <= last; bno++)
		if (!cached(f, bno))
			return false;
	tdax_cache_overlay(f, at, iov, n, len);
	return true;
}

void tdax_cache_overlay(struct tdax_cached *f, uint64_t at, const struct iovec *iov, int n, size_t len)
{
	for (size_t pos = 0; pos < len;) {
		uint64_t bno;
		uint32_t off, k_len = part(at, pos, len, &bno, &off);
		struct block *k = look(f, bno);
		if (k) {
			out_of(k, off, iov, n, pos, k_len);
			accessed(k);
		}
		pos += k_len;
	}
}

static bool dirty(const struct block *k)
{
	return atomic_load(&k->wver) != k->cver;
}

/* Write the dirty blocks ks[0..n) (in file order) into the file through fd:
 * neighbours, each whole but the last, in one call. */
static int write_blocks(struct block *const *ks, uint32_t n, int fd, int *lifted)
{
	struct iovec iov[BATCH];
	int cnt = 0, rc = 0;
	uint64_t start = 0, next = 0;
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		const struct block *k = ks[i];
		uint64_t at = k->bno << c.shift;
		if (cnt && (at != next || cnt == BATCH)) {
			rc = into_file(fd, iov, cnt, start, lifted);
			cnt = 0;
		}
		if (!cnt)
			start = at;
		iov[cnt++] = (struct iovec){ k->mem, k->hi };
		next = k->hi == c.size ? at + c.size : UINT64_MAX;
		tdax_count(TDAX_ST_CACHE_WRITEBACKS, 1);
	}
	if (rc == 0 && cnt)
		rc = into_file(fd, iov, cnt, start, lifted);
	return rc;
}

/* Write the blocks of f numbered [lo, hi) that `which` takes into the
 * file through fd (O_APPEND lifted meanwhile), in file order. */
static int write_range(struct tdax_cached *f, uint64_t lo, uint64_t hi, bool (*which)(const struct block *),
		       int fd)
{
	struct block *ks[BATCH];
	uint32_t n = 0;
	int lifted = -1, rc = 0;
	for (uint64_t bno = lo; bno < hi && rc == 0; bno++) {
		struct block *k = cached(f, bno);
		if (!k || !which(k))
			continue;
		ks[n++] = k;
		if (n == BATCH) {
			rc = write_blocks(ks, n, fd, &lifted);
			n = 0;
		}
	}
	if (rc == 0 && n)
		rc = write_blocks(ks, n, fd, &lifted);
	if (lifted > 0)
		tdax_append_restore(fd); /* (errno kept) */
	return rc;
}

static bool to_write(const struct block *k)
{
	return dirty(k) && k->hi;
}

static bool marked(const struct block *k)
{
	return k->flushing;
}

int tdax_cache_write_back(struct tdax_cached *f, int fd)
{
	f->drop = true;
	if (!f->map)
		return 0;
	writes_out(f); /* (no lock needed for those: they end) */
	return write_range(f, f->lo, f->hi, to_write, fd);
}

void tdax_cache_flush_begin(struct tdax_cached *f)
{
	f->flo = f->lo;
	f->fhi = f->hi;
	for (uint64_t bno = f->flo; bno < f->fhi; bno++) {
		struct block *k = cached(f, bno);
		if (k && to_write(k)) {
			k->fver = atomic_load(&k->wver);
			k->flushing = true;
		}
	}
	atomic_fetch_add(&f->evicting, 1);
}

int tdax_cache_flush_write(struct tdax_cached *f, int fd)
{
	/* (Only this thread frees blocks, and a demotion waits for it: the
	 * marked blocks stay where they are; new ones are not marked.) */
	int rc = write_range(f, f->flo, f->fhi, marked, fd);
	atomic_fetch_sub(&f->evicting, 1);
	return rc;
}

void tdax_cache_flush_end(struct tdax_cached *f, bool written)
{
	for (uint64_t bno = f->flo; bno < f->fhi; bno++) {
		struct block *k = cached(f, bno);
		if (!k || !k->flushing)
			continue;
		k->flushing = false;
		if (written && atomic_load(&k->wver) == k->fver)
			k->cver = k->fver;
	}
}

/* f holds no block now. */
static void emptied(struct tdax_cached *f)
{
	f->blocks = 0;
	f->lo = UINT64_MAX;
	f->hi = 0;
	f->drop = false;
}

void tdax_cache_drop(struct tdax_cached *f)
{
	tdax_cache_count(f);
	for (uint64_t bno = f->lo; f->map && bno < f->hi; bno++) {
		uint32_t id = atomic_exchange_explicit(&f->map[bno], 0, memory_order_relaxed);
		if (id) {
			c.b[id - 1].cver = atomic_load(&c.b[id - 1].wver);
			atomic_store(&c.b[id - 1].state, DROPPED);
		}
	}
	atomic_fetch_add(&c.changes, 1);
	emptied(f);
}

/* ---- the write-back thread ------------------------------------------ */

static uint64_t key_of(const struct block *k)
{
	return (uint64_t)(k->file + 1) << 40 ^ k->bno;
}

/* Segments the log keeps free whatever the cache wants: every write of a
 * promoted file is a record first. */
static bool log_has_room(void)
{
	struct tdax_log_usage u;
	tdax_log_usage(c.dev, &u);
	return u.segs_free > c.dev->sb->nsegs / 4;
}

/* The pool's watermark follows the share; the queues' size, the blocks
 * kept. */
static void sized(void)
{
	uint32_t n = c.limit * c.per_arena, k = keep();
	c.want = n / 4 < POOL_MIN ? POOL_MIN : n / 4 > POOL_MAX ? POOL_MAX : n / 4;
	if (c.want > n)
		c.want = n;
	tdax_s3fifo_resize(&c.q, k ? k : 1);
}

static bool claim_arena(void)
{
	if (c.narenas >= c.limit || !log_has_room())
		return false;
	int64_t seg = tdax_log_claim_arena(c.dev);
	if (seg < 0)
		return false;
	char *base = (char *)tdax_seg_at(c.dev, (uint32_t)seg);
	tdax_device_prefault(c.dev, base, c.dev->sb->seg_size); /* no fault on a writer's path */
	uint32_t a = c.narenas++, first = a * c.per_arena;
	c.arena[a] = (uint32_t)seg;
	c.nb = c.narenas * c.per_arena;
	sized();
	for (uint32_t i = 0; i < c.per_arena; i++) {
		c.b[first + i].mem = base + (uint64_t)(i + 1) * c.size;
		give(first + i);
	}
	return true;
}

/* The free blocks from block `from` on out of the pool, out of use (the
 * pool emptied first: a writer finding it empty meanwhile writes into the
 * file; the others go back). How many came out. */
static uint32_t pull_out(uint32_t from)
{
	uint32_t got = 0, back = 0; /* back: a chain through next, block + 1 */
	int64_t id;
	while ((id = take()) >= 0) {
		if ((uint32_t)id >= from) {
			atomic_store(&c.b[id].state, NONE);
			got++;
		} else {
			atomic_store(&c.b[id].next, back);
			back = (uint32_t)id + 1;
		}
	}
	while (back) {
		uint32_t next = atomic_load(&c.b[back - 1].next);
		give(back - 1);
		back = next;
	}
	return got;
}

/* The last arena back to the log (none of its blocks in use). */
static void release_last(void)
{
	uint32_t a = --c.narenas;
	tdax_log_release_arena(c.dev, c.arena[a], (uint64_t)c.dev->sb->seg_size);
	for (uint32_t i = a * c.per_arena; i < c.nb; i++) {
		c.b[i].mem = NULL;
		tdax_s3fifo_remove(&c.q, i);
	}
	c.nb = c.narenas * c.per_arena;
	sized();
}

static bool arena_unused(uint32_t a)
{
	for (uint32_t i = a * c.per_arena; i < (a + 1) * c.per_arena; i++)
		if (atomic_load(&c.b[i].state) != NONE)
			return false;
	return true;
}

/* Every arena back to the log, if no block is in use and none is taken
 * meanwhile; none is claimed again until blocks are wanted. */
static void release_arenas(void)
{
	atomic_store(&c.wanted, false); /* (before: a promotion from now on wants them again) */
	if (pull_out(0) < c.nb) { /* one is in use after all */
		atomic_store(&c.wanted, true);
		for (uint32_t i = 0; i < c.nb; i++)
			if (atomic_load(&c.b[i].state) == NONE)
				give(i);
		return;
	}
	while (c.narenas)
		release_last();
}

void tdax_cache_set_share(uint64_t bytes)
{
	atomic_store_explicit(&c.share, bytes, memory_order_relaxed);
}

/* The share now (the selection sets it; tdax set changes it at run time):
 * a smaller one takes the free blocks of the arenas past it out of the
 * pool, and has their blocks in use evicted (tdax_cache_victims); a larger
 * one puts back those a smaller one had taken out, and claims more as
 * needed. */
static void follow_the_share(void)
{
	uint64_t share = atomic_load_explicit(&c.share, memory_order_relaxed);
	uint32_t limit = (uint32_t)(share / c.dev->sb->seg_size);
	limit = !limit ? 1 : limit > c.max_arenas ? c.max_arenas : limit;
	if (limit == c.limit)
		return;
	uint32_t was = keep();
	c.limit = limit;
	sized();
	if (keep() < was) {
		pull_out(keep());
	} else {
		for (uint32_t i = was; i < keep(); i++)
			if (atomic_load(&c.b[i].state) == NONE)
				give(i);
	}
}

/* Blocks taken since the last look into the queues; dropped ones back in
 * the pool. */
static void recycle(void)
{
	uint64_t ch = atomic_load(&c.changes);
	if (ch != c.seen) {
		c.seen = ch;
		for (uint32_t i = 0; i < c.nb; i++) {
			uint32_t s = atomic_load(&c.b[i].state);
			if (s == USED && !tdax_s3fifo_queued(&c.q, i)) {
				tdax_s3fifo_insert(&c.q, i, key_of(&c.b[i]));
			} else if (s == DROPPED) {
				tdax_s3fifo_remove(&c.q, i);
				give(i);
			}
		}
	}
}

#ifdef TDAX_TEST_BUILD
/* Test aid (src/core/testaid.h): the pool's giving and the queues have one
 * user at a time (the pass, writeback.c); a second one aborts the test
 * build. While the file TDAX_TEST_SERVE_PAUSE_IF names exists, a serve
 * waits 300 ms inside: the window another would fall into. */
static _Atomic int users;

static void enter(bool serving)
{
	if (atomic_fetch_add(&users, 1)) {
		static const char m[] = "tdax: two users of the block cache's pool at once\n";
		tdax_syscall(SYS_write, 2, m, sizeof(m) - 1);
		abort();
	}
	const char *flag = TDAX_TEST_ENV("SERVE_PAUSE_IF");
	if (serving && flag && access(flag, F_OK) == 0)
		usleep(300000);
}

static void leave(void)
{
	atomic_fetch_sub(&users, 1);
}

/* A fork's child: the parent's write-back thread, in a pass perhaps, is
 * not in it. */
static void forked(void)
{
	atomic_store(&users, 0);
}
#else
static void enter(bool serving)
{
	(void)serving;
}

static void leave(void)
{
}

static void forked(void)
{
}
#endif

static bool serve(void)
{
	follow_the_share();
	recycle();
	while (c.narenas > c.limit && arena_unused(c.narenas - 1))
		release_last();
	c.retire = keep();
	while (atomic_load(&c.wanted) && atomic_load(&c.nfree) < c.want && claim_arena())
		;
	uint64_t now = tdax_coarse_ns();
	if (c.nb && atomic_load(&c.nfree) == c.nb) {
		if (!c.idle_since)
			c.idle_since = now;
		else if (now - c.idle_since > IDLE_NS)
			release_arenas();
	} else {
		c.idle_since = 0;
	}
	return c.nb && (atomic_load(&c.nfree) < c.want || c.retire < c.nb);
}

bool tdax_cache_serve(void)
{
	if (!c.dev)
		return false;
	enter(true);
	bool more = serve();
	leave();
	return more;
}

static uint32_t hits_of(void *ctx, uint32_t id)
{
	(void)ctx;
	return atomic_exchange_explicit(&c.b[id].hits, 0, memory_order_relaxed);
}

uint32_t tdax_cache_victims(struct tdax_cache_victim *v, uint32_t max)
{
	uint32_t n = 0;
	/* The blocks in use of arenas going back, once each a pass. */
	for (; n < max && c.retire < c.nb; c.retire++)
		if (atomic_load(&c.b[c.retire].state) == USED) {
			tdax_s3fifo_remove(&c.q, c.retire);
			v[n++] = (struct tdax_cache_victim){ .block = c.retire, .file = c.b[c.retire].file };
		}
	while (n < max && atomic_load(&c.nfree) + n < c.want) {
		uint32_t id = tdax_s3fifo_evict(&c.q, hits_of, NULL);
		if (id == TDAX_S3FIFO_NONE)
			break;
		if (atomic_load(&c.b[id].state) == USED)
			v[n++] = (struct tdax_cache_victim){ .block = id, .file = c.b[id].file };
	}
	return n;
}

static bool still_its(const struct tdax_cached *f, uint32_t id)
{
	const struct block *k = &c.b[id];
	return atomic_load(&k->state) == USED && k->file == f->idx && cached(f, k->bno) == k;
}

void tdax_cache_evict_begin(struct tdax_cached *f, struct tdax_cache_victim *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		v[i].take = still_its(f, v[i].block);
		if (v[i].take)
			v[i].ver = atomic_load(&c.b[v[i].block].wver);
	}
	atomic_fetch_add(&f->evicting, 1);
}

int tdax_cache_evict_write(struct tdax_cached *f, const struct tdax_cache_victim *v, uint32_t n, int fd)
{
	struct block *ks[BATCH];
	uint32_t m = 0;
	int lifted = -1, rc = 0;
	for (uint32_t i = 0; i < n && m < BATCH; i++)
		if (v[i].take && v[i].ver != c.b[v[i].block].cver && c.b[v[i].block].hi)
			ks[m++] = &c.b[v[i].block];
	/* (In file order: victims come in the queues' order.) */
	for (uint32_t i = 1; i < m; i++)
		for (uint32_t j = i; j > 0 && ks[j - 1]->bno > ks[j]->bno; j--) {
			struct block *t = ks[j - 1];
			ks[j - 1] = ks[j];
			ks[j] = t;
		}
	if (m && fd >= 0)
		rc = write_blocks(ks, m, fd, &lifted);
	else if (m)
		rc = -1;
	if (lifted > 0)
		tdax_append_restore(fd);
	atomic_fetch_sub(&f->evicting, 1);
	return rc;
}

void tdax_cache_evict_end(struct tdax_cached *f, struct tdax_cache_victim *v, uint32_t n, bool written)
{
	for (uint32_t i = 0; i < n; i++) {
		if (!v[i].take || !still_its(f, v[i].block))
			continue;
		struct block *k = &c.b[v[i].block];
		if (written && atomic_load(&k->wver) == v[i].ver) {
			uint64_t end = (k->bno << c.shift) + k->hi;
			if (end > f->ksize)
				f->ksize = end;
			atomic_store(&f->map[k->bno], 0);
			f->blocks--;
			give(v[i].block);
			tdax_count(TDAX_ST_CACHE_EVICTIONS, 1);
		} else {
			/* Written to meanwhile (or not written back): it stays. */
			tdax_s3fifo_insert(&c.q, v[i].block, key_of(k));
			tdax_s3fifo_hit(&c.q, v[i].block, 1);
		}
	}
}

void tdax_cache_release_all(void)
{
	if (!c.dev)
		return;
	enter(false);
	recycle(); /* the dropped ones back in the pool */
	if (c.nb && atomic_load(&c.nfree) == c.nb)
		release_arenas();
	atomic_store(&c.wanted, false); /* the exit's last pass claims none */
	leave();
}

void tdax_cache_after_fork_child(void)
{
	if (!c.dev)
		return;
	forked();
	/* (Fresh pages: the arrays' used part is copied, untouched.) */
	if (!zeroed(c.b, blocks_bytes()) || !zeroed(c.qmem, queues_bytes())) {
		c.dev = NULL; /* no blocks in this child: its promoted files' writes go into them */
		return;
	}
	tdax_s3fifo_init(&c.q, c.max_arenas * c.per_arena, c.qmem);
	atomic_store(&c.pool, 0);
	atomic_store(&c.nfree, 0);
	c.narenas = c.nb = c.limit = 0;
	c.seen = atomic_load(&c.changes);
	c.idle_since = 0;
	atomic_store(&c.wanted, false);
	atomic_store(&c.prepared, false);
}

void tdax_cache_forget(struct tdax_cached *f)
{
	if (f->map)
		tdax_syscall(SYS_madvise, f->map, TDAX_CACHE_MAP_BLOCKS * sizeof(*f->map), MADV_DONTNEED);
	emptied(f);
	atomic_store(&f->evicting, 0);
}

void tdax_cache_usage(struct tdax_cache_usage *u)
{
	*u = (struct tdax_cache_usage){
		.block_size = c.size, .arenas = c.narenas, .blocks = c.nb, .free = atomic_load(&c.nfree),
	};
}
