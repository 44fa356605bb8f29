"""tdax run --intercept syscall (src/cli/intercept.c, notify.c): programs
whose file calls skip libc (Go, static binaries) are seen through a seccomp
filter and a supervisor under libtdax.so; and never silently not seen."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import BUILD, PY, TDAX, TDAX_ENV, counters_once, info, killed_and_cut, made_durable, run

ORACLE = BUILD / "tests" / "tdax-oracle"

# 300 appends of 128 B, each synced; the last line says how many were acknowledged.
RAW = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	char rec[129];
	int n = 0;
	for (; n < 300; n++) {
		snprintf(rec, sizeof(rec), "%-127d\n", n);
		if (write(fd, rec, 128) != 128 || fdatasync(fd) != 0)
			return 1;
	}
	printf("acked %d\n", n);
	return 0;
}
"""


# Writes the filter cannot see, then a sync through the placed descriptor:
# it must be real. A: a placed write and sync of 256 bytes; B: 128 bytes
# written over its second half (in place: the size guard cannot see it).
HOLES = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
static char a[256], b[128];
static void must(int ok, const char *what) { if (!ok) { perror(what); _exit(1); } }
/* fd sent over a Unix socket to this process itself: a new, low number. */
static int passed(int fd) {
	int sv[2], got;
	char byte = 0, ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec io = { &byte, 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
	must(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	must(sendmsg(sv[0], &m, 0) == 1, "sendmsg");
	memset(ctl, 0, sizeof(ctl));
	must(recvmsg(sv[1], &m, 0) == 1 && CMSG_FIRSTHDR(&m), "recvmsg");
	memcpy(&got, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
	return got;
}
int main(int argc, char **argv) {
	memset(a, 'A', sizeof(a));
	memset(b, 'B', sizeof(b));
	const char *how = argv[1];
	if (!strcmp(how, "nofile")) { /* no number above the base to place it at */
		struct rlimit rl = { 256, 256 };
		must(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
	}
	int fd = open(argv[2], O_WRONLY | O_CREAT, 0644);
	must(fd >= 0, "open");
	must(pwrite(fd, a, 256, 0) == 256 && fdatasync(fd) == 0, "A");
	int by = fd;
	if (!strcmp(how, "dup-down"))            /* a duplicate below the base */
		by = dup(fd);
	else if (!strcmp(how, "inherited"))      /* the same file, open from before exec */
		by = atoi(argv[3]);
	else if (!strcmp(how, "scm-rights"))     /* sent over a Unix socket */
		by = passed(fd);
	else if (!strcmp(how, "pidfd-getfd"))    /* taken from a process (itself) */
		by = (int)syscall(SYS_pidfd_getfd, (int)syscall(SYS_pidfd_open, getpid(), 0), fd, 0);
	must(by >= 0, how);
	if (!strcmp(how, "fork")) {              /* the child writes through the placed one */
		pid_t c = fork();
		if (c == 0)
			_exit(pwrite(fd, b, 128, 128) != 128);
		int st;
		must(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child");
	} else {
		must(pwrite(by, b, 128, 128) == 128, "B");
	}
	must(fdatasync(fd) == 0, "sync");
	printf("acked fd %d\n", fd);
	fflush(stdout);
	pause();
	return 0;
}
"""


# A view: 20 synced writes, a shared read-only mapping, an anonymous one
# made writable, 20 more synced writes (each read back through the view); then, after a line on stdin, the mapping
# made writable (by this process, or by a forked child: its copy of the
# mapping), a store through it, a sync, 5 synced writes past it.
VIEWS = r"""
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
static void must(int ok, const char *what) { if (!ok) { perror(what); _exit(1); } }
static void put(int fd, int i, char c) {
	char b[128];
	memset(b, c, sizeof(b));
	must(pwrite(fd, b, 128, i * 128) == 128 && fdatasync(fd) == 0, "put");
}
int main(int argc, char **argv) {
	int fd = open(argv[2], O_RDWR | O_CREAT, 0644), i;
	must(fd >= 0, "open");
	for (i = 0; i < 20; i++)
		put(fd, i, 'v');
	char *m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
	must(m != MAP_FAILED, "mmap");
	/* A mapping made writable elsewhere (a thread's stack, an arena). */
	char *anon = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	must(anon != MAP_FAILED && mprotect(anon, 4096, PROT_READ | PROT_WRITE) == 0, "anon");
	for (; i < 40; i++) {
		put(fd, i, 'v');
		must(m[i * 128] == 'v', "seen through the view");
	}
	printf("viewed\n");
	fflush(stdout);
	must(getchar() != EOF, "stdin");
	if (!strcmp(argv[1], "child")) {
		pid_t c = fork();
		if (c == 0) {
			must(mprotect(m, 8192, PROT_READ | PROT_WRITE) == 0, "mprotect");
			m[0] = 'W';
			_exit(0);
		}
		int st;
		must(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child");
	} else {
		must(mprotect(m, 8192, PROT_READ | PROT_WRITE) == 0, "mprotect");
		m[0] = 'W';
	}
	must(fdatasync(fd) == 0, "sync");
	for (; i < 45; i++)
		put(fd, i, 'x');
	printf("acked\n");
	fflush(stdout);
	pause();
	return 0;
}
"""


# O_DIRECT: four aligned 4 KiB blocks, each written by pwrite and synced.
DIRECT = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static void must(int ok, const char *what) { if (!ok) { perror(what); _exit(1); } }
int main(int argc, char **argv) {
	void *buf;
	int fd = open(argv[1], O_RDWR | O_CREAT | O_DIRECT, 0644);
	must(fd >= 0 && posix_memalign(&buf, 4096, 4096) == 0, "open");
	for (int i = 0; i < 4; i++) {
		memset(buf, 'a' + i, 4096);
		must(pwrite(fd, buf, 4096, i * 4096) == 4096 && fdatasync(fd) == 0, "block");
	}
	printf("acked\n");
	fflush(stdout);
	pause();
	return 0;
}
"""


# Names of the process itself: argv[1] becomes stdout, then each name of
# it is opened for writing (append) and written to; argv[2] is a symbolic
# link to /dev/stdout, opened last.
SELF = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || dup2(fd, 1) != 1)
		return 1;
	char self[64], devfd[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	snprintf(devfd, sizeof(devfd), "/dev/fd/%d", fd);
	const char *names[] = { self, devfd, "/dev/stdout", "/proc/thread-self/fd/1", "/proc//self/fd/1", argv[2] };
	for (int i = 0; i < 6; i++) {
		int n = open(names[i], O_WRONLY | O_APPEND);
		if (n < 0 || dprintf(n, "%s\n", names[i]) < 0 || fsync(n) != 0)
			return 2 + i;
	}
	return 0;
}
"""


# A root or mount namespace of its own: argv[1] how (chroot, mount-ns),
# argv[2] a directory on the disk. mount-ns: a tmpfs over the directory,
# in a namespace of its own, then its "f" written; chroot: the directory
# made the root, then "/f" written. Either way the disk's dir/f is not the
# file the program writes (mount-ns) or is (chroot).
ROOTS = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>
int main(int argc, char **argv) {
	char f[4096];
	snprintf(f, sizeof(f), "%s/f", argv[2]);
	if (!strcmp(argv[1], "mount-ns")) {
		if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
		    mount("tmpfs", argv[2], "tmpfs", 0, NULL) != 0)
			return 1;
	} else {
		if (chroot(argv[2]) != 0 || chdir("/") != 0)
			return 1;
		strcpy(f, "/f");
	}
	int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "mine", 4) != 4 || fsync(fd) != 0 || close(fd) != 0)
		return 2;
	return 0;
}
"""


# An open as a raw caller (Go's runtime) may make it: a mode without
# O_CREAT, and a flag bit the kernel does not know -- openat drops both.
LOOSE = r"""
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
	int fd = (int)syscall(SYS_openat, AT_FDCWD, argv[1], O_WRONLY | 0x40000000, 0644);
	return fd < 0 ? 1 : write(fd, "ok", 2) == 2 && fsync(fd) == 0 ? 0 : 2;
}
"""


# A process made not dumpable: its memory is another user's to read only
# with privilege. argv[1]: a file, written and synced.
NODUMP = r"""
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>
int main(int argc, char **argv) {
	if (prctl(PR_SET_DUMPABLE, 0) != 0)
		return 1;
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	return fd < 0 ? 2 : write(fd, "hello", 5) != 5 ? 3 : fdatasync(fd) != 0 ? 4 : 0;
}
"""


# argv: file. 160 MiB of a pattern in one write (the supervisor makes it in
# pieces of 64 MiB), while another thread makes the process not dumpable
# as soon as the file has a byte; then the rest, as a program that loops
# on a short write. Prints what the first write returned and the total.
BIG_NODUMP = r"""
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>
#define N (160 << 20)
static const char *path;
static void *undump(void *arg) {
	struct stat st;
	while (stat(path, &st) != 0 || st.st_size == 0)
		;
	prctl(PR_SET_DUMPABLE, 0);
	return arg;
}
int main(int argc, char **argv) {
	(void)argc;
	path = argv[1];
	unsigned char *buf = malloc(N);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (!buf || fd < 0)
		return 1;
	for (size_t i = 0; i < N; i++)
		buf[i] = (unsigned char)(i % 251);
	pthread_t t;
	pthread_create(&t, NULL, undump, NULL);
	ssize_t first = write(fd, buf, N), done = first;
	while (done > 0 && done < N) {
		ssize_t w = write(fd, buf + done, N - done);
		if (w <= 0)
			break;
		done += w;
	}
	pthread_join(t, NULL);
	printf("%zd %zd\n", first, done);
	return fdatasync(fd) != 0;
}
"""

# A process that gives up a right: argv[1] how (landlock: a sandbox that
# handles writes to files and allows none; capset: root dropping
# CAP_DAC_OVERRIDE), argv[2] a file it then may not open for writing.
# Prints what its open got.
SANDBOX = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
	if (!strcmp(argv[1], "landlock")) {
		struct landlock_ruleset_attr attr = { .handled_access_fs = LANDLOCK_ACCESS_FS_WRITE_FILE };
		int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
		if (rs < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_landlock_restrict_self, rs, 0))
			return 1;
	} else {
		struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
		struct __user_cap_data_struct d[2];
		if (syscall(SYS_capget, &h, d))
			return 1;
		d[0].effective &= ~(1u << CAP_DAC_OVERRIDE);
		if (syscall(SYS_capset, &h, d))
			return 1;
	}
	int fd = open(argv[2], O_WRONLY);
	printf("%s\n", fd < 0 ? strerror(errno) : "opened");
	return 0;
}
"""


def build_static(tmp_path_factory, name, source):
    d = tmp_path_factory.mktemp(name)
    (d / f"{name}.c").write_text(source)
    run("cc", "-O2", "-static", "-o", d / name, d / f"{name}.c")
    return d / name


@pytest.fixture(scope="module")
def static_prog(tmp_path_factory):
    return build_static(tmp_path_factory, "raw", RAW)


@pytest.fixture(scope="module")
def holes_prog(tmp_path_factory):
    return build_static(tmp_path_factory, "holes", HOLES)


@pytest.fixture(scope="module")
def views_prog(tmp_path_factory):
    return build_static(tmp_path_factory, "views", VIEWS)


def status(dev):
    return json.loads(run(TDAX, "status", "--device", dev, "--json").stdout)


def tdax(dev, *args, env=None, **kw):
    return run(TDAX, "run", "--device", dev, "--policy", "always", *args,
               env={**TDAX_ENV, "TDAX_QUIET": "0", **(env or {})}, **kw)


def test_a_static_binary_is_seen_through_the_filter(dev, diskdir, static_prog):
    out = diskdir / "f"
    p = tdax(dev, "--intercept", "syscall", "--", static_prog, out)
    assert p.returncode == 0 and "acked 300" in p.stdout, p.stderr
    assert "sees none" not in p.stderr, p.stderr
    assert out.read_bytes() == b"".join(b"%-127d\n" % i for i in range(300))
    s = status(dev)["counters"]
    assert s["logged_writes"] == 300 and s["light_syncs"] >= 299, s


def test_auto_traps_a_program_that_skips_libc_and_never_is_silent(dev, diskdir, static_prog, tmp_path):
    """The default (--intercept auto) traps a static binary's and a Go
    program's calls (an ELF file with Go's build-info section: how tdax
    tells one); --intercept libc, and bypass mode (which the filter does
    not serve), say at start that nothing is seen, and indeed nothing is."""
    p = tdax(dev, "--", static_prog, diskdir / "f")
    assert p.returncode == 0 and "acked 300" in p.stdout and p.stderr == "", p.stderr
    seen = status(dev)["counters"]["light_syncs"]
    assert seen >= 299
    p = tdax(dev, "--intercept", "libc", "--", static_prog, diskdir / "g")
    assert p.returncode == 0 and "is statically linked" in p.stderr and "sees none" in p.stderr
    assert "--intercept libc;" in p.stderr, p.stderr
    assert status(dev)["counters"]["light_syncs"] == seen  # none of g's
    p = tdax(dev, "--mode", "bypass", "--", static_prog, diskdir / "h")
    assert p.returncode == 0 and "sees none" in p.stderr and "coherent mode only" in p.stderr, p.stderr
    fake_go = tmp_path / "go-prog"
    shutil.copy("/bin/true", fake_go)
    run("objcopy", "--add-section", f".go.buildinfo={fake_go}", fake_go, fake_go)
    p = tdax(dev, "--verbose", "--", fake_go)
    assert p.returncode == 0 and "skips libc: its file calls are trapped" in p.stderr, p.stderr
    p = tdax(dev, "--intercept", "libc", "--", fake_go)
    assert p.returncode == 0 and "is a Go program" in p.stderr, p.stderr
    p = tdax(dev, "--intercept", "libc", "--quiet", "--", fake_go)
    assert p.stderr == ""
    p = tdax(dev, "--", "/bin/true")  # a libc program: nothing to say
    assert p.returncode == 0 and p.stderr == "", p.stderr
    p = tdax(dev, "--", fake_go, env={"TDAX_INTERCEPT": "libc"})
    assert "is a Go program" in p.stderr, p.stderr
    p = tdax(dev, "--", "/bin/true", env={"TDAX_INTERCEPT": "seccomp"})
    assert p.returncode == 2 and "unknown --intercept (or TDAX_INTERCEPT) 'seccomp'" in p.stderr
    p = tdax(dev, "--mode", "bypass", "--intercept", "syscall", "--", "/bin/true")
    assert p.returncode == 2 and "coherent mode only" in p.stderr


def test_a_program_that_skips_libc_started_by_a_managed_one_is_trapped(dev, diskdir, static_prog):
    """A static program started by a libc program under tdax (a shell, a
    script, Python's subprocess, posix_spawnp): libtdax.so's hook starts it through
    tdax run, so its calls are trapped as if tdax run had started it; where
    that is not wanted (--intercept libc) or possible (bypass mode, which
    the filter does not serve: tdax run, started all the same, says so; no
    tdax run: LD_PRELOAD by hand), one line says it is unseen."""
    def light():
        return status(dev)["counters"]["light_syncs"]

    p = tdax(dev, "--", "sh", "-c", '"$0" "$1"; echo "rc=$?"', static_prog, diskdir / "f")
    assert "acked 300" in p.stdout and "rc=0" in p.stdout and p.stderr == "", (p.stdout, p.stderr)
    seen = light()
    assert seen >= 299
    code = "import subprocess, sys; print(subprocess.run(sys.argv[1:], capture_output=True, text=True).stdout)"
    p = tdax(dev, "--", "/usr/bin/python3", "-c", code, static_prog, diskdir / "g")
    assert "acked 300" in p.stdout and p.stderr == "", (p.stdout, p.stderr)
    assert light() >= seen + 299
    seen = light()
    code = "import os, sys; pid = os.posix_spawnp(os.path.basename(sys.argv[1]), sys.argv[1:], os.environ); " \
           "print(os.waitpid(pid, 0)[1])"
    p = tdax(dev, "--", "/usr/bin/python3", "-c", code, static_prog, diskdir / "g2",
             env={"PATH": f"{static_prog.parent}:{os.environ['PATH']}"})
    assert "acked 300" in p.stdout and p.stdout.endswith("\n0\n") and p.stderr == "", (p.stdout, p.stderr)
    assert light() >= seen + 299
    seen = light()
    for opts, why in [(["--intercept", "libc"], "(--intercept libc)"),
                      (["--mode", "bypass"], "coherent mode only")]:
        p = tdax(dev, *opts, "--", "sh", "-c", '"$0" "$1"', static_prog, diskdir / "h")
        assert "acked 300" in p.stdout, p.stderr
        assert "is statically linked" in p.stderr and "so libtdax.so sees none" in p.stderr, p.stderr
        assert why in p.stderr, p.stderr
    by_hand = {**os.environ, **TDAX_ENV, "TDAX_QUIET": "0", "TDAX_DEVICE": dev,
               "LD_PRELOAD": str(BUILD / "lib" / "libtdax.so")}
    p = run("sh", "-c", '"$0" "$1"', static_prog, diskdir / "i", env=by_hand)
    assert "not preloaded by tdax run" in p.stderr, p.stderr
    assert light() == seen


def test_the_command_keeps_its_exit_status_its_signals_and_its_children(dev, diskdir):
    p = tdax(dev, "--intercept", "syscall", "--", "sh", "-c",
             "echo made > $0; mv $0 $0.moved; cat $0.moved; exit 7", diskdir / "f")
    assert p.returncode == 7 and p.stdout == "made\n", p.stderr
    assert status(dev)["counters"]["logged_renames"] == 1  # made by the supervisor, through the hook
    assert (diskdir / "f.moved").read_text() == "made\n" and not (diskdir / "f").exists()
    q = subprocess.Popen([str(TDAX), "run", "--device", dev, "--intercept", "syscall", "--",
                          "sleep", "30"], env={**os.environ, **TDAX_ENV})
    time.sleep(0.5)
    q.send_signal(signal.SIGTERM)
    assert q.wait(timeout=10) == -signal.SIGTERM


@pytest.mark.parametrize("cut", [False, True])
def test_the_oracle_under_the_filter_loses_nothing_acknowledged(dev, voldisk, cut):
    """The C oracle (every write, sync, rename and truncation path) with
    every call trapped and made by the supervisor: killed at a random
    point, and with a power cut after the kill, every acknowledged record
    is there after recovery."""
    app = voldisk.mnt / "app"
    app.mkdir()
    oracle = voldisk.base / "oracle"  # not on the disk that loses its cache
    p = subprocess.Popen([str(TDAX), "run", "--device", dev, "--policy", "always", "--intercept",
                          "syscall", "--", str(ORACLE), "run", str(app), str(oracle)],
                         env={**os.environ, **TDAX_ENV, "TDAX_TEST_DURABLE_SHADOW": "0"},
                         start_new_session=True)
    time.sleep(1.5)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    time.sleep(0.2)
    logged = info(dev)["live_records"]
    if cut:
        voldisk.cut()
        voldisk.reboot()
    r = run(TDAX, "recover", "--device", dev, *(["--power-failure"] if cut else []), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    c = run(ORACLE, "check", app, oracle)
    assert c.returncode == 0, c.stdout + c.stderr
    acked = int(c.stdout.split()[1])
    assert acked > 100 and logged > 0, (c.stdout, logged)  # syncs were answered from the log


@pytest.mark.parametrize("how", ["plain", "dup-down", "inherited", "fork", "nofile", "scm-rights",
                                 "pidfd-getfd", "fork-unfollowed"])
def test_writes_the_filter_does_not_see_make_the_sync_real(dev, voldisk, holes_prog, how):
    """Only descriptors the supervisor placed at the base or above are
    trapped. A write through a lower one -- a dup, one inherited across
    exec, one received over a Unix socket (SCM_RIGHTS) or taken with
    pidfd_getfd, a file that could not be placed (RLIMIT_NOFILE below the base) --
    is unseen, so the file's next sync through the placed one must be real;
    a forked child's write through the placed number is trapped and logged.
    A child the supervisor cannot follow (its table of processes full: a
    test aid makes it one slot) writes through the placed number by the
    kernel, unseen: the supervisor says so and every sync is real from then.
    Killed after the acknowledged sync, power cut: both records are there."""
    f = voldisk.mnt / "f"
    f.write_bytes(b"")
    env = {**os.environ, **TDAX_ENV, "TDAX_TEST_DURABLE_SHADOW": "0"}
    if how == "fork-unfollowed":
        env["TDAX_TEST_SUPERVISOR_PROCS"] = "1"
    with open(f, "r+b") as inherited:
        fd = inherited.fileno()
        p = subprocess.Popen([str(TDAX), "run", "--device", dev, "--policy", "always", "--intercept",
                              "syscall", "--", str(holes_prog), how.split("-unfollowed")[0], str(f), str(fd)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True, pass_fds=(fd,) if how == "inherited" else ())
    line = p.stdout.readline()
    assert line.startswith("acked fd"), line
    placed = int(line.split()[2])
    assert (placed >= 512) == (how != "nofile"), line
    killed_and_cut(p, dev, voldisk)
    said = p.stderr.read()
    assert ("cannot follow process" in said) == (how == "fork-unfollowed"), said
    assert f.read_bytes() == b"A" * 128 + b"B" * 128, how


def test_an_o_direct_writer_under_the_filter_writes_as_without_tdax(dev, voldisk, tmp_path_factory):
    """The supervisor makes a trapped write from its own copy of the
    caller's bytes: for an O_DIRECT file that copy must be as aligned as
    the kernel wants (it was not, until 2026-11-27: EINVAL, where the
    write succeeds without tdax). Killed after the syncs, power cut: every
    block is there."""
    f = voldisk.mnt / "f"
    prog = build_static(tmp_path_factory, "direct", DIRECT)
    p = subprocess.Popen([str(TDAX), "run", "--device", dev, "--policy", "always", "--intercept", "syscall", "--",
                          str(prog), str(f)],
                         env={**os.environ, **TDAX_ENV, "TDAX_TEST_DURABLE_SHADOW": "0"},
                         stdout=subprocess.PIPE, text=True, start_new_session=True)
    line = p.stdout.readline()
    assert line == "acked\n", line
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == b"".join(bytes([ord("a") + i]) * 4096 for i in range(4))


def test_a_name_of_the_process_itself_is_the_callers_under_the_filter(dev, diskdir, tmp_path_factory):
    """/proc/self, /proc/thread-self, /dev/fd and /dev/stdout mean the
    opening process to the kernel: opened by the supervisor they meant the
    supervisor (until 2026-11-27 a write to /dev/stdout went to its
    stdout, not the command's file). Spelled with the caller's numbers
    now; another way there (a symbolic link to /dev/stdout, /proc//self)
    goes to the kernel, and the supervisor says it follows no more."""
    f, link = diskdir / "out", diskdir / "link"
    link.symlink_to("/dev/stdout")
    prog = build_static(tmp_path_factory, "self", SELF)
    p = run(TDAX, "run", "--device", dev, "--intercept", "syscall", "--", prog, f, link,
            env={**TDAX_ENV, "TDAX_QUIET": "0"})
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert p.stdout == "", p.stdout  # nothing went to the supervisor's stdout
    lines = f.read_text().splitlines()
    assert lines[2:] == ["/dev/stdout", "/proc/thread-self/fd/1", "/proc//self/fd/1", str(link)], lines
    assert lines[0].startswith("/proc/self/fd/") and lines[1].startswith("/dev/fd/"), lines
    assert "an open through a magic link" in p.stderr, p.stderr


def test_a_file_of_proc_through_a_symbolic_link_is_the_callers_under_the_filter(dev, diskdir):
    """A user's symbolic link to /proc/self (not a magic link), then a file
    of it: opened by the supervisor, it was the supervisor's (until
    2026-11-27 this command renamed the supervisor, not itself). A file of
    /proc goes to the kernel, opened in the caller."""
    link = diskdir / "me"
    link.symlink_to("/proc/self")
    code = ("import sys\n"
            "with open(sys.argv[1] + '/comm', 'w') as f: f.write('renamed-me')\n"
            "print(open('/proc/self/comm').read().strip())\n")
    p = run(TDAX, "run", "--device", dev, "--intercept", "syscall", "--", PY, "-c", code, link, env=TDAX_ENV)
    assert (p.returncode, p.stdout) == (0, "renamed-me\n"), p.stderr


# argv: directory, file in it (8 KiB, mode 0666, made durable before). B
# over the file, synced (light under policy always); a child that becomes
# another user (nobody) writes C over its first 4 KiB through an open of
# its own (at the directory's descriptor: the way there may be closed to
# nobody); the parent's fdatasync then acknowledges that write too.
OTHER_USER = r"""
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static char buf[8192];
static void must(int ok, const char *what) { if (!ok) { perror(what); _exit(1); } }
int main(int argc, char **argv) {
	(void)argc;
	int dir = open(argv[1], O_RDONLY | O_DIRECTORY), fd = openat(dir, argv[2], O_RDWR);
	must(dir >= 0 && fd >= 0, "open");
	memset(buf, 'B', sizeof(buf));
	must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fsync(fd) == 0, "B");
	pid_t child = fork();
	if (child == 0) {
		must(setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0, "nobody");
		int mine = openat(dir, argv[2], O_WRONLY);
		memset(buf, 'C', 4096);
		must(mine >= 0 && pwrite(mine, buf, 4096, 0) == 4096, "C");
		_exit(0);
	}
	int st;
	must(child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st), "child");
	must(fdatasync(fd) == 0, "fdatasync");
	printf("acked\n");
	fflush(stdout);
	pause();
	return 0;
}
"""


def test_an_open_by_another_user_makes_the_supervisor_follow_no_more(dev, voldisk, tmp_path_factory):
    """An open for writing by a process of another user than the
    supervisor's is the kernel's (the supervisor never acts with rights
    the caller lacks): its writes are unseen. Before 2026-11-27 a served
    process's light sync of the same file then acknowledged such a write
    that a power cut lost. The supervisor follows no more (every sync
    real) once such an open reaches a file it could keep."""
    f = voldisk.mnt / "f"
    made_durable(voldisk.mnt, {f: b"A" * 8192})
    os.chmod(f, 0o666)
    prog = build_static(tmp_path_factory, "otheruser", OTHER_USER)
    p = subprocess.Popen([str(TDAX), "run", "--device", dev, "--policy", "always", "--intercept", "syscall",
                          "--", str(prog), str(voldisk.mnt), "f"], env={**os.environ, **TDAX_ENV, "TDAX_TEST_DURABLE_SHADOW": "0",
                                                         "TDAX_QUIET": "0"},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    line = p.stdout.readline()
    assert line == "acked\n", line + p.stderr.read()
    expect = b"C" * 4096 + b"B" * 4096
    assert f.read_bytes() == expect, "the case did not do what it says"
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == expect, "acknowledged data lost"
    assert "another user or groups" in p.stderr.read()


# argv: file. 96 MiB of a pattern by write, then again by pwrite past
# them, then by a writev of three pieces at the end: what each returned.
BIG_WRITES = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>
#define N (96 << 20)
int main(int argc, char **argv) {
	(void)argc;
	unsigned char *buf = malloc(N);
	for (size_t i = 0; i < N; i++)
		buf[i] = (unsigned char)(i % 251);
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!buf || fd < 0)
		return 1;
	struct iovec v[3] = { { buf, 1 << 20 }, { buf + (1 << 20), 70 << 20 }, { buf + (71 << 20), 25 << 20 } };
	ssize_t w = write(fd, buf, N), p = pwrite(fd, buf, N, N);
	lseek(fd, 0, SEEK_END);
	printf("%zd %zd %zd\n", w, p, writev(fd, v, 3));
	return 0;
}
"""


def test_a_write_larger_than_the_supervisors_buffer_is_made_whole(dev, diskdir, tmp_path_factory):
    """The supervisor reads a write's bytes into a buffer of 64 MiB: a
    larger write was made short (until 2026-11-27), where the kernel makes
    it whole -- and a program that does not loop on a short write of a
    regular file (many do not) lost the rest. Made a piece at a time now."""
    prog = build_static(tmp_path_factory, "bigwrites", BIG_WRITES)
    f = diskdir / "f"
    p = run(TDAX, "run", "--device", dev, "--intercept", "syscall", "--", prog, f, env=TDAX_ENV)
    n = 96 << 20
    assert (p.returncode, p.stdout) == (0, f"{n} {n} {n}\n"), p.stderr
    pattern = bytes(i % 251 for i in range(251))
    one = (pattern * (n // 251 + 1))[:n]
    assert f.read_bytes() == one * 3


def test_an_open_that_waits_waits_in_the_caller_under_the_filter(dev, diskdir):
    """Opens of FIFOs without a reader wait until one comes. Made by the
    supervisor, each held one of its two servers: with two such writers
    waiting, the reader's own open of a file for writing waited for a
    server, and the script for good (until 2026-11-27). Such an open goes
    to the kernel, to wait in the caller."""
    for name in ("f1", "f2"):
        os.mkfifo(diskdir / name)
    script = (f"cd {diskdir}\n(echo one > f1) &\n(echo two > f2) &\nsleep 0.3\n"
              "echo hello > out\ncat f1 f2\nwait\n")
    p = run(TDAX, "run", "--device", dev, "--intercept", "syscall", "--", "bash", "-c", script, env=TDAX_ENV)
    assert (p.returncode, p.stdout) == (0, "one\ntwo\n"), p.stderr
    assert (diskdir / "out").read_text() == "hello\n"


@pytest.mark.parametrize("how", ["mount-ns", "chroot"])
def test_a_process_with_a_root_of_its_own_is_left_to_the_kernel(dev, diskdir, tmp_path_factory, how):
    """A path names another file in a process with its own mount namespace
    or root: the supervisor, which opens in its own, would write the wrong
    file (until 2026-11-27 it wrote the disk's file under the program's
    tmpfs, or created /f at the machine's root). Such a process -- seen so
    at its first call, or by the unshare, chroot, pivot_root or setns that
    makes it so -- is no longer served, and the supervisor says so."""
    d = diskdir / "d"
    d.mkdir()
    (d / "f").write_text("disk")
    assert not os.path.exists("/f"), "a file /f at the root: this test would not see one made"
    prog = build_static(tmp_path_factory, "roots", ROOTS)
    try:
        p = run(TDAX, "run", "--device", dev, "--intercept", "syscall", "--", prog, how, d,
                env={**TDAX_ENV, "TDAX_QUIET": "0"})
        assert not os.path.exists("/f"), "written at the supervisor's root"
    finally:
        if how == "chroot" and os.path.exists("/f"):
            os.unlink("/f")
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert (d / "f").read_text() == ("disk" if how == "mount-ns" else "mine")
    assert "of its own" in p.stderr, p.stderr


def test_an_open_with_what_openat_drops_succeeds_under_the_filter(dev, diskdir, tmp_path_factory):
    """The supervisor opens with openat2 (to refuse magic links), which
    refuses a mode without a creation and unknown flag bits; openat drops
    them, so the supervisor passes them on as openat does."""
    f = diskdir / "f"
    f.write_bytes(b"")
    prog = build_static(tmp_path_factory, "loose", LOOSE)
    assert run(prog, f).returncode == 0
    p = run(TDAX, "run", "--device", dev, "--intercept", "syscall", "--", prog, f, env=TDAX_ENV)
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert f.read_bytes() == b"ok"


def run_as_nobody(diskdir, name, source, *cflags):
    """The C program source, built static where user nobody can run it, run
    by nobody under `tdax run --intercept syscall` (an unprivileged
    supervisor) on a device of nobody's, with a file to write in a
    directory nobody may write. The run and that file."""
    d = diskdir / "nobody"
    d.mkdir()
    os.chmod(d, 0o777)
    device = f"/dev/shm/tdax-pytest-{name}-{os.getpid()}"
    (diskdir / f"{name}.c").write_text(source)
    prog = diskdir / name
    run("cc", "-O2", "-static", *cflags, "-o", prog, diskdir / f"{name}.c", check=0)
    try:
        run(TDAX, "device", "create", "--device", device, "--size", "64M", user=65534, check=0)
        p = run(TDAX, "run", "--device", device, "--intercept", "syscall", "--", prog, d / "f", user=65534,
                env={**TDAX_ENV, "TDAX_QUIET": "0"})
    finally:
        if os.path.exists(device):
            os.unlink(device)
    return p, d / "f"


def test_a_process_that_is_not_dumpable_is_left_to_the_kernel(diskdir):
    """An unprivileged supervisor cannot read the memory of a process made
    not dumpable (process_vm_readv: EPERM): until 2026-11-27 its every
    open and write under the filter failed with EFAULT. Now such a process
    is left to the kernel, and the supervisor says it follows no more."""
    p, f = run_as_nobody(diskdir, "nodump", NODUMP)
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert f.read_bytes() == b"hello"
    assert "not dumpable" in p.stderr, p.stderr


def test_a_process_made_not_dumpable_during_a_big_write_gets_what_was_written(diskdir):
    """A write larger than the supervisor's buffer is made a piece at a
    time; a process made not dumpable meanwhile (another thread's prctl)
    cannot be read for the next piece. Until 2026-11-28 the call then went
    to the kernel as made, whole, after the pieces already written: the
    file got them twice (a write at the file position: 64 MiB more than
    written, the bytes out of place). Now the write returns what was
    written (a short count, as the kernel's may be), and the process is
    left to the kernel from then on."""
    n = 160 << 20
    p, f = run_as_nobody(diskdir, "bignodump", BIG_NODUMP, "-pthread")
    assert p.returncode == 0, (p.returncode, p.stderr)
    first, done = (int(x) for x in p.stdout.split())
    data = f.read_bytes()
    assert len(data) == n, f"{len(data) - n} bytes more than written"
    assert 0 < first < n and done == n, (p.stdout, "the case did not do what it says")
    assert "not dumpable" in p.stderr, p.stderr
    pattern = bytes(i % 251 for i in range(251))
    assert data == (pattern * (n // 251 + 1))[:n]

def test_a_process_with_another_security_label_is_left_to_the_kernel(dev, diskdir, static_prog):
    """A process a security module confines (an AppArmor profile, an
    SELinux domain) other than the supervisor is: opens made for it by the
    supervisor would not be confined. Such a process is left to the
    kernel, its syncs real, and the supervisor says so. This machine has no
    such module (attr/current is unreadable, EINVAL, for every process:
    the same label); the test build compares another file of /proc/ID,
    one that differs (TDAX_TEST_LSM_ATTR=comm: "tdax" against "raw")."""
    out = diskdir / "f"
    p = tdax(dev, "--intercept", "syscall", "--", static_prog, out, env={"TDAX_TEST_LSM_ATTR": "comm"})
    assert p.returncode == 0 and "acked 300" in p.stdout, p.stderr
    assert "a security label (LSM) other than the supervisor's" in p.stderr, p.stderr
    assert out.read_bytes() == b"".join(b"%-127d\n" % i for i in range(300))
    s = status(dev)["counters"]
    assert s["light_syncs"] == 0 and s["logged_writes"] == 0, s

@pytest.mark.parametrize("how", ["landlock", "capset"])
def test_a_process_that_gives_up_a_right_keeps_it_given_up_under_the_filter(dev, diskdir, tmp_path_factory, how):
    """The supervisor opens for the command: a process that sandboxed itself
    (Landlock) or dropped a capability must not have it done with the
    supervisor's rights -- until 2026-11-27 the open of a file the process
    had locked itself out of succeeded under the filter. Such a process is
    left to the kernel now, and the supervisor says it follows no more."""
    f = diskdir / "f"
    f.write_text("locked")
    os.chown(f, 65534, 65534)  # root opens it only with CAP_DAC_OVERRIDE
    os.chmod(f, 0o600)
    prog = build_static(tmp_path_factory, "sandbox", SANDBOX)
    without = run(prog, how, f)
    assert without.returncode == 0 and without.stdout == "Permission denied\n", without.stdout + without.stderr
    p = run(TDAX, "run", "--device", dev, "--intercept", "syscall", "--", prog, how, f,
            env={**TDAX_ENV, "TDAX_QUIET": "0"})
    assert (p.returncode, p.stdout) == (0, without.stdout), p.stderr
    assert "cannot follow" in p.stderr, p.stderr


def test_openat2_is_refused_under_the_filter_and_programs_fall_back(dev, diskdir):
    """openat2's flags lie behind a pointer the filter cannot read: an open
    for writing through it would be unseen. Under --intercept syscall it
    fails with ENOSYS (as on a kernel without it), and an open that falls
    back to openat is seen: its writes are logged, its syncs light."""
    code = r"""
import ctypes, errno, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
how = struct.pack("QQQ", os.O_WRONLY | os.O_CREAT, 0o644, 0)
r = libc.syscall(437, -100, sys.argv[1].encode(), how, len(how))  # SYS_openat2, AT_FDCWD
if r < 0:
    print("openat2", errno.errorcode[ctypes.get_errno()], flush=True)
    r = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(50):
    os.write(r, b"x" * 128)
    os.fdatasync(r)
"""
    f = diskdir / "f"
    p = tdax(dev, "--intercept", "syscall", "--", "/usr/bin/python3", "-c", code, f)
    assert p.returncode == 0 and "openat2 ENOSYS" in p.stdout, (p.stdout, p.stderr)
    assert f.read_bytes() == b"x" * 128 * 50
    s = status(dev)["counters"]
    assert s["logged_writes"] == 50 and s["light_syncs"] >= 49, s


def test_a_file_on_tmpfs_is_left_to_the_kernel_and_one_on_disk_is_trapped(dev, diskdir, tmp_path_factory):
    """A file tdax does not manage (tmpfs: its syncs cost nothing) is
    installed at a low number, where its writes and syncs go to the kernel
    untrapped; a file on the disk at the base (512) or above, where they
    are trapped and its syncs are light."""
    code = r"""
import os, sys
for path in sys.argv[1:]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(20):
        os.write(fd, b"y" * 128)
        os.fdatasync(fd)
    print(fd, flush=True)
"""
    shm = tempfile.mkdtemp(prefix="tdax-test-", dir="/dev/shm")
    try:
        p = tdax(dev, "--intercept", "syscall", "--", "/usr/bin/python3", "-c", code, f"{shm}/f", diskdir / "f")
        assert p.returncode == 0, p.stderr
        on_shm, on_disk = (int(n) for n in p.stdout.split())
        assert on_shm < 512 <= on_disk, p.stdout
        assert open(f"{shm}/f", "rb").read() == (diskdir / "f").read_bytes() == b"y" * 128 * 20
        s = status(dev)["counters"]
        assert s["logged_writes"] == 20 and s["light_syncs"] >= 19, s
    finally:
        shutil.rmtree(shm, ignore_errors=True)


@pytest.mark.parametrize("who", ["self", "child"])
def test_a_read_only_shared_mapping_is_a_view_until_one_is_made_writable(dev, voldisk, views_prog, who):
    """bbolt (etcd's database) and LMDB map their file shared and read-only
    and write it with pwrite: every write is still trapped, so the file's
    syncs stay lightweight (before, any shared mapping made them real), also
    after an mprotect with PROT_WRITE of another mapping (glibc makes them
    for each thread's stack). One that reaches the view -- the filter traps
    them whatever the address, by the process or by a forked child, which
    has the parent's mappings -- makes the viewed file's syncs real before
    the mapping can be written:
    the store through it is durable once the next sync returns. Killed
    after the last acknowledged sync, power cut: all of it is there."""
    f = voldisk.mnt / "f"
    p = subprocess.Popen([str(TDAX), "run", "--device", dev, "--policy", "always", "--intercept",
                          "syscall", "--", str(views_prog), who, str(f)],
                         env={**os.environ, **TDAX_ENV, "TDAX_TEST_DURABLE_SHADOW": "0"},
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert p.stdout.readline() == "viewed\n"
    c = counters_once(dev, lambda c: c["light_syncs"] + c["real_syncs"] >= 40)
    assert c["light_syncs"] >= 39 and c["real_syncs"] <= 1, c  # (the first may be real)
    p.stdin.write("go\n")
    p.stdin.flush()
    assert p.stdout.readline() == "acked\n"
    after = counters_once(dev, lambda a: a["real_syncs"] - c["real_syncs"] >= 6)
    assert after["fallback_mmap"] > c["fallback_mmap"], (c, after)
    assert after["real_syncs"] - c["real_syncs"] == 6 and after["light_syncs"] == c["light_syncs"], (c, after)
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == b"W" + b"v" * (40 * 128 - 1) + b"x" * (5 * 128)
