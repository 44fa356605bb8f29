/*
 * log -- append, release, reclaim and scan of the write log.
 *
 * Persistence order of an append: the segment's slot for the file (so a
 * reclaimer never thinks the segment dead while the record is live), then
 * the data and the header, each flushed; then one drain. A crash before the
 * drain may leave any of them half-written; the checksums catch that, and
 * such a record was never acknowledged.
 */
#define _GNU_SOURCE
#include "core/log.h"
#include "core/sys.h"
#include "core/crc32c.h"
#include "core/files.h"
#include "core/stats.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * The segment this thread appends to, and on which opening of a device
 * (open_id: the pointer alone could be a later, different device). A thread
 * that exits through pthread_exit (or its function's return) hands its
 * segment to the next thread of the process that needs one (orphans,
 * below); one that exits otherwise leaves it owned by a dead tid, and
 * tdax_log_seal_dead() seals it.
 */
static __thread __attribute__((tls_model("initial-exec"))) struct {
	uint64_t open_id;
	int32_t seg;
	uint32_t nslots;          /* the segment's, as this owner keeps it: the */
	uint64_t tail;            /* region's copies are written, never read back */
	uint64_t faulted;         /* bytes of its room mapped in ahead (prefault) */
	uint64_t owner;
} mine = { 0, -1, 0, 0, 0, 0 };

/* How far ahead of the tail the room is mapped in, at most: the pages a
 * record is copied to are mapped before the copy (no page fault on the
 * append's path), but only as many as the appends will use -- a segment
 * sealed early (its slots full: a new file per transaction) costs only
 * what it held, not 1 MiB of page-table work. */
#define PREFAULT_AHEAD (64u << 10)

/*
 * Mapping a segment in is the write-back thread's work where it can be:
 * a claim asks for it (claimed), and the thread's next pass
 * (tdax_log_map_claimed) maps the rest of the segment in, PREFAULT_AHEAD
 * at a time, while its writer goes on. (The claim does not wake it: a pass
 * out of turn also syncs directories and writes files back, which
 * applications and tests time against the interval.) How far each
 * segment's room is mapped in this process is dev->mapped (page tables
 * outlive a segment's release: a segment claimed again is mapped
 * already); whoever maps a chunk -- the writer ahead of its
 * tail, or that thread -- takes it there first, so no chunk is mapped or
 * counted twice. A writer that reaches a chunk the thread has taken but
 * not mapped yet takes its faults in the copy, uncounted.
 */
#define CLAIMED_SLOTS 8
static _Atomic uint32_t claimed[CLAIMED_SLOTS]; /* segment + 1; 0: none */
static _Atomic uint32_t claimed_next;

static pthread_once_t once = PTHREAD_ONCE_INIT;

/*
 * Orphans: segments of this process's threads that exited, with their
 * records and room. A thread that exits through pthread_exit (or its
 * function's return) gives its segment to the process -- its owner word
 * becomes ORPHAN(pid), which no thread's id is (tid 0), alive while the
 * process is -- and the next thread that needs a segment adopts it (the
 * owner word moved to its own id, its appends going on at the tail and
 * slots the other left). Without it a thread made for each request took a
 * segment of its own, which stayed its own until its records were
 * released: 300 such threads filled a 64 MiB device's log, and every sync
 * after was real. Each entry: the segment + 1; for one opening of a
 * device (orphan_dev, orphans_of), which stays open while a thread that
 * appended to it lives (the preload's does for the process's life).
 */
#define ORPHANS 8
#define ORPHAN(pid) ((uint64_t)(pid) << 32)
static _Atomic uint32_t orphans[ORPHANS];
static struct tdax_device *_Atomic orphan_dev;
static _Atomic uint64_t orphans_of; /* orphan_dev's open_id */
static pthread_key_t leaving;       /* its destructor runs at a thread's exit */
static bool leaving_made;

/* A child of fork() owns nothing its parent's thread owned, nor orphans. */
static void forget(void)
{
	mine.open_id = 0;
	mine.seg = -1;
	mine.nslots = 0;
	mine.tail = 0;
	mine.faulted = 0;
	mine.owner = 0;
}

static void forget_all(void)
{
	forget();
	for (int i = 0; i < ORPHANS; i++)
		atomic_store(&orphans[i], 0);
}

static void seg_seal(struct tdax_device *dev, struct tdax_seg *s, uint64_t expected_owner);

/* A thread that owns a segment exits: its segment becomes an orphan, or
 * where there is no room among them, sealed (as a dead owner's would be). */
static void thread_leaves(void *unused)
{
	(void)unused;
	struct tdax_device *dev = atomic_load(&orphan_dev);
	if (mine.seg < 0 || !dev || mine.open_id != atomic_load(&orphans_of) || mine.open_id != dev->open_id)
		return;
	struct tdax_seg *s = tdax_seg_at(dev, (uint32_t)mine.seg);
	uint64_t me = mine.owner, orphan = ORPHAN(tdax_pid());
	if (!atomic_compare_exchange_strong(&s->owner, &me, orphan))
		return;
	bool kept = false;
	for (int i = 0; i < ORPHANS && !kept; i++) {
		uint32_t none = 0;
		kept = atomic_compare_exchange_strong(&orphans[i], &none, (uint32_t)mine.seg + 1);
	}
	if (!kept)
		seg_seal(dev, s, orphan);
	forget();
}

static void init_once(void)
{
	pthread_atfork(NULL, NULL, forget_all);
	leaving_made = pthread_key_create(&leaving, thread_leaves) == 0;
}

static uint64_t my_owner_id(void)
{
	return ((uint64_t)tdax_pid() << 32) | (uint32_t)tdax_syscall(SYS_gettid);
}

/* Is the writing thread still there (util.h: a zombie counts as dead)? An
 * orphan's writer is its process. */
static bool owner_alive(uint64_t owner)
{
	uint32_t pid = (uint32_t)(owner >> 32), tid = (uint32_t)(owner & 0xffffffffu);
	return tid ? tdax_task_alive(pid, tid) : tdax_pid_alive(pid);
}

uint32_t tdax_log_max_len(const struct tdax_device *dev)
{
	return dev->sb->seg_size - TDAX_SEG_HEADER_SIZE - (uint32_t)sizeof(struct tdax_rec);
}

bool tdax_rec_live(const struct tdax_device *dev, const struct tdax_rec *r)
{
	if (r->file >= dev->sb->max_files)
		return false;
	const struct tdax_file *f = tdax_file_at(dev, r->file);
	return tdax_file_valid(f) && f->gen == r->fgen && r->seq > atomic_load(&f->released_seq);
}

static bool slot_dead(const struct tdax_device *dev, const struct tdax_seg_slot *s)
{
	if (s->file >= dev->sb->max_files)
		return true;
	const struct tdax_file *f = tdax_file_at(dev, s->file);
	return f->gen != s->fgen || atomic_load(&f->released_seq) >= s->max_seq;
}

static bool seg_dead(const struct tdax_device *dev, const struct tdax_seg *s)
{
	uint32_t n = s->nslots < TDAX_SEG_SLOTS ? s->nslots : TDAX_SEG_SLOTS;
	for (uint32_t i = 0; i < n; i++)
		if (!slot_dead(dev, &s->slot[i]))
			return false;
	return true;
}

/* A length read from a segment header, cut to the segment's record area. */
static uint64_t in_room(const struct tdax_device *dev, uint64_t v)
{
	uint64_t room = dev->sb->seg_size - TDAX_SEG_HEADER_SIZE;
	return v < room ? v : room;
}

/* Forget every record of a segment: new epoch first, then empty it. The
 * bytes its records used (tail) are added to written, for the wipe. */
static void seg_reset(struct tdax_device *dev, struct tdax_seg *s, uint64_t tail)
{
	TDAX_ASSERT(tail <= dev->sb->seg_size - TDAX_SEG_HEADER_SIZE); /* callers cut it to the room */
	s->epoch++;
	tdax_dev_persist(dev, &s->epoch, sizeof(s->epoch));
	uint64_t w = in_room(dev, s->written);
	s->written = tail > w ? tail : w;
	s->nslots = 0;
	atomic_store(&s->tail, 0);
	tdax_dev_persist(dev, s, sizeof(*s));
}

/* Zero the bytes of released records, so that logged data does not stay
 * readable in the region. After the epoch changed: a wipe cut short leaves
 * records of an old epoch, which are never read again. */
static void seg_wipe(struct tdax_device *dev, struct tdax_seg *s)
{
	static const char zeros[4096];
	uint64_t w = in_room(dev, s->written);
	char *p = (char *)s + TDAX_SEG_HEADER_SIZE;
	if (!w)
		return;
	/* By the device's copy, not memset and a flush: past a few hundred
	 * bytes it goes around the cache (cacheflush.h), at a third of the
	 * cost -- a wipe is as many bytes as the records were. */
	for (uint64_t off = 0; off < w; off += sizeof(zeros))
		dev->memcpy(p + off, zeros, w - off < sizeof(zeros) ? w - off : sizeof(zeros),
			    PMEM2_F_MEM_NODRAIN);
	tdax_drain(dev, 0);
	s->written = 0;
	tdax_dev_persist(dev, &s->written, sizeof(s->written));
}

static void seg_seal(struct tdax_device *dev, struct tdax_seg *s, uint64_t expected_owner)
{
	if (atomic_compare_exchange_strong(&s->owner, &expected_owner, TDAX_SEG_SEALED))
		tdax_dev_persist(dev, (const void *)&s->owner, sizeof(uint64_t));
}

void tdax_log_seal_mine(struct tdax_device *dev)
{
	if (atomic_load(&orphans_of) == dev->open_id)
		for (int i = 0; i < ORPHANS; i++) {
			uint32_t seg = atomic_exchange(&orphans[i], 0) - 1;
			if (seg < dev->sb->nsegs)
				seg_seal(dev, tdax_seg_at(dev, seg), ORPHAN(tdax_pid()));
		}
	if (mine.open_id != dev->open_id)
		return;
	if (mine.seg >= 0)
		seg_seal(dev, tdax_seg_at(dev, (uint32_t)mine.seg), mine.owner);
	forget();
}

/* A wiped segment that was a block arena is the log's again (persistent:
 * a scan reads it for records from now on). */
static void back_to_log(const struct tdax_device *dev, struct tdax_seg *s)
{
	if (s->kind) {
		s->kind = 0;
		tdax_dev_persist(dev, &s->kind, sizeof(s->kind));
	}
}

/* Try to turn a sealed, dead segment into a free one. The reclaimer owns
 * the segment meanwhile, so one that dies here is sealed again later. */
static bool try_reclaim(struct tdax_device *dev, struct tdax_seg *s)
{
	uint64_t sealed = TDAX_SEG_SEALED;
	if (!atomic_compare_exchange_strong(&s->owner, &sealed, my_owner_id()))
		return false;
	bool dead = seg_dead(dev, s);
	if (dead) {
		seg_reset(dev, s, in_room(dev, atomic_load(&s->tail)));
		seg_wipe(dev, s);
		back_to_log(dev, s); /* an arena's blocks are gone now */
	}
	atomic_store(&s->owner, dead ? TDAX_SEG_FREE : TDAX_SEG_SEALED);
	tdax_dev_persist(dev, (const void *)&s->owner, sizeof(uint64_t));
	return dead;
}

/* Is s sealed with every record dead, by a look without owning it? Only a
 * hint (try_reclaim looks again as its owner), but one that spares a
 * sealed segment still holding records the owner's round trip: a gettid,
 * a locked exchange that waits for the flushes in flight, and a persist of
 * the owner word, for every such segment at every pass. */
static bool seg_reclaimable(const struct tdax_device *dev, const struct tdax_seg *s)
{
	if (atomic_load(&s->owner) != TDAX_SEG_SEALED)
		return false;
	/* Read as a reclaimer that owns it may be resetting it: relaxed
	 * atomic loads, each slot copied before it is judged. */
	uint32_t n = __atomic_load_n(&s->nslots, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < n && i < TDAX_SEG_SLOTS; i++) {
		struct tdax_seg_slot sl = {
			.file = __atomic_load_n(&s->slot[i].file, __ATOMIC_RELAXED),
			.fgen = __atomic_load_n(&s->slot[i].fgen, __ATOMIC_RELAXED),
			.max_seq = __atomic_load_n(&s->slot[i].max_seq, __ATOMIC_RELAXED),
		};
		if (!slot_dead(dev, &sl))
			return false;
	}
	return true;
}

void tdax_log_reclaim(struct tdax_device *dev)
{
	for (uint32_t i = 0; i < dev->sb->nsegs; i++)
		if (seg_reclaimable(dev, tdax_seg_at(dev, i)))
			try_reclaim(dev, tdax_seg_at(dev, i));
}

unsigned tdax_log_seal_dead(struct tdax_device *dev)
{
	unsigned n = 0;
	for (uint32_t i = 0; i < dev->sb->nsegs; i++) {
		struct tdax_seg *s = tdax_seg_at(dev, i);
		uint64_t o = atomic_load(&s->owner);
		if (o != TDAX_SEG_FREE && o != TDAX_SEG_SEALED && !owner_alive(o)) {
			seg_seal(dev, s, o);
			n++;
		}
	}
	return n;
}

/* Device memory was mapped in since this thread had taken faults0 faults
 * (tdax_thread_faults): counted in the device's counters straight, not
 * through a process's private ones (stats.h), as it is rare (a claim, each
 * PREFAULT_AHEAD of a segment's room). */
static void count_mapped(const struct tdax_device *dev, uint64_t faults0, uint64_t bytes)
{
	_Atomic uint64_t *c = tdax_stats(dev);
	atomic_fetch_add_explicit(&c[TDAX_ST_MAP_FAULTS], tdax_thread_faults() - faults0, memory_order_relaxed);
	atomic_fetch_add_explicit(&c[TDAX_ST_MAP_BYTES], bytes, memory_order_relaxed);
}

/* A free segment just claimed holds no records and is no arena; one that
 * says otherwise is damaged or forged: empty it. */
static void empty_claimed(struct tdax_device *dev, struct tdax_seg *s)
{
	if (atomic_load(&s->tail) || s->nslots)
		seg_reset(dev, s, in_room(dev, atomic_load(&s->tail)));
	if (s->kind) {
		seg_wipe(dev, s);
		back_to_log(dev, s);
	}
}

/* Take the room of segment seg from where this process's mapping of it
 * ends up to `to`, if that is before end: returns where it ended (>= end:
 * mapped, or taken by another, far enough; nothing taken). */
static uint32_t take_mapping(const struct tdax_device *dev, uint32_t seg, uint64_t end, uint32_t to)
{
	_Atomic uint32_t *m = &dev->mapped[seg];
	uint32_t from = atomic_load_explicit(m, memory_order_relaxed);
	while (from < end && !atomic_compare_exchange_weak(m, &from, to))
		;
	return from;
}

/* Map [from, to) of segment s's room in, counted. */
static void map_room(const struct tdax_device *dev, struct tdax_seg *s, uint64_t from, uint64_t to)
{
	uint64_t faults0 = tdax_thread_faults();
	tdax_device_prefault(dev, (char *)s + TDAX_SEG_HEADER_SIZE + from, to - from);
	count_mapped(dev, faults0, to - from);
}

/* A segment of the log was claimed by this process: its room not mapped
 * yet is the write-back thread's to map. */
static void ask_mapping(const struct tdax_device *dev, uint32_t seg)
{
	uint64_t room = dev->sb->seg_size - TDAX_SEG_HEADER_SIZE;
	if (atomic_load_explicit(&dev->mapped[seg], memory_order_relaxed) < room)
		atomic_store(&claimed[atomic_fetch_add(&claimed_next, 1) % CLAIMED_SLOTS], seg + 1);
}

void tdax_log_map_claimed(const struct tdax_device *dev)
{
	uint64_t room = dev->sb->seg_size - TDAX_SEG_HEADER_SIZE;
	for (uint32_t i = 0; i < CLAIMED_SLOTS; i++) {
		uint32_t v = atomic_exchange(&claimed[i], 0);
		if (!v || v > dev->sb->nsegs)
			continue;
		struct tdax_seg *s = tdax_seg_at(dev, v - 1);
		for (;;) {
			uint32_t from = atomic_load_explicit(&dev->mapped[v - 1], memory_order_relaxed);
			uint64_t to = from + (uint64_t)PREFAULT_AHEAD < room ? from + PREFAULT_AHEAD : room;
			if (from >= room)
				break;
			uint32_t got = take_mapping(dev, v - 1, to, (uint32_t)to);
			if (got < to)
				map_room(dev, s, got, to);
		}
	}
}

void tdax_log_after_fork(const struct tdax_device *dev)
{
	forget_all(); /* (as its pthread_atfork handler does: a fork by _Fork runs none) */
	/* The child's page tables have none of the parent's shared mappings'
	 * pages: nothing of the region is mapped in it yet. */
	memset((void *)dev->mapped, 0, dev->sb->nsegs * sizeof(*dev->mapped));
	for (uint32_t i = 0; i < CLAIMED_SLOTS; i++)
		atomic_store(&claimed[i], 0);
}

/* Adopt an orphan (above) of this opening of dev, if there is one. */
static struct tdax_seg *adopt(struct tdax_device *dev)
{
	if (atomic_load(&orphans_of) != dev->open_id)
		return NULL;
	for (int i = 0; i < ORPHANS; i++) {
		uint32_t seg = atomic_exchange(&orphans[i], 0) - 1;
		if (seg >= dev->sb->nsegs)
			continue; /* (none: 0 - 1) */
		struct tdax_seg *s = tdax_seg_at(dev, seg);
		uint64_t orphan = ORPHAN(tdax_pid());
		if (!atomic_compare_exchange_strong(&s->owner, &orphan, mine.owner))
			continue;
		mine.seg = (int32_t)seg;
		mine.nslots = s->nslots < TDAX_SEG_SLOTS ? s->nslots : TDAX_SEG_SLOTS;
		mine.tail = in_room(dev, atomic_load(&s->tail));
		mine.tail -= mine.tail % TDAX_CACHELINE; /* (read from the region: records end on lines) */
		mine.faulted = 0;                         /* (map_ahead asks dev->mapped) */
		return s;
	}
	return NULL;
}

/* Claim a free segment for this thread, reclaiming sealed ones if needed. */
static struct tdax_seg *claim(struct tdax_device *dev)
{
	uint32_t n = dev->sb->nsegs;
	uint32_t start = (uint32_t)(mine.owner % n);
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t k = 0; k < n; k++) {
			uint32_t i = (start + k) % n;
			struct tdax_seg *s = tdax_seg_at(dev, i);
			if (pass == 1 && seg_reclaimable(dev, s))
				try_reclaim(dev, s);
			uint64_t o = TDAX_SEG_FREE;
			if (atomic_compare_exchange_strong(&s->owner, &o, mine.owner)) {
				empty_claimed(dev, s);
				mine.seg = (int32_t)i;
				mine.nslots = 0;
				mine.tail = 0;
				mine.faulted = 0;
				tdax_device_prefault(dev, s, TDAX_SEG_HEADER_SIZE);
				ask_mapping(dev, i);
				return s;
			}
		}
	}
	return NULL;
}

