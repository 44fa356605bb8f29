#!/usr/bin/env python3
"""A shared mapping made read-only and then made writable with mprotect()
is not seen: src/preload/interpose.c:mmap unmanages the file only when the mapping
is created with PROT_WRITE; mprotect is not interposed. Stores through the
mapping dirty the page cache, the file's size does not change, so the next
fsync() is answered as a lightweight sync (src/preload/coherent.c:tdax_coherent_sync ->
size_explained) and no fsync/fdatasync/msync reaches the kernel: the
mapped stores are not durable although fsync returned 0.

Expected: fsync(fd) after the stores issues a real sync (fsync, fdatasync
          or msync) on the file.
Actual:   no sync syscall between the stores and the (simulated) crash.
"""
import os
import shutil
import subprocess
from _common import Scratch, verdict, TDAX, PY

CODE = """
import ctypes, mmap, os, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
fd = os.open('m.dat', os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b'A' * 4096)
os.fsync(fd)
p = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
assert libc.mprotect(ctypes.c_void_p(p), 4096, mmap.PROT_READ | mmap.PROT_WRITE) == 0
ctypes.memmove(p, b'B' * 4096, 4096)
os.write(2, b'MARK\\n')
os.fsync(fd)
os.write(2, b'SYNCED\\n')
os.kill(os.getpid(), signal.SIGKILL)
"""
if not shutil.which("strace"):
    raise SystemExit("needs strace")
with Scratch() as s:
    log = s.dir / "strace.txt"
    tdax = [TDAX, "run", "--device", s.device, "--policy", "always", "--quiet", "--"]
    if os.environ.get("REPRO_WITHOUT_TDAX") == "1":
        tdax = []
    subprocess.run(["strace", "-f", "-e", "trace=fsync,fdatasync,msync,write", "-o", str(log)] +
                   tdax + [PY, "-c", CODE], cwd=s.dir, capture_output=True, timeout=60)
    text = log.read_text()
    between = text.split("MARK", 1)[-1].split("SYNCED", 1)[0]
    synced = any(c in between for c in ("fsync(", "fdatasync(", "msync("))
    verdict(not synced, "fsync after stores through an mprotect'ed mapping " +
            ("reached" if synced else "did not reach") + " the kernel")
