"""Writes the C library makes through its own internal calls, which no
hook sees, to a file tdax manages: dprintf and vdprintf (a stream of their
own on the descriptor; __dprintf_chk, their _FORTIFY_SOURCE form), the
program's stdout and stderr streams on the file (a dup2 onto 1 or 2, a
shell's redirection inherited across exec), backtrace_symbols_fd, and
syslog's copy to stderr after openlog(LOG_PERROR) (an internal dprintf;
until 2026-11-28 -- later than the others -- unseen too).
Until 2026-11-28 each went unseen and the lightweight sync after it lost
it at a power cut. Now dprintf's text goes through the write hook, and a
file at descriptor 0, 1 or 2 (or given to backtrace_symbols_fd) has its
syncs made by the kernel. The file's first 8 KiB are written and synced
(A, then B: light under policy always), then 50 C at 100 the case's way,
then fdatasync through the first descriptor; SIGKILL, power cut: C is
there."""

import os
import signal
import time

import pytest

from conftest import ACKED_C, OVER_AB, SYNCED_AB_C, acked_under_tdax, build_both, killed_and_cut

# argv: how, file.
STDIO = ACKED_C + SYNCED_AB_C + r"""
#include <execinfo.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
int __dprintf_chk(int fd, int flag, const char *fmt, ...);
void __syslog_chk(int pri, int flag, const char *fmt, ...);
static int through_vdprintf(int fd, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	int n = vdprintf(fd, fmt, ap);
	va_end(ap);
	return n;
}
int main(int argc, char **argv) {
	const char *how = argv[1];
	int fd = synced_ab(argv[2]);
	memset(buf, 'C', 50);
	if (!strcmp(how, "stdout") || !strcmp(how, "stderr")) {
		int std = !strcmp(how, "stdout") ? 1 : 2, keep = dup(std);
		FILE *stream = std == 1 ? stdout : stderr;
		must(dup2(fd, std) == std && lseek(std, 100, SEEK_SET) == 100, "dup2");
		must(fprintf(stream, "%.50s", buf) == 50 && fflush(stream) == 0, "fprintf");
		must(fdatasync(fd) == 0 && dup2(keep, std) == std, "fdatasync");
		acked();
	}
	if (!strncmp(how, "syslog", 6)) {      /* LOG_PERROR: each message copied to stderr, the file */
		must(dup2(fd, 2) == 2 && lseek(2, 100, SEEK_SET) == 100, "dup2");
		openlog("t", LOG_PERROR, LOG_USER);
		if (!strcmp(how, "syslog"))
			syslog(LOG_ERR, "%.50s", buf);
		else
			__syslog_chk(LOG_ERR, 1, "%.50s", buf);
		must(fdatasync(fd) == 0, "fdatasync");
		acked();
	}
	if (!strcmp(how, "inherited")) {     /* stdout on the file since exec (sh: 1<>file), "acked" to 3 */
		must(lseek(1, 100, SEEK_SET) == 100 && printf("%.50s", buf) == 50 && fflush(stdout) == 0, "printf");
		must(fdatasync(fd) == 0 && dprintf(3, "acked\n") == 6, "fdatasync");
		pause();
	}
	must(lseek(fd, 100, SEEK_SET) == 100, "lseek");
	if (!strcmp(how, "dprintf"))
		must(dprintf(fd, "%.50s", buf) == 50, "dprintf");
	else if (!strcmp(how, "vdprintf"))
		must(through_vdprintf(fd, "%.*s", 50, buf) == 50, "vdprintf");
	else if (!strcmp(how, "fortify"))
		must(__dprintf_chk(fd, 1, "%.50s", buf) == 50, "__dprintf_chk");
	else {                               /* backtrace: its text, whatever it is, at 100 */
		void *frames[4];
		int n = backtrace(frames, 4);
		must(n > 0, "backtrace");
		backtrace_symbols_fd(frames, n, fd);
	}
	must(fdatasync(fd) == 0, "fdatasync");
	acked();
}
"""

INHERITED = 'exec "$0" "$@" 3>&1 1<>"$2"'


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "stdio", STDIO)


@pytest.mark.parametrize("how,intercept", [("dprintf", "libc"), ("vdprintf", "libc"), ("fortify", "libc"),
                                           ("stdout", "libc"), ("stderr", "libc"), ("inherited", "libc"),
                                           ("backtrace", "libc"), ("syslog", "libc"),
                                           ("syslog-fortify", "libc"), ("dprintf", "syscall"),
                                           ("stdout", "syscall")])
