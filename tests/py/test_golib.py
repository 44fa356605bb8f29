"""A Go library inside a libc program (issue 23's rest): Go code built with
-buildmode=c-shared makes its calls with raw SYSCALLs, as a Go program
does, but in a process whose main program tdax's libc hooks serve -- so a
write the library makes to a descriptor tdax manages is unseen, and a
lightweight sync of the program after it would lose it at a power cut.
libtdax.so sees the library arrive (its runtime starts its first thread
through the program's pthread_create, before any of its Go code runs,
whether linked at build time or opened by dlopen later) and rewrites its
runtime as a Go program's (its calls then reach the hooks, its writes are
logged); under --intercept libc the process goes blind instead (every
sync real). Each case logs two writes with light syncs, has the library
write over them, syncs through libc, is killed and loses its disk's
cache: the library's write is there."""
import re
import shutil

import pytest

from conftest import ACKED_C, BUILD, OVER_AB, SYNCED_AB_C, TDAX, acked_under_tdax, info, killed_and_cut, run

GO = "/usr/bin/go"  # Debian's golang-go (make deps)

GOLIB = r"""
package main

import "C"

import (
	"syscall"
	"unsafe"
)

//export GoPwrite
func GoPwrite(fd C.int, p *C.char, n C.int, off C.long) C.int {
	r, err := syscall.Pwrite(int(fd), unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n)), int64(off))
	if err != nil {
		return -1
	}
	return C.int(r)
}

func main() {}
"""

# argv: how, file, and "exit" to end instead of waiting for the kill (its
# counters then reach the device), or "threads" to end after 101 threads,
# one after the other, each a call of the library (and print how much the
# process's mappings grew over the last 100). how: linked (golib, built with LINKED:
# the library is its DT_NEEDED), dlopen (golib-dl: the library opened after
# the two light syncs), both (golib, which opens the same library under
# another name too: a second Go runtime, whose GoPwrite it calls).
MAIN = ACKED_C + SYNCED_AB_C + r"""
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#ifdef LINKED
int GoPwrite(int fd, char *p, int n, long off);
#else
#define GoPwrite NULL
#endif
static int (*threads_pwrite)(int, char *, int, long);
static int threads_fd;
static void *one(void *arg) { (void)arg; return threads_pwrite(threads_fd, buf, 50, 100) == 50 ? (void *)1 : NULL; }
static long vm_kib(void) {
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmSize:", 7))
			kib = atol(line + 7);
	if (f)
		fclose(f);
	return kib;
}
int main(int argc, char **argv) {
	int (*go_pwrite)(int, char *, int, long) = GoPwrite;
	must(argc >= 3, "usage: golib linked|dlopen|both FILE [exit]");
	int fd = synced_ab(argv[2]);
	if (strcmp(argv[1], "linked")) {
		void *lib = dlopen(strcmp(argv[1], "both") ? "libgolib.so" : "libgolib2.so", RTLD_NOW);
		must(lib && (go_pwrite = (int (*)(int, char *, int, long))dlsym(lib, "GoPwrite")), "dlopen");
	}
	memset(buf, 'C', 50);
	must(go_pwrite(fd, buf, 50, 100) == 50, "GoPwrite");
	must(fdatasync(fd) == 0, "fdatasync");
	if (argc > 3 && !strcmp(argv[3], "threads")) {
		threads_pwrite = go_pwrite, threads_fd = fd;
		long before = 0;
		for (int i = 0; i <= 100; i++) {
			pthread_t t;
			void *ok;
			must(pthread_create(&t, NULL, one, NULL) == 0 && pthread_join(t, &ok) == 0 && ok, "thread");
			if (i == 0) /* (glibc keeps a thread's own stack for the next: counted once, here) */
				before = vm_kib();
		}
		printf("VmSize +%ld KiB\n", vm_kib() - before);
	}
	if (argc > 3)
		return 0;
	acked();
	return 0;
}
"""

