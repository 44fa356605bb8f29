"""Writes at a place tdax knows (src/preload/landing.h): while a write
lease makes the process the file's only writer, a write at the file
position is logged where the last one ended -- an O_APPEND write at the
file's end, another at the open file's position -- without reading the
position back from the kernel. Each case here changes the end another way
between two runs of synced appends -- a truncate, a fallocate, a pwrite, a
copy into it, a write at the position with O_APPEND cleared, another open
of the file, a program without tdax appending, a child of fork appending,
a duplicate appending -- or moves the position between writes without
O_APPEND (a read, an lseek, through syscall(2) or a dup, a copy out of the
file, a stdio stream's read, O_APPEND set), and the writes after it must
be logged where the kernel put them: killed
after the last acknowledged sync, power cut, recovered, the file is what
the kernel made it. (The test build also checks every known end against
the kernel's and aborts on a wrong one.) A positive control shows that
the power cut catches an end not forgotten."""

import os
import re
import subprocess

import pytest

from conftest import ACKED_C, TDAX_ENV, TDAX_PRODUCT, acked_under_tdax, build_both, info, killed_and_cut, tdax_run

# argv: how, file, another file (the source of the copies), and "exit" to
# end instead of waiting for the kill. 20 writes of 100 B at the file
# position, each synced (the lease comes after three, the place is known),
# the change `how`, 20 more. Through an O_APPEND descriptor (appends), or
# one without (how "pos:...": opened O_RDWR; the change is made after a
# write at 100, whose end becomes known at 200).
APPENDER = ACKED_C + r"""
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
static int fd, dupfd = -1;
static const char *path;
#ifndef TDAX_TEST_STATIC
/* llseek as a program linked before glibc 2.28 calls it (since then a
 * compatibility symbol, which no new program can name). */
__asm__(".symver old_llseek, llseek@GLIBC_2.2.5");
extern off_t old_llseek(int fd, off_t off, int whence);
#else
#define old_llseek lseek /* (no such symbol in a static program) */
#endif
static off_t size_now(void) {
	struct stat st;
	must(fstat(fd, &st) == 0, "fstat");
	return st.st_size;
}
static void appends(char first) {
	char rec[100];
	for (int i = 0; i < 20; i++) {
		memset(rec, first + i, sizeof(rec));
		must(write(fd, rec, sizeof(rec)) == sizeof(rec) && fdatasync(fd) == 0, "append");
		if (i == 0)
			usleep(100000); /* the write-back thread starts: leases need it */
	}
}
static void *other_thread(void *unused) {
	(void)unused;
	must(pwrite(fd, "TTTTTTTTTTTTTTTTTTTT", 20, 0) == 20, "thread's pwrite");
	return NULL;
}
/* The position write or copy with O_APPEND cleared, then set again. */
static void at_position(const char *how, const char *other) {
	must(fcntl(fd, F_SETFL, 0) == 0 && lseek(fd, 0, SEEK_END) >= 0, "F_SETFL");
	int in = open(other, O_RDONLY);
	must(in >= 0, "open the source");
	if (!strcmp(how, "copy"))
		must(copy_file_range(in, NULL, fd, NULL, 300, 0) == 300, "copy_file_range");
	else if (!strcmp(how, "sendfile"))
		must(sendfile(fd, in, NULL, 300) == 300, "sendfile");
	else
		must(lseek(fd, 10, SEEK_SET) == 10 && write(fd, "NNNNNNNNNN", 10) == 10, "write at 10");
	close(in);
	must(fcntl(fd, F_SETFL, O_APPEND) == 0, "F_SETFL O_APPEND");
}
/* A change of the position of fd's open file (after a write at 100). */
static void moved(const char *how, const char *other) {
	char buf[150];
	struct iovec iov = { buf, sizeof(buf) };
	must(lseek(fd, 100, SEEK_SET) == 100 && write(fd, "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"
		"XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX", 100) == 100 && fdatasync(fd) == 0, "X at 100");
	must(write(fd, "YYYYYYYYYY", 10) == 10 && fdatasync(fd) == 0, "Y at 200"); /* known: at 200 */
	if (!strcmp(how, "pos:read"))
		must(read(fd, buf, sizeof(buf)) == sizeof(buf), "read");
	else if (!strcmp(how, "pos:readv"))
		must(readv(fd, &iov, 1) == sizeof(buf), "readv");
	else if (!strcmp(how, "pos:preadv2"))
		must(preadv2(fd, &iov, 1, -1, 0) == sizeof(buf), "preadv2");
	else if (!strcmp(how, "pos:syscall-read"))
		must(syscall(SYS_read, fd, buf, sizeof(buf)) == sizeof(buf), "syscall read");
	else if (!strcmp(how, "pos:lseek"))
		must(lseek(fd, -150, SEEK_CUR) == 60, "lseek");
	else if (!strcmp(how, "pos:llseek"))
		must(old_llseek(fd, 40, SEEK_SET) == 40, "llseek");
	else if (!strcmp(how, "pos:syscall-lseek"))
		must(syscall(SYS_lseek, fd, 700, SEEK_SET) == 700, "syscall lseek");
	else if (!strcmp(how, "pos:dup-lseek")) {
		int d = dup(fd);
		must(d >= 0 && lseek(d, 30, SEEK_SET) == 30 && close(d) == 0, "lseek of a dup");
	} else if (!strcmp(how, "pos:sendfile")) {
		int out = open("/dev/null", O_WRONLY);
		must(out >= 0 && sendfile(out, fd, NULL, sizeof(buf)) == sizeof(buf), "sendfile");
		close(out);
	} else if (!strcmp(how, "pos:copy")) {
		int out = open(other, O_WRONLY);
		off_t at = 0;
		must(out >= 0 && copy_file_range(fd, NULL, out, &at, sizeof(buf), 0) == sizeof(buf), "copy_file_range");
		close(out);
	} else if (!strcmp(how, "pos:splice")) {
		int p[2];
		must(pipe(p) == 0 && splice(fd, NULL, p[1], NULL, sizeof(buf), 0) == sizeof(buf), "splice");
		close(p[0]);
		close(p[1]);
	} else if (!strcmp(how, "pos:stream")) { /* stdio reads through the C library's own calls */
		FILE *s = fdopen(dup(fd), "r");
		must(s && setvbuf(s, NULL, _IOFBF, 16) == 0 && fgetc(s) == 'c', "a stream's read");
	} else if (!strcmp(how, "pos:setfl-append"))
		must(fcntl(fd, F_SETFL, O_APPEND) == 0, "F_SETFL O_APPEND");
	else
		must(!strcmp(how, "pos:none"), "a case this program knows");
}
static void change(const char *how, const char *other) {
	if (!strncmp(how, "pos:", 4))
		moved(how, other);
	else if (!strcmp(how, "ftruncate-shrink"))
		must(ftruncate(fd, size_now() - 250) == 0, "ftruncate");
	else if (!strcmp(how, "ftruncate-grow"))
		must(ftruncate(fd, size_now() + 3000) == 0, "ftruncate");
	else if (!strcmp(how, "truncate"))
		must(truncate(path, size_now() - 250) == 0, "truncate");
	else if (!strcmp(how, "fallocate"))
		must(fallocate(fd, 0, size_now(), 5000) == 0, "fallocate");
	else if (!strcmp(how, "pwrite")) /* O_APPEND: Linux puts it at the end */
		must(pwrite(fd, "PPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPPP", 50, 0) == 50, "pwrite");
	else if (!strcmp(how, "thread")) {
		pthread_t t;
		must(pthread_create(&t, NULL, other_thread, NULL) == 0 && pthread_join(t, NULL) == 0, "thread");
	} else if (!strcmp(how, "copy") || !strcmp(how, "sendfile") || !strcmp(how, "no-append"))
		at_position(how, other);
	else if (!strcmp(how, "reopen")) {
		int fd2 = open(path, O_WRONLY);
		must(fd2 >= 0 && pwrite(fd2, "RRRRRRRRRR", 10, size_now() + 100) == 10, "reopen");
		close(fd2);
	} else if (!strcmp(how, "outside")) { /* the test appends: no fork here */
		off_t was = size_now();
		printf("ready\n");
		fflush(stdout);
		while (size_now() == was)
			usleep(500);
	} else if (!strcmp(how, "outside-child")) {
		char cmd[4200];
		snprintf(cmd, sizeof(cmd), "env -u LD_PRELOAD /bin/sh -c 'printf xyz >> \"%s\"'", path);
		must(system(cmd) == 0, "outside");
	} else if (!strcmp(how, "spawn") || !strcmp(how, "spawn-outside")) {
		/* A child posix_spawn made (no fork: glibc clones) appends through
		 * the descriptor it inherited -- the same open file, no open of
		 * its own to break the lease -- under tdax, or without. */
		char script[64];
		snprintf(script, sizeof(script), "printf SSSSSSSSSSSSSSSSSSSSSSSS >&%d", fd);
		char *argv_sh[] = { "sh", "-c", script, NULL };
		char *env_out[] = { "PATH=/usr/bin:/bin", NULL };
		extern char **environ;
		pid_t pid;
		int status;
		must(posix_spawn(&pid, "/bin/sh", NULL, NULL, argv_sh, strcmp(how, "spawn") ? env_out : environ) == 0 &&
		     waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "posix_spawn");
	} else if (!strcmp(how, "dup")) /* a duplicate (no lease of its own) appends */
		must(write(dupfd, "UUUUUUUUUUUUUUUUUUUUUUUUUUUUUU", 30) == 30, "write through the dup");
	else if (!strcmp(how, "fork")) {
		pid_t pid = fork();
		must(pid >= 0, "fork");
		if (pid == 0)
			_exit(write(fd, "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", 40) == 40 ? 0 : 1);
		int status;
		must(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "child");
	} else
		must(!strcmp(how, "none"), "a case this program knows");
}
int main(int argc, char **argv) {
	path = argv[2];
	fd = open(path, strncmp(argv[1], "pos:", 4) ? O_WRONLY | O_CREAT | O_APPEND : O_RDWR | O_CREAT, 0644);
	must(fd >= 0 && fsync(fd) == 0, "open");
	if (!strcmp(argv[1], "dup"))
		dupfd = dup(fd);
	appends('a');
	change(argv[1], argv[3]);
	appends('A');
	if (argc > 4)
		return 0;
	acked();
}
"""

