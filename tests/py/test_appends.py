"""Appends at an end tdax knows (src/preload/appends.h): while a write
lease makes the process the file's only writer, an O_APPEND write is
logged at the end the last one left, without reading the position back
from the kernel. Each case here changes the file's end another way between
two runs of synced appends -- a truncate, a fallocate, a pwrite, a copy
into it, a write at the position with O_APPEND cleared, another open of
the file, a program without tdax appending, a child of fork appending, a
duplicate made before the file had an entry --
and the appends after it must be logged where the kernel put them: killed
after the last acknowledged sync, power cut, recovered, the file is what
the kernel made it. (The test build also checks every known end against
the kernel's and aborts on a wrong one.) A positive control shows that
the power cut catches an end not forgotten."""

import os
import re
import subprocess

import pytest

from conftest import ACKED_C, TDAX_ENV, TDAX_PRODUCT, acked_under_tdax, build_both, info, killed_and_cut

# argv: how, file, another file (the source of the copies), and "exit" to
# end instead of waiting for the kill. 20 appends of 100 B, each synced
# (the lease comes after three, the end is known), the change `how`, 20
# more.
APPENDER = ACKED_C + r"""
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
static int fd, dupfd = -1;
static const char *path;
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
static void change(const char *how, const char *other) {
	if (!strcmp(how, "ftruncate-shrink"))
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
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
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
           "copy", "sendfile", "no-append", "reopen", "outside", "outside-child", "fork", "dup"]


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "appender", APPENDER, "-pthread")


def appended(dev, voldisk, progs, how):
    """The appender run with change `how` on voldisk, killed and cut after
    its last sync: what the file held before the cut, and after."""
    f, src = voldisk.mnt / "f", voldisk.mnt / "src"
    src.write_bytes(bytes(range(256)) * 4)
    if how == "outside":  # a program without tdax appends while it waits
        shell = ('exec "$0" "$@" | { read -r ready && '
                 'env -u LD_PRELOAD /bin/sh -c \'printf xyz >> "$1"\' sh "$2" && cat; }')
        p = acked_under_tdax(dev, progs, "appender", "libc", how, f, src, shell=shell)
    else:
        p = acked_under_tdax(dev, progs, "appender", "libc", how, f, src)
    acked = f.read_bytes()
    killed_and_cut(p, dev, voldisk)
    return acked, f.read_bytes()


@pytest.mark.parametrize("how", CHANGES)
def test_an_append_after_another_change_is_logged_where_the_kernel_put_it(dev, voldisk, progs, how):
    acked, after = appended(dev, voldisk, progs, how)
    assert acked.endswith(b"".join(bytes([c]) * 100 for c in b"ABCDEFGHIJKLMNOPQRST")), \
        "the case did not do what it says"
    assert after == acked, f"acknowledged appends misplaced or lost after a change ({how})"
    assert info(dev)["counters"]["known_appends"] > 0, "no append was logged at a known end"


def test_positive_control_an_end_not_forgotten_misplaces_the_appends(dev, voldisk, progs, monkeypatch):
    """TDAX_TEST_APPENDS_BLIND: a truncate forgets nothing, and the appends
    after it are logged 250 bytes past where the kernel put them."""
    monkeypatch.setitem(TDAX_ENV, "TDAX_TEST_APPENDS_BLIND", "1")
    acked, after = appended(dev, voldisk, progs, "ftruncate-shrink")
    assert after != acked


def test_the_offset_of_a_leased_append_costs_no_system_call(dev, diskdir, progs):
    """The product library: of 40 synced appends, those after the lease
    read no position back (an lseek each before)."""
    f = diskdir / "f"
    trace = diskdir / "strace"
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=lseek,write", "-o", str(trace), str(TDAX_PRODUCT), "run",
                    "--device", dev, "--policy", "always", "--", str(progs / "appender"), "none", str(f), "/dev/null", "exit"],
                   env={**os.environ, "TDAX_QUIET": "1"}, stdin=subprocess.DEVNULL,
                   stdout=subprocess.PIPE, timeout=120, check=False, start_new_session=True)
    calls = trace.read_text()
    appends = len(re.findall(r"^\d+ +write\(\d+, \"([a-tA-T])\1\1", calls, re.M))
    reads_back = len(re.findall(r"^\d+ +lseek\(\d+, 0, SEEK_CUR\)", calls, re.M))
    assert appends == 40, calls[-2000:]
    assert reads_back <= 5, calls[-2000:]