EXPECT = OVER_AB


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    """golib: the C program, linked to libgolib.so; golib-dl, the same
    program not linked to it; libgolib2.so, the same library under another
    name, for golib's dlopen of a second runtime."""
    assert shutil.which(GO), "Debian's Go is missing: make deps installs golang-go"
    d = tmp_path_factory.mktemp("golib")
    (d / "lib.go").write_text(GOLIB)
    (d / "go.mod").write_text("module golib\n\ngo 1.19\n")
    cache = BUILD / "gocache"  # kept between runs: the standard library's build
    env = {"GOCACHE": str(cache), "GOPATH": str(cache / "path"), "GOFLAGS": "-mod=mod",
           "GOTOOLCHAIN": "local", "CGO_ENABLED": "1"}
    run(GO, "build", "-buildmode=c-shared", "-o", d / "libgolib.so", ".", cwd=d, check=0, env=env)
    shutil.copy(d / "libgolib.so", d / "libgolib2.so")
    (d / "golib.c").write_text(MAIN)
    run("cc", "-O2", "-DLINKED", "-o", d / "golib", d / "golib.c", f"-L{d}", "-lgolib", "-Wl,-rpath," + str(d),
        check=0)
    run("cc", "-O2", "-o", d / "golib-dl", d / "golib.c", "-Wl,-rpath," + str(d), check=0)
    return d


def prog(how):
    return "golib-dl" if how == "dlopen" else "golib"


@pytest.mark.parametrize("how,intercept", [("linked", "auto"), ("dlopen", "auto"), ("both", "auto"),
                                           ("linked", "libc"), ("dlopen", "libc")])
def test_a_go_librarys_write_is_never_lost(dev, voldisk, progs, how, intercept):
    f = voldisk.mnt / "f"
    p = acked_under_tdax(dev, progs, prog(how), intercept, how, f)
    assert f.read_bytes() == EXPECT, "the case did not do what it says"
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == EXPECT, f"acknowledged data lost (the library {how}, --intercept {intercept})"


@pytest.mark.parametrize("how", ["linked", "dlopen"])
def test_a_go_librarys_write_is_logged_and_the_programs_syncs_stay_light(dev, diskdir, progs, how):
    p = run(TDAX, "run", "--device", dev, "--policy", "always", "--", progs / prog(how), how, diskdir / "g", "exit",
            env={"TDAX_QUIET": "0"})
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert (diskdir / "g").read_bytes() == EXPECT
    c = info(dev)["counters"]
    assert c["real_syncs"] == 0 and c["light_syncs"] == 4 and c["logged_writes"] == 3, c


@pytest.mark.parametrize("how,intercept,lib,why,logged", [
    ("linked", "libc", "libgolib.so", "--intercept libc", 0),
    ("both", "auto", "libgolib2.so", "another Go runtime in this process is rewritten already", 2)])
def test_a_go_library_not_rewritten_makes_every_sync_real_and_says_why(dev, diskdir, progs, how, intercept, lib,
                                                                       why, logged):
    """--intercept libc (the hooks alone; blind from the start, the library
    linked), or a second Go runtime (one rewritten a process; blind from
    its dlopen, after the two logged writes): tdax names the library it
    cannot see through, and the sync after its write is real."""
    p = run(TDAX, "run", "--device", dev, "--policy", "always", "--intercept", intercept, "--", progs / prog(how),
            how, diskdir / "g", "exit", env={"TDAX_QUIET": "0"})
    assert p.returncode == 0, p.stderr
    assert f"a Go library ({progs / lib}) makes its calls unseen ({why})" in p.stderr, p.stderr
    assert (diskdir / "g").read_bytes() == EXPECT
    c = info(dev)["counters"]
    assert c["real_syncs"] >= 1 and c["logged_writes"] == logged, c


def test_a_c_threads_stack_for_the_library_goes_with_the_thread(dev, diskdir, progs):
    """100 C threads, one after the other, each calling into the library
    once (its write through the rewritten runtime runs on a stack tdax maps
    for the thread, 256 KiB): the stacks go with their threads (each left
    256 KiB behind before)."""
    p = run(TDAX, "run", "--device", dev, "--policy", "always", "--", progs / "golib", "linked", diskdir / "g",
            "threads")
    assert p.returncode == 0, p.stderr
    grew = int(re.fullmatch(r"VmSize \+(-?\d+) KiB\n", p.stdout).group(1))
    assert grew < 100 * 256 / 4, p.stdout
    assert (diskdir / "g").read_bytes() == EXPECT
