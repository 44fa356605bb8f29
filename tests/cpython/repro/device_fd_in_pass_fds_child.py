#!/usr/bin/env python3
"""A child started with close_fds=True and pass_fds has one descriptor more
than it was given: the device region's, opened by its own tdax at start-up.

test_subprocess POSIXProcessTestCase.test_pass_fds_redirected (the child's
fd_status.py lists 0,1,2,3,4,5,7 where 0,1,2,4,5,7 were expected).

Expected: the child's open fds are exactly 0, 1, 2 and pass_fds.
Actual:   fd 3 too, the device region (src/core/device.c:tdax_device_open keeps
          dev->fd; src/preload/runtime.c:tdax_start), visible to the application:
          os.listdir('/proc/self/fd'), fstat, closerange all see it.
"""
from _common import Scratch, verdict

CODE = """
import os, subprocess, sys
r, w = os.pipe()
fd = os.open(os.devnull, os.O_RDWR)
child = "import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')))"
out = subprocess.run([sys.executable, '-c', child], close_fds=True, pass_fds=[fd],
                     capture_output=True, text=True).stdout.strip()
print(out, fd)
"""
with Scratch() as s:
    out = s.run(CODE).stdout.decode().split()
    fds, passed = eval(" ".join(out[:-1])), int(out[-1])
    # listdir's own descriptor is the one more than expected without tdax
    extra = sorted(set(fds) - {0, 1, 2, passed})
    verdict(len(extra) > 1, f"child fds {fds}, pass_fds [{passed}]: unexpected {extra[:-1]}")
