"""A file size limit (RLIMIT_FSIZE, `ulimit -f`) under tdax is the
command's, as without it: a write that would pass it ends at it, the next
one fails with EFBIG, and the writer gets SIGXFSZ (which kills it unless
ignored). Under --intercept syscall the supervisor makes the command's
writes, with its own limit: before, a limit the command set itself was not
kept (the file grew past it), and one inherited from the shell killed the
supervisor with SIGXFSZ at the first write past it, every later call of the
command then failing with ENOSYS."""
import resource
import signal

import pytest

from conftest import TDAX, TDAX_ENV, build_both, run

# argv: file, "set" (lower the limit to 4 KiB itself) or "inherit", and
# "ignore" (SIGXFSZ) or "die". Two 8 KiB writes, then what each returned.
WRITER = r"""
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
static char buf[8192];
int main(int argc, char **argv) {
	(void)argc;
	if (!strcmp(argv[2], "set") && setrlimit(RLIMIT_FSIZE, &(struct rlimit){ 4096, 4096 }) != 0)
		return perror("setrlimit"), 1;
	if (!strcmp(argv[3], "ignore"))
		signal(SIGXFSZ, SIG_IGN);
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return perror("open"), 1;
	memset(buf, 'x', sizeof(buf));
	for (int i = 0; i < 2; i++) {
		ssize_t n = write(fd, buf, sizeof(buf));
		printf("write %zd %s\n", n, n < 0 ? strerror(errno) : "");
		fflush(stdout);
	}
	printf("sync %d\n", fdatasync(fd));
	return 0;
}
"""


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    return build_both(tmp_path_factory, "writer", WRITER)


def limited():
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))


@pytest.mark.parametrize("on_signal", ["ignore", "die"])
@pytest.mark.parametrize("limit", ["set", "inherit"])
@pytest.mark.parametrize("intercept", ["libc", "syscall"])
def test_a_file_size_limit_is_kept_as_without_tdax(dev, diskdir, progs, intercept, limit, on_signal):
    exe = progs / ("writer-static" if intercept == "syscall" else "writer")
    f = diskdir / "f"
    pre = limited if limit == "inherit" else None
    plain = run(exe, f, limit, on_signal, preexec_fn=pre)
    plain_size = f.stat().st_size
    f.unlink()
    under = run(TDAX, "run", "--device", dev, "--policy", "always", "--intercept", intercept, "--",
                exe, f, limit, on_signal, env=TDAX_ENV, preexec_fn=pre)
    if on_signal == "ignore":
        assert plain.returncode == 0 and plain.stdout == "write 4096 \nwrite -1 File too large\nsync 0\n", plain
    else:
        assert plain.returncode == -signal.SIGXFSZ and plain.stdout == "write 4096 \n", plain
    # tdax run dies of its command's signal, as the command did
    assert (under.returncode, under.stdout) == (plain.returncode, plain.stdout), under.stderr
    assert f.stat().st_size == plain_size == 4096
