/*
 * test_files -- the file table and its index by inode (core/files.h):
 * lookups through the index, entries let go and reused, a full table that
 * makes room, and an index that needs rebuilding (dead slots piled up, or
 * a rebuild cut short), promoted files whose promoter is gone, and the
 * identity a path descriptor tells.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "core/files.h"
#include "core/layout.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

static int open_file(const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", tdax_test_dir(), name);
	return open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
}

/* Find the file open as fd: its entry index, or -1. */
static int64_t find_fd(struct tdax_device *dev, int fd)
{
	struct tdax_ident id;
	uint32_t idx, gen;
	if (tdax_ident_of_fd(fd, &id) != 0 || tdax_files_find(dev, &id, &idx, &gen) != 0)
		return -1;
	return idx;
}

/* A fresh device with file `name` registered in it; NULL on failure. */
static struct tdax_device *device_with_file(const char *name, uint32_t *idx, uint32_t *gen)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	if (dev && (*idx = tdax_test_new_file(dev, name, gen)) == UINT32_MAX) {
		tdax_device_close(dev);
		dev = NULL;
	}
	return dev;
}

static uint32_t active(struct tdax_device *dev)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < dev->sb->max_files; i++)
		n += atomic_load(&tdax_file_at(dev, i)->state) == TDAX_FILE_ACTIVE;
	return n;
}

TEST(every_registered_file_is_found_and_no_other)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	uint32_t gen[300], idx[300];
	for (int i = 0; i < 300; i++) {
		char name[32];
		snprintf(name, sizeof(name), "found-%d", i);
		idx[i] = tdax_test_new_file(dev, name, &gen[i]);
		CHECK(idx[i] != UINT32_MAX);
	}
	for (int i = 0; i < 300; i++) {
		char name[32];
		snprintf(name, sizeof(name), "found-%d", i);
		int fd = open_file(name);
		CHECK(fd >= 0 && find_fd(dev, fd) == idx[i]);
		struct stat st;
		CHECK(fstat(fd, &st) == 0 && tdax_files_may_have(dev, st.st_ino));
		close(fd);
	}
	int other = open_file("not-registered");
	CHECK(other >= 0 && find_fd(dev, other) == -1);
	close(other);
	tdax_device_close(dev);
}

TEST(an_entry_quiet_for_a_second_or_at_its_inode_number_given_again_is_let_go_at_an_open)
{
	uint32_t gen, idx;
	struct tdax_device *dev = device_with_file("quiet", &idx, &gen);
	CHECK(dev);
	struct tdax_file *f = tdax_file_at(dev, idx);
	uint64_t now = tdax_now_ns();

	/* Its own entry: never synced (its writer may be at work), synced
	 * within the second, with records. */
	CHECK(!tdax_files_let_go_quiet(dev, idx, gen));
	atomic_store(&f->rt.last_sync_ns, now);
	CHECK(!tdax_files_let_go_quiet(dev, idx, gen));
	atomic_store(&f->rt.last_sync_ns, now - TDAX_FILE_QUIET_NS - 1);
	atomic_store(&f->rt.first_log_ns, 1);
	CHECK(!tdax_files_let_go_quiet(dev, idx, gen));
	atomic_store(&f->rt.first_log_ns, 0);
	atomic_store(&f->rt.streamed, 1); /* a stream's, over */
	CHECK(!tdax_files_let_go_quiet(dev, idx, gen + 1));
	CHECK(tdax_files_let_go_quiet(dev, idx, gen));
	CHECK(atomic_load(&f->state) == TDAX_FILE_FREE);

	/* Another file's entry at the number. */
	idx = tdax_test_new_file(dev, "reused", &gen);
	CHECK(idx != UINT32_MAX);
	f = tdax_file_at(dev, idx);
	int fd = open_file("reused");
	struct tdax_ident id;
	CHECK(fd >= 0 && tdax_ident_of_fd(fd, &id) == 0);
	close(fd);
	CHECK(tdax_files_let_go_others(dev, &id) == 0); /* the file's own */
	struct tdax_ident elsewhere = id;
	elsewhere.dev++; /* that number on another file system */
	CHECK(tdax_files_let_go_others(dev, &elsewhere) == 0);
	struct tdax_ident next = id; /* a later inode at the number */
	f->flags |= TDAX_FILE_HAS_IGEN;
	next.flags |= TDAX_FILE_HAS_IGEN;
	next.igen = f->igen + 1;
	atomic_store(&f->rt.first_log_ns, 1); /* records yet to be released */
	CHECK(tdax_files_let_go_others(dev, &next) == 0);
	atomic_store(&f->rt.first_log_ns, 0);
	CHECK(tdax_files_let_go_others(dev, &next) == 1);
	CHECK(atomic_load(&f->state) == TDAX_FILE_FREE);
	tdax_device_close(dev);
}