/* The slot for (file, fgen) in s, added if there is room; NULL if full. */
static struct tdax_seg_slot *slot_for(struct tdax_seg *s, uint32_t file, uint32_t fgen)
{
	TDAX_ASSERT(mine.nslots <= TDAX_SEG_SLOTS);
	for (uint32_t i = 0; i < mine.nslots; i++)
		if (s->slot[i].file == file && s->slot[i].fgen == fgen)
			return &s->slot[i];
	if (mine.nslots == TDAX_SEG_SLOTS)
		return NULL;
	struct tdax_seg_slot *sl = &s->slot[mine.nslots++];
	sl->file = file;
	sl->fgen = fgen;
	sl->max_seq = 0;
	s->nslots = mine.nslots;
	return sl;
}

/* This thread's segment with room for need bytes and a slot for the file. */
static struct tdax_seg *seg_for_append(struct tdax_device *dev, uint32_t need, uint32_t file,
				       uint32_t fgen, struct tdax_seg_slot **slot)
{
	uint32_t room = dev->sb->seg_size - TDAX_SEG_HEADER_SIZE;
	if (mine.open_id != dev->open_id) {
		pthread_once(&once, init_once);
		mine.open_id = dev->open_id;
		mine.seg = -1;
		mine.owner = my_owner_id();
	}
	struct tdax_seg *s = mine.seg >= 0 ? tdax_seg_at(dev, (uint32_t)mine.seg) : NULL;
	if (s && mine.tail > 0 && seg_dead(dev, s)) {
		seg_reset(dev, s, mine.tail); /* everything here is synced: start over, stay warm */
		mine.tail = 0;
		mine.nslots = 0;
	}
	if (s && mine.tail + need <= room && (*slot = slot_for(s, file, fgen)))
		return s;
	if (s) {
		seg_seal(dev, s, mine.owner);
		mine.seg = -1;
	}
	/* The exit hands the segment on (orphans): the key says so. */
	if (leaving_made)
		pthread_setspecific(leaving, &mine);
	if (atomic_load(&orphans_of) != dev->open_id) {
		atomic_store(&orphan_dev, dev);
		atomic_store(&orphans_of, dev->open_id);
	}
	s = adopt(dev);
	if (s) {
		if (mine.tail + need <= room && (*slot = slot_for(s, file, fgen)))
			return s;
		seg_seal(dev, s, mine.owner); /* (full: as this thread's own would be) */
		mine.seg = -1;
	}
	uint64_t faults0 = tdax_thread_faults(); /* (the look at each segment's owner maps it in too) */
	s = claim(dev);
	if (!s)
		return NULL;
	count_mapped(dev, faults0, TDAX_SEG_HEADER_SIZE);
	*slot = slot_for(s, file, fgen);
	/* A segment just claimed is empty: every slot free, all its room left
	 * (need <= room: the caller refused records longer than max_len). */
	TDAX_ASSERT(*slot && mine.tail == 0 && need <= room);
	return s;
}

