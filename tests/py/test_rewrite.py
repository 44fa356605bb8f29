"""A Go program's calls seen in its own process (--intercept rewrite, what
auto gives a dynamically linked Go program; src/preload/interpose_go.c):
libtdax.so rewrites the runtime's Syscall6 and runtime.exit into jumps to
tdax. The program here is built by Debian's Go (the one etcd is built
with) with cgo, so it is dynamically linked as etcd is: it writes and
syncs a file on the disk as its stdout (made so by its own dup3), and
every 50 lines starts /bin/true
by syscall.ForkExec (a vfork whose child runs on the parent's memory and
makes its dup3 and execve through the rewritten function). The crash
suite's etcd-rewrite line is the proof against kills and power cuts."""
import json
import os
import re
import shutil

import pytest

from conftest import BUILD, TDAX, run

GO = "/usr/bin/go"  # Debian's golang-go (make deps)

GOWRITER = r"""
package main

// cgo (an empty preamble): dynamically linked, as Debian's etcd is.

import "C"

import (
	"os"
	"strconv"
	"syscall"
)

func main() {
	out, err := syscall.Open(os.Args[1], syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC, 0644)
	if err != nil || syscall.Dup3(out, 1, 0) != nil || syscall.Close(out) != nil {
		os.Exit(5)
	}
	n, _ := strconv.Atoi(os.Args[2])
	for i := 0; i < n; i++ {
		line := []byte(strconv.Itoa(i))
		for len(line) < 127 {
			line = append(line, ' ')
		}
		if _, err := syscall.Write(1, append(line, '\n')); err != nil {
			os.Exit(1)
		}
		if err := syscall.Fdatasync(1); err != nil {
			os.Exit(2)
		}
		if i%50 == 49 {
			null, _ := syscall.Open("/dev/null", syscall.O_RDWR, 0)
			attr := &syscall.ProcAttr{Files: []uintptr{uintptr(null), uintptr(null), uintptr(null)}}
			pid, err := syscall.ForkExec("/bin/true", []string{"true"}, attr)
			var ws syscall.WaitStatus
			if err != nil || syscall.Close(null) != nil {
				os.Exit(3)
			}
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
				os.Exit(4)
			}
		}
	}
	os.Stderr.WriteString("acked " + strconv.Itoa(n) + "\n")
}
"""

LINES = b"".join(b"%-127d\n" % i for i in range(300))
ENV = {"TDAX_QUIET": "0"}


@pytest.fixture(scope="module")
def gowriter(tmp_path_factory):
    assert shutil.which(GO), "Debian's Go is missing: make deps installs golang-go"
    d = tmp_path_factory.mktemp("gowriter")
    (d / "main.go").write_text(GOWRITER)
    (d / "go.mod").write_text("module gowriter\n\ngo 1.19\n")
    cache = BUILD / "gocache"  # kept between runs: the standard library's build
    run(GO, "build", "-o", d / "gowriter", ".", cwd=d, check=0,
        env={"GOCACHE": str(cache), "GOPATH": str(cache / "path"), "GOFLAGS": "-mod=mod",
             "GOTOOLCHAIN": "local", "CGO_ENABLED": "1"})
    return d / "gowriter"


def status(dev):
    return json.loads(run(TDAX, "status", "--device", dev, "--json").stdout)["counters"]


def go_under_tdax(dev, prog, out, *opts):
    return run(TDAX, "run", "--device", dev, "--policy", "always", *opts, "--", prog, out, 300, env=ENV)


def with_copy(prog, path, body):
    """prog with a copy of body in int3 padding between two functions
    (never run): path, executable."""
    data = bytearray(prog.read_bytes())
    pad = re.search(rb"\xcc{%d}" % (len(body) + 8), data).start()
    data[pad + 4:pad + 4 + len(body)] = body
    path.write_bytes(bytes(data))
    path.chmod(0o755)
    return path


def test_a_go_program_is_seen_in_its_own_process_and_its_children_change_nothing(dev, diskdir, gowriter):
    """auto rewrites it (no supervisor; --verbose says so): every write is
    logged and every sync lightweight (the file was made under tdax, its
    creation a record) -- also after the ForkExec children, whose dup3 over
    stdout is theirs alone (when the children's calls were served, the
    parent's stdout entry became /dev/null's at the first child: 50 writes
    logged) -- and its exit is tdax's exit (the counters are on the device,
    no record is left)."""
    out = diskdir / "out"
    p = go_under_tdax(dev, gowriter, out, "--verbose")
    assert p.returncode == 0 and p.stderr.endswith("acked 300\n"), p.stderr
    assert "rewritten" in p.stderr and "trapped" not in p.stderr, p.stderr
    assert out.read_bytes() == LINES
    c = status(dev)
    assert c["logged_writes"] == 300 and c["light_syncs"] == 300 and c["real_syncs"] == 0, c
    info = run(TDAX, "device", "info", "--device", dev, check=0).stdout
    assert "0 live records" in info, info


