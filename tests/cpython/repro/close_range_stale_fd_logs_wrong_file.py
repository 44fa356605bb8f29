#!/usr/bin/env python3
"""close_range(2) leaves a stale entry in tdax's fd table (no close_range
hook in src/preload/interpose.c); a file on tmpfs opened at the same number is not
managed (src/preload/runtime.c:tdax_fd_manage returns early for tmpfs without
clearing the entry), so pwrite() to it is logged as a write to the closed
disk file. After a power cut, recovery replays those bytes into the disk
file, which the program never wrote after closing it.

Expected: a.dat holds 8192 'A' after `tdax recover --power-failure`.
Actual:   it starts with 100 'B' -- the tmpfs file's data.
(--policy always; the process is SIGKILLed before its write-back runs.)
"""
import os
import subprocess
from _common import Scratch, verdict, TDAX

CODE = """
import os, signal, sys
d, shm = sys.argv[1], sys.argv[2]
a = os.open(d + '/a.dat', os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(a, b'A' * 8192)
os.fsync(a)
os.closerange(a, a + 1)                   # close_range(a, a, 0)
b = os.open(shm, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)   # tmpfs
assert b == a
os.pwrite(b, b'B' * 100, 0)
os.kill(os.getpid(), signal.SIGKILL)      # before the write-back's checkpoint
"""
with Scratch() as s:
    shm = s.device + ".tmpfs-file"
    try:
        s.run(CODE, s.dir, shm)
        if os.environ.get("REPRO_WITHOUT_TDAX") != "1":
            subprocess.run([TDAX, "recover", "--device", s.device, "--power-failure"],
                           capture_output=True, timeout=60)
        data = (s.dir / "a.dat").read_bytes()
    finally:
        if os.path.exists(shm):
            os.unlink(shm)
    verdict(data != b"A" * 8192, f"a.dat after recovery starts {data[:12]!r}")