/* The room of segment s up to end (from the tail) mapped in: the next
 * PREFAULT_AHEAD bytes at least, whole chunks, within the room. */
static void map_ahead(const struct tdax_device *dev, struct tdax_seg *s, uint64_t end)
{
	if (end <= mine.faulted)
		return;
	uint64_t room = dev->sb->seg_size - TDAX_SEG_HEADER_SIZE;
	uint64_t to = (end + PREFAULT_AHEAD - 1) / PREFAULT_AHEAD * PREFAULT_AHEAD;
	if (to > room)
		to = room;
	uint32_t from = take_mapping(dev, (uint32_t)mine.seg, end, (uint32_t)to);
	if (from < end)
		map_room(dev, s, from, to);
	mine.faulted = from < end ? to : from;
}

static int append(struct tdax_device *dev, uint16_t kind, uint32_t file, uint32_t fgen, uint64_t off,
		  const void *data, uint32_t len, uint64_t *seq)
{
	if (len > tdax_log_max_len(dev))
		return -EFBIG;
	uint32_t need = tdax_rec_size(len);
	struct tdax_seg_slot *slot = NULL;
	struct tdax_seg *s = seg_for_append(dev, need, file, fgen, &slot);
	if (!s)
		return -ENOSPC;

	uint64_t tail = mine.tail;
	/* Records start on cache lines (the scan resyncs by cache lines) and
	 * end inside the segment's room. */
	TDAX_ASSERT(tail % TDAX_CACHELINE == 0 && need % TDAX_CACHELINE == 0);
	TDAX_ASSERT(tail + need <= dev->sb->seg_size - TDAX_SEG_HEADER_SIZE);
	map_ahead(dev, s, tail + need);
	struct tdax_rec h = {
		.magic = TDAX_REC_MAGIC, .kind = kind,
		.seq = atomic_fetch_add(dev->seq, 1) + 1,
		.file = file, .fgen = fgen, .off = off, .len = len,
		.epoch = s->epoch, .seg = (uint32_t)mine.seg,
	};
	h.hcrc = tdax_crc32c(0, &h, sizeof(h));
	h.crc = tdax_crc32c(h.hcrc, len ? data : (const void *)&h, len);

	slot->max_seq = h.seq;
	tdax_flush(dev, slot, sizeof(*slot));
	char *at = (char *)s + TDAX_SEG_HEADER_SIZE + tail;
	if (len)
		dev->memcpy(at + sizeof(h), data, len, PMEM2_F_MEM_NODRAIN);
	dev->memcpy(at, &h, sizeof(h), PMEM2_F_MEM_NODRAIN);
	mine.tail = tail + need;
	tdax_drain(dev, len);
	/* After the fence, which orders the copy's stores (non-temporal ones
	 * too, on real persistent memory): a reader that sees the tail sees
	 * the record. A release store is all a reader needs; a sequentially
	 * consistent one (an xchg) cost an append ~150 ns more on this
	 * machine (docs/performance.md, "Explicit mappings: a persist"). */
	atomic_store_explicit(&s->tail, mine.tail, memory_order_release);
	*seq = h.seq;
	return 0;
}

