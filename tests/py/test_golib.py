"""A Go library inside a libc program (issue 23's rest): Go code built with
-buildmode=c-shared makes its calls with raw SYSCALLs, as a Go program
does, but in a process whose main program tdax's libc hooks serve -- so a
write the library makes to a descriptor tdax manages is unseen, and a
lightweight sync of the program after it would lose it at a power cut.
libtdax.so sees the library arrive (its runtime starts its first thread
through the program's pthread_create, before any of its Go code runs,
whether linked at build time or opened by dlopen later) and the process
goes blind: every sync real from then on. Each case logs two writes with
light syncs, has the library write over them, syncs through libc, is
killed and loses its disk's cache: the library's write is there."""
import os
import shutil
import signal
import subprocess

import pytest

from conftest import ACKED_C, BUILD, TDAX, acked_under_tdax, killed_and_cut, run

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

# argv: how (linked: the library is the program's DT_NEEDED; dlopen: opened
# after the two light syncs), file.
MAIN = ACKED_C + r"""
#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>
int GoPwrite(int fd, char *p, int n, long off);
static char buf[8192];
int main(int argc, char **argv) {
	int (*go_pwrite)(int, char *, int, long) = GoPwrite;
	must(argc == 3, "usage: golib linked|dlopen FILE");
	int fd = open(argv[2], O_RDWR | O_CREAT, 0644);
	must(fd >= 0 && fsync(fd) == 0, "open");
	memset(buf, 'A', sizeof(buf));
	must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fsync(fd) == 0, "A");
	memset(buf, 'B', sizeof(buf));
	must(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf) && fsync(fd) == 0, "B");
	if (!strcmp(argv[1], "dlopen")) {
		void *lib = dlopen("libgolib2.so", RTLD_NOW);
		must(lib && (go_pwrite = (int (*)(int, char *, int, long))dlsym(lib, "GoPwrite")), "dlopen");
	}
	memset(buf, 'C', 50);
	must(go_pwrite(fd, buf, 50, 100) == 50, "GoPwrite");
	must(fdatasync(fd) == 0, "fdatasync");
	acked();
	return 0;
}
"""

EXPECT = b"B" * 100 + b"C" * 50 + b"B" * (8192 - 150)


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    """golib: the C program, linked to libgolib.so; libgolib2.so, the same
    library under another name, for its dlopen (the program links the
    first, so the second's runtime starts only at the dlopen)."""
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
    run("cc", "-O2", "-o", d / "golib", d / "golib.c", f"-L{d}", "-lgolib", "-Wl,-rpath," + str(d), check=0)
    return d


@pytest.mark.parametrize("how", ["linked", "dlopen"])
def test_a_go_library_makes_the_process_blind_and_nothing_acknowledged_is_lost(dev, voldisk, progs, how):
    f = voldisk.mnt / "f"
    p = acked_under_tdax(dev, progs, "golib", "libc", how, f)
    assert f.read_bytes() == EXPECT, "the case did not do what it says"
    killed_and_cut(p, dev, voldisk)
    assert f.read_bytes() == EXPECT, f"acknowledged data lost (the library {how})"


def test_the_process_says_why_its_syncs_are_real(dev, diskdir, progs):
    """Without --quiet, tdax names the library it cannot see through."""
    p = subprocess.Popen([str(TDAX), "run", "--device", dev, "--", str(progs / "golib"), "linked", str(diskdir / "g")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert p.stdout.readline() == "acked\n"
    finally:
        os.killpg(p.pid, signal.SIGKILL)
    err = p.stderr.read()
    p.wait()
    assert "a Go library" in err and "libgolib.so" in err, err
