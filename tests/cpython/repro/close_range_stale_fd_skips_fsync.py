#!/usr/bin/env python3
"""close_range(2) (os.closerange, closefrom, subprocess's child before exec)
is not interposed: tdax's fd table keeps the closed descriptor as managed.
The next file opened at that number inherits the stale entry unless tdax
manages it anew -- which it does not for O_RDONLY opens, directories,
pipes, sockets, or files on tmpfs. Here fsync() of a directory (the usual
way to make a rename or create durable) is answered as a lightweight sync
of the closed file and never reaches the kernel.

Expected: fsync(dirfd) is a real fsync syscall on the directory.
Actual:   no fsync syscall; `tdax status` counts one more lightweight sync.
Root cause: src/preload/interpose.c has no close_range/closefrom hook, so
tdax_fd_forget (src/preload/runtime.c) is not called; do_open (src/preload/interpose.c)
returns O_RDONLY opens without clearing the fd's entry, and tdax_fd_manage
(src/preload/runtime.c) returns early (read-only, not regular, tmpfs) without
clearing it either; pipe/socket/accept/eventfd/... never clear it. Then
fsync (src/preload/interpose.c) -> tdax_coherent_sync (src/preload/coherent.c) trusts the entry:
size_explained() compares the directory's st_size (4096) with the old
file's size_seen (4096) and answers from the log.
fclose() of an fdopen()ed stream (glibc closes with its internal
__close_nocancel, not the exported close) leaves the same stale entry; so
do closedir() of fdopendir(), and close_range/closefrom in C programs.
Same cause: a pwrite to a tmpfs file opened at a stale number is logged as
a write to the old file (and replayed into it by recovery after a crash).
"""
from _common import Scratch, verdict, TDAX, PY
import os
import shutil
import subprocess

CODE = """
import ctypes, os, sys
d, how = sys.argv[1], sys.argv[2]
a = os.open(d + '/a.dat', os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(a, b'A' * os.stat(d).st_size)   # as big as the directory
os.fsync(a)
if how == 'close_range':
    os.closerange(a, a + 1)              # close_range(a, a, 0)
else:                                    # fclose: glibc closes with its internal close
    libc = ctypes.CDLL(None)
    libc.fdopen.restype = ctypes.c_void_p
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.fclose(libc.fdopen(a, b'r'))
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
assert dfd == a
os.write(2, b'MARK\\n')
os.fsync(dfd)
"""
if not shutil.which("strace"):
    raise SystemExit("needs strace")
bugs = []
with Scratch() as s:
    tdax = [TDAX, "run", "--device", s.device, "--policy", "always", "--quiet", "--"]
    if os.environ.get("REPRO_WITHOUT_TDAX") == "1":
        tdax = []
    for how in ("close_range", "fclose"):
        sub = s.dir / how
        sub.mkdir()
        log = s.dir / f"strace-{how}.txt"
        subprocess.run(["strace", "-f", "-e", "trace=fsync,fdatasync,write", "-o", str(log)] +
                       tdax + [PY, "-c", CODE, str(sub), how], capture_output=True, timeout=60,
                       check=True)
        after = log.read_text().split("MARK", 1)[-1].splitlines()[1:]
        if not any(len(l.split()) > 1 and l.split()[1].startswith("fsync(") for l in after):
            bugs.append(how)
    verdict(bool(bugs), "fsync of the directory did not reach the kernel after: " + ", ".join(bugs)
            if bugs else "fsync of the directory reached the kernel after close_range and fclose")