int tdax_log_append(struct tdax_device *dev, uint32_t file, uint32_t fgen, uint64_t off,
		    const void *data, uint32_t len, uint64_t *seq)
{
	return append(dev, TDAX_REC_WRITE, file, fgen, off, data, len, seq);
}

int tdax_log_truncate(struct tdax_device *dev, uint32_t file, uint32_t fgen, uint64_t size,
		      uint64_t *seq)
{
	return append(dev, TDAX_REC_TRUNCATE, file, fgen, size, NULL, 0, seq);
}

int tdax_log_rename(struct tdax_device *dev, uint32_t file, uint32_t fgen, const char *from,
		    const char *to, uint64_t *seq)
{
	char names[2 * TDAX_FILE_PATH_MAX];
	size_t a = strlen(from), b = strlen(to);
	if (a >= TDAX_FILE_PATH_MAX || b >= TDAX_FILE_PATH_MAX)
		return -EINVAL;
	memcpy(names, from, a + 1);
	memcpy(names + a + 1, to, b + 1);
	return append(dev, TDAX_REC_RENAME, file, fgen, 0, names, (uint32_t)(a + b + 2), seq);
}

int tdax_log_create(struct tdax_device *dev, uint32_t file, uint32_t fgen, const char *path,
		    uint32_t mode, uint64_t *seq)
{
	size_t n = strlen(path);
	if (n >= TDAX_FILE_PATH_MAX)
		return -EINVAL;
	return append(dev, TDAX_REC_CREATE, file, fgen, mode & 07777, path, (uint32_t)(n + 1), seq);
}