TEST(an_idle_entry_without_a_sync_stream_is_let_go)
{
	uint32_t gen, idx;
	struct tdax_device *dev = device_with_file("idle", &idx, &gen);
	CHECK(dev);
	struct tdax_file *f = tdax_file_at(dev, idx);

	/* Something to keep: records, a sync (the policy's history). */
	atomic_store(&f->rt.first_log_ns, 1);
	CHECK(!tdax_files_let_go(dev, idx, gen));
	atomic_store(&f->rt.first_log_ns, 0);
	atomic_store(&f->rt.unmanaged, 1);
	CHECK(!tdax_files_let_go(dev, idx, gen));
	atomic_store(&f->rt.unmanaged, 0);
	atomic_store(&f->rt.streamed, 1);
	CHECK(!tdax_files_let_go(dev, idx, gen));
	atomic_store(&f->rt.streamed, 0);
	atomic_store(&f->rt.last_sync_ns, 5); /* one sync, no stream: nothing learned */
	CHECK(!tdax_files_let_go(dev, idx, gen + 1)); /* another generation: not ours */

	CHECK(tdax_files_let_go(dev, idx, gen));
	CHECK(atomic_load(&f->state) == TDAX_FILE_FREE);
	int fd = open_file("idle");
	CHECK(fd >= 0 && find_fd(dev, fd) == -1);
	close(fd);
	/* Registered again, it gets an entry anew. */
	uint32_t gen2, idx2 = tdax_test_new_file(dev, "idle", &gen2);
	CHECK(idx2 != UINT32_MAX && (idx2 != idx || gen2 != gen));
	tdax_device_close(dev);
}

TEST(a_full_table_makes_room_from_entries_idle_longest)
{
	struct tdax_device *dev = tdax_test_new_device(0, 0);
	CHECK(dev);
	uint32_t n = dev->sb->max_files, gen, keep = 0;
	for (uint32_t i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "full-%u", i);
		uint32_t idx = tdax_test_new_file(dev, name, &gen);
		CHECK(idx != UINT32_MAX);
		struct tdax_file_rt *rt = &tdax_file_at(dev, idx)->rt;
		if (i % 2) /* half of them have records: they must stay */
			atomic_store(&rt->first_log_ns, tdax_now_ns());
		else /* the others were synced long ago */
			atomic_store(&rt->last_sync_ns, 1);
		keep += i % 2;
	}
	CHECK(active(dev) == n);
	uint32_t idx = tdax_test_new_file(dev, "one-more", &gen);
	CHECK(idx != UINT32_MAX);
	/* An eighth of the table was freed at once, none with records. */
	CHECK(active(dev) == n - n / 8 + 1);
	uint32_t with_records = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct tdax_file *f = tdax_file_at(dev, i);
		with_records += atomic_load(&f->state) == TDAX_FILE_ACTIVE && atomic_load(&f->rt.first_log_ns);
	}
	CHECK(with_records == keep);
	tdax_device_close(dev);
}