def test_rewrite_is_asked_for_only_where_it_can_be_made(dev, diskdir, gowriter, tmp_path):
    """--intercept rewrite names a Go program tdax can rewrite: a static
    binary, or a Go program whose runtime is not of a form tdax knows (here
    its exit function twice), is refused with a reason; such a program under
    auto goes to the supervisor instead (--intercept syscall; which makes
    the syncs of a file at a low descriptor number real, durability.md)."""
    odd = with_copy(gowriter, tmp_path / "odd-go", bytes.fromhex("8b7c2408b8e70000000f05c3"))
    p = go_under_tdax(dev, odd, diskdir / "a", "--intercept", "rewrite")
    assert p.returncode == 2 and "is not a dynamically linked Go program" in p.stderr, p.stderr
    p = go_under_tdax(dev, "/bin/true", diskdir / "b", "--intercept", "rewrite")
    assert p.returncode == 0 and p.stderr == "", p.stderr  # a libc program: its hooks see it
    p = go_under_tdax(dev, odd, diskdir / "c", "--verbose")
    assert p.returncode == 0 and "trapped" in p.stderr and "rewritten" not in p.stderr, p.stderr
    assert (diskdir / "c").read_bytes() == LINES


def test_a_go_program_that_cannot_be_rewritten_says_so_and_keeps_every_sync_real(dev, diskdir, gowriter,
                                                                                 tmp_path):
    """TDAX_INTERCEPT=rewrite set by hand on a Go program tdax cannot
    rewrite: one line on stderr, and the process is blind (its syncs the
    kernel's), never a sync answered for writes tdax did not see."""
    odd = with_copy(gowriter, tmp_path / "odd-go", bytes.fromhex("4989f24889fa4889ce4889df0f05483d01f0ffff"))
    env = {**os.environ, **ENV, "TDAX_DEVICE": str(dev), "TDAX_POLICY": "always", "TDAX_INTERCEPT": "rewrite",
           "LD_PRELOAD": str(BUILD / "test" / "lib" / "libtdax.so")}
    p = run(odd, diskdir / "out", 300, env=env)
    assert p.returncode == 0 and "calls cannot be seen (a function of its runtime is there twice)" in p.stderr
    assert (diskdir / "out").read_bytes() == LINES
    c = status(dev)
    assert c["light_syncs"] == 0 and c["logged_writes"] == 0, c


# Appends 20 x 100 B with a sync after each (the lease is taken), hands the
# file to a child as its descriptor 3 by ForkExec (Go's vfork: the child
# runs on this memory and makes its dup3 and execve through the rewritten
# function), the child -- a program without tdax -- appends "x", and one
# more sync.
GOHANDER = r"""
package main

import "C"

import (
	"os"
	"syscall"
	"time"
)

func main() {
	f, err := syscall.Open(os.Args[1], syscall.O_WRONLY|syscall.O_CREAT|syscall.O_APPEND|syscall.O_CLOEXEC, 0644)
	if err != nil {
		os.Exit(1)
	}
	a := make([]byte, 100)
	for i := range a {
		a[i] = 'a'
	}
	for i := 0; i < 20; i++ {
		if _, err := syscall.Write(f, a); err != nil || syscall.Fdatasync(f) != nil {
			os.Exit(2)
		}
		if i == 0 {
			time.Sleep(100 * time.Millisecond) // the write-back thread starts: a lease needs it
		}
	}
	null, _ := syscall.Open("/dev/null", syscall.O_RDWR, 0)
	attr := &syscall.ProcAttr{Files: []uintptr{uintptr(null), uintptr(null), uintptr(null), uintptr(f)},
		Env: []string{"PATH=/usr/bin:/bin"}}
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", "printf x >&3"}, attr)
	var ws syscall.WaitStatus
	if err != nil {
		os.Exit(3)
	}
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
		os.Exit(4)
	}
	if syscall.Fdatasync(f) != nil {
		os.Exit(5)
	}
	os.Stderr.WriteString("synced\n")
}
"""


def test_a_file_handed_to_a_child_by_forkexec_makes_the_next_sync_real(dev, diskdir, tmp_path):
    """The child writes through the same open file: no open, no break, and
    its exec is made raw from Go's vfork child. The sync after the child's
    write must be real. (No lease is taken in a Go program -- its runtime
    takes every signal, the lease's too -- so the size guard catches the
    write; were leases made to work in Go, this exec would have to end
    their trust, as a libc program's exec does.)"""
    d = tmp_path / "hander"
    d.mkdir()
    (d / "main.go").write_text(GOHANDER)
    (d / "go.mod").write_text("module hander\n\ngo 1.19\n")
    cache = BUILD / "gocache"
    run(GO, "build", "-o", d / "hander", ".", cwd=d, check=0,
        env={"GOCACHE": str(cache), "GOPATH": str(cache / "path"), "GOFLAGS": "-mod=mod",
             "GOTOOLCHAIN": "local", "CGO_ENABLED": "1"})
    f = diskdir / "f"
    p = run(TDAX, "run", "--device", dev, "--policy", "always", "--", d / "hander", f,
            env={**ENV, "TDAX_TEST_LEASE_TRUST_MS": "60000"})
    assert p.returncode == 0 and p.stderr.endswith("synced\n"), p.stderr
    assert f.read_bytes() == b"a" * 2000 + b"x"
    c = status(dev)
    assert c["leases"] == 0 and c["fallback_unseen_write"] == 1 and c["real_syncs"] == 1, c