int tdax_log_fallocate(struct tdax_device *dev, uint32_t file, uint32_t fgen, int mode, uint64_t off,
		       uint64_t len, uint64_t *seq)
{
	struct tdax_rec_falloc a = { .len = len, .mode = (uint32_t)mode };
	return append(dev, TDAX_REC_FALLOCATE, file, fgen, off, &a, sizeof(a), seq);
}

const char *tdax_rec_create_path(const struct tdax_rec *r, const char *data)
{
	return r->kind == TDAX_REC_CREATE && r->len > 0 && data[r->len - 1] == '\0' ? data : NULL;
}

bool tdax_rec_rename_paths(const struct tdax_rec *r, const char *data, const char **from,
			   const char **to)
{
	const char *end = data + r->len, *nul = memchr(data, '\0', r->len);
	if (r->kind != TDAX_REC_RENAME || !nul || !memchr(nul + 1, '\0', (size_t)(end - nul - 1)))
		return false;
	*from = data;
	*to = nul + 1;
	return true;
}

/*
 * A release may leave sealed segments with nothing live: a scan of every
 * segment's header finds them (~1,000 on a 1 GiB log, tens of
 * microseconds). A process that releases at every transaction -- SQLite's
 * rollback journal is removed, and its records released, in each -- paid a
 * scan at each: 8.5 % of such a run's CPU. So a release scans at most once
 * per RECLAIM_EVERY_NS in a process; the ones between leave the scan due,
 * for the write-back's next pass (tdax_log_reclaim_due), and a thread that
 * finds no free segment reclaims for itself (claim).
 */