TEST(dead_slots_are_cleared_by_a_rebuild_and_files_still_found)
{
	uint32_t gen, kept;
	struct tdax_device *dev = device_with_file("kept", &kept, &gen);
	CHECK(dev);
	uint32_t slots = tdax_index_slots(dev->sb->max_files);
	/* Far more registrations and releases than the index has slots. */
	for (uint32_t i = 0; i < 2 * slots; i++) {
		char name[32];
		snprintf(name, sizeof(name), "churn-%u", i % 64);
		uint32_t g, idx = tdax_test_new_file(dev, name, &g);
		CHECK(idx != UINT32_MAX);
		CHECK(tdax_files_let_go(dev, idx, g));
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", tdax_test_dir(), name);
		unlink(path); /* a new inode next time */
		CHECK(atomic_load(dev->index_used) <= slots / 2 + slots / 4 + 1);
	}
	int fd = open_file("kept");
	CHECK(fd >= 0 && find_fd(dev, fd) == kept);
	/* Past three quarters used, the next registrar rebuilds the index. */
	uint64_t epoch = atomic_load(dev->index_epoch);
	atomic_store(dev->index_used, slots);
	CHECK(tdax_test_new_file(dev, "after-rebuild", &gen) != UINT32_MAX);
	CHECK(atomic_load(dev->index_epoch) == epoch + 2);
	CHECK(atomic_load(dev->index_used) == 2); /* "kept" and the new one */
	CHECK(find_fd(dev, fd) == kept);
	close(fd);
	tdax_device_close(dev);
}

/* Files registered and let go one after the other, each a new inode (a
 * log's segments, an LSM tree's tables): the dead slot of each is emptied
 * when nothing lies past it, so the index needs no rebuild and a search
 * walks no trail of them. */
TEST(files_let_go_one_after_the_other_leave_no_dead_slots)
{
	uint32_t gen, kept;
	struct tdax_device *dev = device_with_file("kept", &kept, &gen);
	CHECK(dev);
	uint64_t epoch = atomic_load(dev->index_epoch);
	uint32_t most = 0, n = 2 * tdax_index_slots(dev->sb->max_files);
	for (uint32_t i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "table-%u", i); /* kept: no inode is reused */
		uint32_t g, idx = tdax_test_new_file(dev, name, &g);
		CHECK(idx != UINT32_MAX);
		CHECK(tdax_files_let_go(dev, idx, g));
		uint32_t used = atomic_load(dev->index_used);
		most = used > most ? used : most;
	}
	/* "kept", the new one and the few dead slots a live one holds up
	 * (each before it in a run); without the emptying, most reach three
	 * quarters of the index and a rebuild. */
	CHECK(most <= 16);
	CHECK(atomic_load(dev->index_epoch) == epoch);
	int fd = open_file("kept");
	CHECK(fd >= 0 && find_fd(dev, fd) == kept);
	close(fd);
	for (uint32_t i = 0; i < n; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/table-%u", tdax_test_dir(), i);
		unlink(path);
	}
	tdax_device_close(dev);
}

TEST(a_rebuild_cut_short_is_redone_and_lookups_search_the_table_meanwhile)
{
	uint32_t gen, idx;
	struct tdax_device *dev = device_with_file("survivor", &idx, &gen);
	CHECK(dev);
	/* A registrar died in the middle of a rebuild: the epoch is odd and
	 * the index empty. The file is found all the same... */
	uint32_t slots = tdax_index_slots(dev->sb->max_files);
	atomic_store(dev->index_epoch, 7);
	memset((char *)tdax_file_at(dev, 0) + (uint64_t)dev->sb->max_files * TDAX_FILE_ENTRY_SIZE, 0,
	       (size_t)slots * 8);
	int fd = open_file("survivor");
	CHECK(fd >= 0 && find_fd(dev, fd) == idx);
	/* ...and the next registrar rebuilds, without giving it a second entry. */
	uint32_t gen2, idx2 = tdax_test_new_file(dev, "survivor", &gen2);
	CHECK(idx2 == idx && gen2 == gen);
	CHECK(atomic_load(dev->index_epoch) == 8);
	CHECK(find_fd(dev, fd) == idx);
	close(fd);
	tdax_device_close(dev);
}

