#!/usr/bin/env python3
"""pwritev2() with a flag tdax does not know (RWF_DONTCACHE 0x80 and
RWF_NOAPPEND 0x20, both accepted by this kernel on ext4) goes straight to
the kernel (src/interpose.c:pwritev2: flags outside DSYNC|SYNC|APPEND|HIPRI
-> tdax_real.pwritev2) and tdax is not told of the write at all: it is not
logged and the file is not marked uncovered (compare unlogged() and
tdax_lsync_after_write). An overwrite does not change the size, so the
next fsync() is answered as a lightweight sync (src/lsync.c:tdax_lsync_sync,
size_explained) and never reaches the kernel: the data written is not
durable although fsync returned 0. Same for any pwritev2 flag added to
Linux later.

Expected: fsync(fd) after the pwritev2 is a real fsync (or the write is
          logged).
Actual:   no fsync/fdatasync syscall between the write and the crash.
"""
import os
import shutil
import subprocess
from _common import Scratch, verdict, TDAX, PY

CODE = """
import os, signal, sys
flag = int(sys.argv[1], 0)
fd = os.open('f.dat', os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b'A' * 4096)
os.fsync(fd)
os.pwritev(fd, [b'B' * 4096], 0, flag)
os.write(2, b'MARK\\n')
os.fsync(fd)
os.write(2, b'SYNCED\\n')
os.kill(os.getpid(), signal.SIGKILL)
"""
if not shutil.which("strace"):
    raise SystemExit("needs strace")
bugs = []
with Scratch() as s:
    tdax = [TDAX, "run", "--device", s.device, "--policy", "always", "--quiet", "--"]
    if os.environ.get("REPRO_WITHOUT_TDAX") == "1":
        tdax = []
    for name, flag in (("RWF_DONTCACHE", "0x80"), ("RWF_NOAPPEND", "0x20")):
        log = s.dir / f"strace-{name}.txt"
        p = subprocess.run(["strace", "-f", "-e", "trace=fsync,fdatasync,write", "-o", str(log)] +
                           tdax + [PY, "-c", CODE, flag], cwd=s.dir, capture_output=True, timeout=60)
        if b"SYNCED" not in p.stderr:
            print(f"{name}: not supported here: {p.stderr.decode().strip()[-80:]}")
            continue
        between = log.read_text().split("MARK", 1)[-1].split("SYNCED", 1)[0]
        if "fsync(" not in between and "fdatasync(" not in between:
            bugs.append(name)
    verdict(bool(bugs), "fsync after pwritev2 did not reach the kernel with: " + ", ".join(bugs)
            if bugs else "fsync after pwritev2 with RWF_DONTCACHE/RWF_NOAPPEND reached the kernel")
