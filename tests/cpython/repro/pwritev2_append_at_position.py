#!/usr/bin/env python3
"""pwritev2(fd, iov, n, -1, RWF_APPEND) on a managed file overwrites the
data at the file position instead of appending.

Expected: b'0123456789XY'.
Actual:   b'XY23456789' (every policy, also never).
Root cause: src/preload/interpose.c:pwritev2, offset -1 -> positional(), which does
a plain write()/writev() and drops the RWF_* flags (RWF_APPEND here;
RWF_HIPRI and, for the kernel, RWF_DSYNC/RWF_SYNC too, though tdax syncs
those itself in finish_write).
"""
from _common import Scratch, verdict

CODE = """
import os
fd = os.open('app.dat', os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b'0123456789')
os.lseek(fd, 0, os.SEEK_SET)
os.pwritev(fd, [b'XY'], -1, os.RWF_APPEND)
print(os.pread(fd, 100, 0))
"""
with Scratch() as s:
    out = s.run(CODE, policy="never").stdout.decode().strip()
    verdict(out != "b'0123456789XY'", f"file after pwritev2(-1, RWF_APPEND): {out}")