CHANGES = ["none", "ftruncate-shrink", "ftruncate-grow", "truncate", "fallocate", "pwrite", "thread",
           "copy", "sendfile", "no-append", "reopen", "outside", "outside-child", "fork", "spawn", "spawn-outside",
           "dup"]
# Writes at the position of a descriptor without O_APPEND.
MOVES = ["pos:none", "pos:read", "pos:readv", "pos:preadv2", "pos:syscall-read", "pos:lseek", "pos:llseek", "pos:syscall-lseek",
         "pos:dup-lseek", "pos:sendfile", "pos:copy", "pos:splice", "pos:stream", "pos:setfl-append"]


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "appender", APPENDER, "-pthread")


def appended(dev, voldisk, progs, how, intercept="libc"):
    """The appender run with change `how` on voldisk (its static build
    under --intercept syscall), killed and cut after its last sync: what the
    file held before the cut, and after."""
    f, src = voldisk.mnt / "f", voldisk.mnt / "src"
    src.write_bytes(bytes(range(256)) * 4)
    if how == "outside":  # a program without tdax appends while it waits
        shell = ('exec "$0" "$@" | { read -r ready && '
                 'env -u LD_PRELOAD /bin/sh -c \'printf xyz >> "$1"\' sh "$2" && cat; }')
        p = acked_under_tdax(dev, progs, "appender", intercept, how, f, src, shell=shell)
    else:
        p = acked_under_tdax(dev, progs, "appender", intercept, how, f, src)
    acked = f.read_bytes()
    killed_and_cut(p, dev, voldisk)
    return acked, f.read_bytes()