TEST(a_promoters_file_is_orphaned_once_it_is_dead_or_its_pid_taken)
{
	uint32_t gen, idx;
	struct tdax_device *dev = device_with_file("promoted", &idx, &gen);
	CHECK(dev);
	struct tdax_file *f = tdax_file_at(dev, idx);
	CHECK(!tdax_files_orphaned(dev));
	/* Promoted by this process, alive: not orphaned. */
	uint32_t me = (uint32_t)getpid();
	uint64_t since = tdax_pid_start(me);
	CHECK(since != 0);
	atomic_store(&f->rt.deferred_since, since);
	atomic_store(&f->rt.deferred, me);
	CHECK(!tdax_file_orphaned(f) && !tdax_files_orphaned(dev));
	/* The same pid, another start: the promoter is gone, its pid reused. */
	atomic_store(&f->rt.deferred_since, since + 1);
	CHECK(tdax_file_orphaned(f) && tdax_files_orphaned(dev));
	/* A child that exited and was reaped: dead. */
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	CHECK(child > 0 && waitpid(child, NULL, 0) == child);
	atomic_store(&f->rt.deferred_since, 0);
	atomic_store(&f->rt.deferred, (uint32_t)child);
	CHECK(tdax_file_orphaned(f));
	/* A zombie (exited, not reaped) holds nothing: dead too. */
	child = fork();
	if (child == 0)
		_exit(0);
	CHECK(child > 0);
	siginfo_t si;
	CHECK(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT) == 0);
	atomic_store(&f->rt.deferred, (uint32_t)child);
	CHECK(tdax_file_orphaned(f));
	CHECK(waitpid(child, NULL, 0) == child);
	atomic_store(&f->rt.deferred, 0);
	CHECK(!tdax_files_orphaned(dev));
	tdax_device_close(dev);
}

/* A path descriptor (no ioctl) tells the identity an open descriptor
 * does, inode generation included, where the file system allows (ext4,
 * xfs: the file handle); elsewhere it says it cannot. A new file on the
 * inode number of a removed one is another file. The file system's id is
 * its f_fsid, remembered or not. */
TEST(a_path_descriptor_tells_the_identity_of_the_open_file)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", tdax_test_dir(), "ident");
	struct tdax_ident was;
	for (int round = 0; round < 2; round++) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644), p = open(path, O_PATH | O_CLOEXEC);
		CHECK(fd >= 0 && p >= 0);
		struct statfs sf;
		struct tdax_ident a, b;
		CHECK(fstatfs(fd, &sf) == 0 && tdax_ident_of_fd(fd, &a) == 0);
		uint64_t fsid;
		memcpy(&fsid, &sf.f_fsid, sizeof(fsid));
		CHECK(a.dev == fsid); /* (the second round's from what the first remembered) */
		int rc = tdax_ident_of_path_fd(p, &b);
		if (sf.f_type == EXT4_SUPER_MAGIC || sf.f_type == XFS_SUPER_MAGIC) {
			CHECK(rc == 0 && (a.flags & TDAX_FILE_HAS_IGEN));
			CHECK(a.dev == b.dev && a.ino == b.ino && a.igen == b.igen && a.btime == b.btime &&
			      a.flags == b.flags);
			if (round == 1)
				CHECK(!tdax_ident_same(&was, &b));
		} else {
			CHECK(rc == -1 && errno == EOPNOTSUPP);
		}
		was = a;
		close(p);
		close(fd);
		CHECK(unlink(path) == 0);
	}
}