#define RECLAIM_EVERY_NS 10000000u /* the write-back interval's default */
static _Atomic uint64_t reclaimed_ns;
static _Atomic bool reclaim_due;

void tdax_log_release(struct tdax_device *dev, uint32_t file, uint32_t fgen, uint64_t seq)
{
	tdax_file_release(dev, file, fgen, seq);
	uint64_t now = tdax_coarse_ns(), last = atomic_load_explicit(&reclaimed_ns, memory_order_relaxed);
	if (now - last < RECLAIM_EVERY_NS || !atomic_compare_exchange_strong(&reclaimed_ns, &last, now)) {
		atomic_store_explicit(&reclaim_due, true, memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&reclaim_due, false, memory_order_relaxed);
	tdax_log_reclaim(dev);
}

void tdax_log_reclaim_due(struct tdax_device *dev)
{
	if (atomic_load_explicit(&reclaim_due, memory_order_relaxed) && atomic_exchange(&reclaim_due, false)) {
		atomic_store_explicit(&reclaimed_ns, tdax_coarse_ns(), memory_order_relaxed);
		tdax_log_reclaim(dev);
	}
}

int64_t tdax_log_claim_arena(struct tdax_device *dev)
{
	uint64_t me = my_owner_id();
	for (uint32_t i = 0; i < dev->sb->nsegs; i++) {
		struct tdax_seg *s = tdax_seg_at(dev, i);
		uint64_t o = TDAX_SEG_FREE;
		if (atomic_load(&s->owner) != TDAX_SEG_FREE ||
		    !atomic_compare_exchange_strong(&s->owner, &o, me))
			continue;
		empty_claimed(dev, s);
		s->kind = TDAX_SEG_ARENA;
		tdax_dev_persist(dev, &s->kind, sizeof(s->kind)); /* before any block is written */
		return i;
	}
	return -1;
}

void tdax_log_release_arena(struct tdax_device *dev, uint32_t seg, uint64_t used)
{
	struct tdax_seg *s = tdax_seg_at(dev, seg);
	uint64_t w = in_room(dev, s->written), u = in_room(dev, used);
	s->written = u > w ? u : w;
	tdax_dev_persist(dev, &s->written, sizeof(s->written));
	atomic_store(&s->owner, TDAX_SEG_SEALED);
	tdax_dev_persist(dev, (const void *)&s->owner, sizeof(uint64_t));
}

uint32_t tdax_log_live_owner(const struct tdax_device *dev)
{
	for (uint32_t i = 0; i < dev->sb->nsegs; i++) {
		uint64_t o = atomic_load(&tdax_seg_at(dev, i)->owner);
		if (o != TDAX_SEG_FREE && o != TDAX_SEG_SEALED && owner_alive(o))
			return (uint32_t)(o >> 32);
	}
	return 0;
}

void tdax_log_usage(const struct tdax_device *dev, struct tdax_log_usage *u)
{
	uint32_t room = dev->sb->seg_size - TDAX_SEG_HEADER_SIZE;
	memset(u, 0, sizeof(*u));
	u->capacity = (uint64_t)dev->sb->nsegs * room;
	for (uint32_t i = 0; i < dev->sb->nsegs; i++) {
		const struct tdax_seg *s = tdax_seg_at(dev, i);
		uint64_t o = atomic_load(&s->owner);
		if (o == TDAX_SEG_FREE) {
			u->segs_free++;
		} else if (o == TDAX_SEG_SEALED) {
			u->segs_sealed++;
			u->used += room;
		} else if (s->kind == TDAX_SEG_ARENA) {
			u->segs_owned++;
			u->segs_arena++;
			u->used += room;
		} else {
			u->segs_owned++;
			uint64_t t = atomic_load(&s->tail);
			u->used += t < room ? t : room;
		}
	}
}

/* Is the header at r a well-formed record of segment i, epoch e, fitting in
 * the room left? (Its data checksum is checked separately.) */
static bool header_ok(const struct tdax_rec *r, uint32_t i, uint32_t e, uint64_t left)
{
	if (r->magic != TDAX_REC_MAGIC || r->epoch != e || r->seg != i)
		return false;
	struct tdax_rec h = *r;
	h.hcrc = h.crc = 0;
	return tdax_crc32c(0, &h, sizeof(h)) == r->hcrc &&
	       (r->kind == TDAX_REC_WRITE || (r->kind == TDAX_REC_TRUNCATE && r->len == 0) ||
		(r->kind == TDAX_REC_RENAME && r->len >= 4 && r->len <= 2 * TDAX_FILE_PATH_MAX) ||
		(r->kind == TDAX_REC_CREATE && r->len >= 2 && r->len <= TDAX_FILE_PATH_MAX) ||
		(r->kind == TDAX_REC_FALLOCATE && r->len == sizeof(struct tdax_rec_falloc))) &&
	       r->len <= left && tdax_rec_size(r->len) <= left;
}

static bool data_ok(const struct tdax_rec *r)
{
	return tdax_crc32c(r->hcrc, r + 1, r->len) == r->crc;
}

/* The position of the next complete, valid record at or after pos, or end. */
static uint64_t resync(const char *base, uint32_t i, uint32_t e, uint64_t pos, uint64_t end)
{
	for (; pos + sizeof(struct tdax_rec) <= end; pos += TDAX_CACHELINE) {
		const struct tdax_rec *r = (const struct tdax_rec *)(base + pos);
		if (header_ok(r, i, e, end - pos) && data_ok(r))
			return pos;
	}
	return end;
}

static int scan_seg(struct tdax_device *dev, uint32_t i, const struct tdax_scan_cb *cb)
{
	const struct tdax_seg *s = tdax_seg_at(dev, i);
	const char *base = (const char *)s + TDAX_SEG_HEADER_SIZE;
	uint64_t end = dev->sb->seg_size - TDAX_SEG_HEADER_SIZE;
	uint32_t e = s->epoch;
	uint64_t o = atomic_load(&s->owner);
	if ((cb->exact && o == TDAX_SEG_FREE) || s->kind == TDAX_SEG_ARENA)
		return 0; /* (an arena's bytes are files' blocks, never records) */
	if (cb->exact || (o != TDAX_SEG_FREE && o != TDAX_SEG_SEALED && owner_alive(o))) {
		/* A live writer (or any, when memory is exact): only what it has
		 * finished (tail is stored after the record) is there to read. */
		uint64_t t = atomic_load(&s->tail);
		end = t < end ? t : end;
	}
	uint64_t pos = 0;

	while (pos + sizeof(struct tdax_rec) <= end) {
		/* Records and resync steps are whole cache lines. */
		TDAX_ASSERT(pos % TDAX_CACHELINE == 0);
		const struct tdax_rec *r = (const struct tdax_rec *)(base + pos);
		bool hdr = header_ok(r, i, e, end - pos);
		if (hdr && data_ok(r)) {
			int rc = cb->rec ? cb->rec(cb->ctx, r) : 0;
			if (rc)
				return rc;
			pos += tdax_rec_size(r->len);
			continue;
		}
		/* Damaged here. If a valid record follows, this one was corrupted
		 * in place; if none does, it is the torn tail of the segment (or
		 * simply its end). */
		uint64_t next = resync(base, i, e, pos + (hdr ? tdax_rec_size(r->len) : TDAX_CACHELINE),
				       end);
		bool started = r->magic == TDAX_REC_MAGIC && r->epoch == e && r->seg == i;
		if (next < end || started) {
			if (cb->bad)
				cb->bad(cb->ctx, i, pos, next < end ? TDAX_REC_CORRUPT : TDAX_REC_TORN,
					hdr ? r : NULL);
		}
		pos = next;
	}
	return 0;
}

int tdax_log_scan(struct tdax_device *dev, const struct tdax_scan_cb *cb)
{
	for (uint32_t i = 0; i < dev->sb->nsegs; i++) {
		int rc = scan_seg(dev, i, cb);
		if (rc)
			return rc;
	}
	return 0;
}

void tdax_log_format(struct tdax_device *dev)
{
	for (uint32_t i = 0; i < dev->sb->nsegs; i++) {
		struct tdax_seg *s = tdax_seg_at(dev, i);
		memset(s, 0, TDAX_SEG_HEADER_SIZE);
		tdax_flush(dev, s, TDAX_SEG_HEADER_SIZE);
	}
	tdax_drain(dev, 0);
}