@pytest.mark.parametrize("how", CHANGES + MOVES)
def test_a_write_after_another_change_is_logged_where_the_kernel_put_it(dev, voldisk, progs, how):
    acked, after = appended(dev, voldisk, progs, how)
    assert acked.endswith(b"".join(bytes([c]) * 100 for c in b"ABCDEFGHIJKLMNOPQRST")), \
        "the case did not do what it says"
    assert after == acked, f"acknowledged writes misplaced or lost after a change ({how})"
    assert info(dev)["counters"]["known_landings"] > 0, "no write was logged at a known place"


@pytest.mark.parametrize("how", ["pos:read", "pos:lseek", "ftruncate-shrink"])
def test_the_supervisor_of_a_static_program_knows_no_place(dev, voldisk, progs, how):
    """Under --intercept syscall the supervisor makes the program's writes
    and syncs of a descriptor it placed, not its reads and seeks, which
    move the open file's position unseen: it reads every landing back."""
    acked, after = appended(dev, voldisk, progs, how, intercept="syscall")
    assert after == acked, f"acknowledged writes misplaced or lost after a change ({how})"
    assert info(dev)["counters"]["known_landings"] == 0


def test_positive_control_an_end_not_forgotten_misplaces_the_appends(dev, voldisk, progs, monkeypatch):
    """TDAX_TEST_LANDING_BLIND: a truncate forgets nothing, and the appends
    after it are logged 250 bytes past where the kernel put them."""
    monkeypatch.setitem(TDAX_ENV, "TDAX_TEST_LANDING_BLIND", "1")
    acked, after = appended(dev, voldisk, progs, "ftruncate-shrink")
    assert after != acked


