#!/usr/bin/env python3
"""With stdout or stderr closed (`cmd >&-`, `cmd 2>&-`, a daemon, a cron
job), the device region's descriptor takes that number, and what is written
there overwrites the device header: the region is destroyed ("not a tdax
device (bad magic)") and every record in it lost.
  1. stdout closed: the program's own write(1, ...) lands at offset 0 of
     the device region.
  2. stderr closed: tdax's own one-line warning (src/preload/runtime.c:warn writes
     to fd 2; here the mmap fallback) does it -- and the process then dies
     of SIGSEGV, its mapped header being garbage.
Root cause: src/core/device.c:tdax_device_open keeps dev->fd open, at the lowest
free number, for the life of the process (called by src/preload/runtime.c:
tdax_start); warn() writes to fd 2 without checking what it is.

Expected: write(1, ...) fails with EBADF, the warning goes nowhere, the
          device region is intact, the program exits 0.
Actual:   the device header starts with the program's output or tdax's
          warning; in case 2 the program is killed by SIGSEGV.
"""
import os
import subprocess
from _common import Scratch, verdict, TDAX

STDOUT = "import os\ntry:\n    os.write(1, b'hello from stdout')\nexcept OSError:\n    pass"
STDERR = """
import mmap, os
fd = os.open('w.dat', os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b'x' * 4096)
m = mmap.mmap(fd, 4096)        # shared and writable: tdax warns on fd 2
"""
bad = []
for name, code, closed in (("stdout closed", STDOUT, 1), ("stderr closed", STDERR, 2)):
    with Scratch() as s:
        cmd = ["/usr/bin/python3.11", "-c", code]
        if os.environ.get("REPRO_WITHOUT_TDAX") != "1":
            cmd = [TDAX, "run", "--device", s.device, "--policy", "always", "--"] + cmd
        r = subprocess.run(cmd, cwd=s.dir, stdin=subprocess.DEVNULL,
                           preexec_fn=lambda fd=closed: os.close(fd), timeout=60)
        head = open(s.device, "rb").read(24)
        info = subprocess.run([TDAX, "device", "info", "--device", s.device], capture_output=True)
        if info.returncode != 0 or r.returncode != 0:
            bad.append(f"{name}: exit {r.returncode}, device header now {head!r}")
verdict(bool(bad), "; ".join(bad) if bad else "device intact, programs exited 0")