def test_a_write_the_c_library_makes_itself_is_durable_after_a_sync(dev, voldisk, progs, how, intercept):
    f = voldisk.mnt / "f"
    p = acked_under_tdax(dev, progs, "stdio", intercept, how, f, shell=INHERITED if how == "inherited" else None)
    acked = f.read_bytes()
    if how.startswith("syslog"):
        assert acked[:153] == b"B" * 100 + b"t: " + b"C" * 50, "the case did not do what it says"
    elif how != "backtrace":
        assert acked == OVER_AB, "the case did not do what it says"
    else:
        assert acked[:100] == b"B" * 100 and acked[100:150] != b"B" * 50, "no backtrace written"
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == acked, f"acknowledged data lost ({how}, --intercept {intercept})"


# argv: file. In bypass mode: the file opened at descriptor 1 (stdout
# closed first, as a daemon's may be), written and synced until promoted
# were it not there (a file is never promoted through descriptor 0, 1 or
# 2: the stream may be used later, unseen); then 50 C at 100 by printf,
# fflush, fdatasync.
AT_STDOUT = ACKED_C + r"""
#include <fcntl.h>
#include <string.h>
static char buf[8192];
int main(int argc, char **argv) {
	int out = dup(1);
	must(out > 2 && close(1) == 0, "close");
	must(open(argv[1], O_RDWR | O_CREAT, 0644) == 1 && fsync(1) == 0, "open at 1");
	memset(buf, 'B', sizeof(buf));
	for (int i = 0; i < 50; i++)
		must(pwrite(1, buf, sizeof(buf), 0) == sizeof(buf) && fdatasync(1) == 0, "B");
	memset(buf, 'C', 50);
	must(lseek(1, 100, SEEK_SET) == 100 && printf("%.50s", buf) == 50 && fflush(stdout) == 0, "printf");
	must(fdatasync(1) == 0 && dprintf(out, "acked\n") == 6, "fdatasync");
	pause();
}
"""


@pytest.fixture(scope="module")
def at_stdout(tmp_path_factory):
    return build_both(tmp_path_factory, "atstdout", AT_STDOUT)


def test_a_file_at_stdout_is_not_promoted_in_bypass_mode(dev, voldisk, at_stdout):
    f = voldisk.mnt / "f"
    p = acked_under_tdax(dev, at_stdout, "atstdout", "libc", f, mode="bypass")
    assert f.read_bytes() == OVER_AB, "the case did not do what it says"
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == OVER_AB, "acknowledged data lost (bypass mode, the file at stdout)"


# argv: file. The file at descriptor 1 (light syncs under policy always),
# then daemon() (its child points 0, 1 and 2 at /dev/null with its own
# dup2s), 50 X at 100 by pwrite to 1 -- /dev/null now -- and a sync of the
# file; "acked" and the daemon's pid to the descriptor kept.
DAEMON = ACKED_C + SYNCED_AB_C + r"""
#include <string.h>
int main(int argc, char **argv) {
	int fd = synced_ab(argv[1]), out = dup(1);
	must(out > 2 && dup2(fd, 1) == 1, "dup2");
	must(daemon(1, 0) == 0, "daemon");
	memset(buf, 'X', 50);
	must(pwrite(1, buf, 50, 100) == 50 && fdatasync(fd) == 0, "X to /dev/null");
	must(dprintf(out, "acked\n%d\n", getpid()) > 0, "acked");
	pause();
}
"""


@pytest.fixture(scope="module")
def daemon_prog(tmp_path_factory):
    return build_both(tmp_path_factory, "daemon", DAEMON)


def test_a_daemons_standard_descriptors_are_dev_null_to_tdax_too(dev, voldisk, daemon_prog):
    """Until 2026-11-28 the entry of descriptor 1 still named the file after
    daemon() and a pwrite to /dev/null through it was logged as the file's:
    the power cut brought X into it."""
    f = voldisk.mnt / "f"
    p = acked_under_tdax(dev, daemon_prog, "daemon", "libc", f)
    daemon = int(p.stdout.readline())  # in a session of its own: not p's group
    assert f.read_bytes() == b"B" * 8192, "the case did not do what it says"
    os.kill(daemon, signal.SIGKILL)
    for _ in range(500):  # gone (or a zombie: nothing of it holds the disk)
        try:
            if open(f"/proc/{daemon}/stat").read().split(")")[-1].split()[0] == "Z":
                break
        except FileNotFoundError:
            break
        time.sleep(0.01)
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == b"B" * 8192, "bytes written to /dev/null came into the file"