@pytest.mark.parametrize("how", ["none", "pos:none"])
def test_the_offset_of_a_leased_write_costs_no_system_call(dev, diskdir, progs, how):
    """The product library: of 40 synced writes at the position (appends,
    or at the position of a descriptor without O_APPEND), those after the
    lease read no position back (an lseek each before)."""
    f = diskdir / "f"
    trace = diskdir / "strace"
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=lseek,write", "-o", str(trace), str(TDAX_PRODUCT), "run",
                    "--device", dev, "--policy", "always", "--", str(progs / "appender"), how, str(f), "/dev/null",
                    "exit"],
                   env={**os.environ, "TDAX_QUIET": "1"}, stdin=subprocess.DEVNULL,
                   stdout=subprocess.PIPE, timeout=120, check=False, start_new_session=True)
    calls = trace.read_text()
    appends = len(re.findall(r"^\d+ +write\(\d+, \"([a-tA-T])\1\1", calls, re.M))
    reads_back = len(re.findall(r"^\d+ +lseek\(\d+, 0, SEEK_CUR\)", calls, re.M))
    assert appends == 40, calls[-2000:]
    # Read back: the writes before the lease (taken at the third sync)
    # and the first after each move of the position; 40 before.
    assert reads_back <= 8, calls[-2000:]


# argv: file. 4 KiB appended through one descriptor, each half synced; 4 KiB
# appended through a second one opened O_DIRECT (never logged: the file is
# uncovered, and the size tdax saw stays behind); a wait in which the
# write-back checkpoints the file (covered again); 100 B appended through
# the first and synced.
COVERED_AGAIN = r"""
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for half in b"ab":
    os.write(fd, bytes([half]) * 2048)
    os.fdatasync(fd)
direct = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_DIRECT)
block = mmap.mmap(-1, 4096)
block.write(b"c" * 4096)
assert os.write(direct, block) == 4096
time.sleep(0.5)
os.write(fd, b"d" * 100)
os.fdatasync(fd)
"""


def test_an_append_after_writes_a_checkpoint_covered_is_not_another_writers(dev, diskdir):
    """A checkpoint of the write-back that covers the file again catches the
    size tdax saw up with the writes it did not log: before, the next
    logged append landed past that size and was taken for another
    writer's -- a real sync, and a warning on the application's stderr."""
    f = diskdir / "f"
    r = tdax_run(dev, COVERED_AGAIN, f, env={"TDAX_WB_AGE_MS": "1", "TDAX_WB_INTERVAL_MS": "1"})
    assert r.returncode == 0, r.stderr
    c = info(dev)["counters"]
    assert c["checkpoints"] >= 1 and c.get("fallback_direct_io", 0) >= 1, c
    assert c.get("fallback_unseen_write", 0) == 0, c
    assert f.read_bytes() == b"a" * 2048 + b"b" * 2048 + b"c" * 4096 + b"d" * 100
