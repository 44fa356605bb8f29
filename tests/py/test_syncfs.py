"""sync() and syncfs() make durable every byte of a file system, those tdax
did not log too: a write through an O_DIRECT descriptor, a cold write of a
range no longer upgraded. A record older than such a write must not be
replayed over it after a crash -- the write was acknowledged. Before
2026-11-28 it was: a file written A, B, C through lightweight syncs, then D
through O_DIRECT and sync() or syncfs(), held C after a power cut. Now
every file with records is checkpointed before the kernel's call
(src/preload/checkpoint.h), through the hooks and under --intercept
syscall's supervisor. The same for an fsync through a descriptor tdax does
not manage (opened read-only: the file's records are checkpointed first),
through the O_DIRECT descriptor itself (its sync was real already), and an
msync of a shared mapping (E written through it over D: the mapping made
the file the kernel's, records checkpointed, already)."""
import pytest

from conftest import ACKED_C, acked_under_tdax, build_both, info, killed_and_cut

# argv: how, file, and "promote" to wait after A (bypass mode promotes the
# file then). 4 KiB of A, B, C at 0, each synced (lightweight from the
# second, policy always); D over them through an O_DIRECT descriptor (never
# logged; a promoted file is demoted at its open); then `how` makes it
# durable ("msync": E through a shared mapping first); "acked".
SYNCER = ACKED_C + r"""
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
	static char buf[4096];
	int fd = open(argv[2], O_RDWR | O_CREAT, 0644);
	must(fd >= 0, "open");
	for (char c = 'A'; c <= 'C'; c++) {
		memset(buf, c, sizeof(buf));
		must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fdatasync(fd) == 0, "pwrite");
		if (c == 'A' && argc > 3) /* "promote": the write-back thread starts, the lease */
			usleep(200000);  /* comes, and bypass mode promotes the file */
	}
	int direct = open(argv[2], O_RDWR | O_DIRECT);
	char *block = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	must(direct >= 0 && block != MAP_FAILED, "O_DIRECT");
	memset(block, 'D', 4096);
	must(pwrite(direct, block, 4096, 0) == 4096, "direct write");
	if (!strcmp(argv[1], "syncfs"))
		must(syncfs(fd) == 0, "syncfs");
	else if (!strcmp(argv[1], "syscall-syncfs"))
		must(syscall(SYS_syncfs, fd) == 0, "syscall(SYS_syncfs)");
	else if (!strcmp(argv[1], "fsync-readonly")) {
		int ro = open(argv[2], O_RDONLY);
		must(ro >= 0 && fsync(ro) == 0, "fsync of a read-only descriptor");
	} else if (!strcmp(argv[1], "fsync-direct"))
		must(fsync(direct) == 0, "fsync of the O_DIRECT descriptor");
	else if (!strcmp(argv[1], "msync")) {
		char *map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		must(map != MAP_FAILED, "mmap");
		memset(map, 'E', 4096);
		must(msync(map, 4096, MS_SYNC) == 0, "msync");
	} else if (!strncmp(argv[1], "command", 7)) { /* sync(1) as a child: its first call is the sync */
		char cmd[4200];
		snprintf(cmd, sizeof(cmd), "sync %s", !strcmp(argv[1], "command-fs") ? "-f ." :
			 !strcmp(argv[1], "command-file") ? argv[2] : "");
		must(system(cmd) == 0, cmd);
	} else if (!strcmp(argv[1], "syscall-sync"))
		must(syscall(SYS_sync) == 0, "syscall(SYS_sync)");
	else
		sync();
	acked();
}
"""


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "syncer", SYNCER)


# (An fsync through a read-only descriptor under --intercept syscall is not
# trapped -- the program's, or a child's such as `sync FILE`:
# docs/durability.md, Known limits.) "command...": sync(1) run as a child
# after the write, which attaches for its sync (its first call).
CASES = [(how, intercept) for how in ("sync", "syncfs", "syscall-sync", "syscall-syncfs", "fsync-readonly",
                                      "fsync-direct", "msync", "command", "command-file", "command-fs")
         for intercept in ("libc", "syscall")
         if (how, intercept) not in (("fsync-readonly", "syscall"), ("command-file", "syscall"))]


@pytest.mark.parametrize("how,intercept", CASES)
def test_a_write_sync_made_durable_is_not_undone_by_an_older_record(dev, voldisk, progs, how, intercept):
    f = voldisk.mnt / "f"
    p = acked_under_tdax(dev, progs, "syncer", intercept, how, f)
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == (b"E" if how == "msync" else b"D") * 4096


@pytest.mark.parametrize("how", ["sync", "syncfs", "fsync-readonly", "command"])
def test_the_same_for_a_file_bypass_mode_promoted(dev, voldisk, progs, how):
    """A, B and C of a file bypass mode promoted (the O_DIRECT open demotes
    it; the demotion's records stay until a real sync): the same."""
    f = voldisk.mnt / "f"
    p = acked_under_tdax(dev, progs, "syncer", "libc", how, f, "promote", mode="bypass")
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == b"D" * 4096
    c = info(dev)["counters"]
    assert c.get("promotions", 0) == 1 and c.get("demotions", 0) == 1, c
