#!/usr/bin/env python3
"""The device region's descriptor takes the lowest free number: a program
started with stdin closed finds fd 0 open, on the device region.

test_posix TestPosixSpawn.test_close_file / TestPosixSpawnP.test_close_file:
posix_spawn with file_actions=[(POSIX_SPAWN_CLOSE, 0)], the child expects
os.fstat(0) to fail with EBADF.

Expected: fstat(0) -> EBADF (as without tdax).
Actual:   fd 0 is /dev/shm/tdax-cpy-repro-XXXX (tdax_device_open's open(),
          src/core/device.c, called from tdax_start in src/preload/runtime.c, keeps
          dev->fd open for the life of the process, at the lowest free fd).
"""
import os
from _common import Scratch, verdict, PY

CHILD = "import os\ntry:\n    print(os.readlink('/proc/self/fd/0'))\nexcept OSError as e:\n    print('EBADF')"
PARENT = f"""
import os, sys
pid = os.posix_spawn({PY!r}, [{PY!r}, '-c', {CHILD!r}], os.environ,
                     file_actions=[(os.POSIX_SPAWN_CLOSE, 0)])
os.waitpid(pid, 0)
"""
with Scratch() as s:
    out = s.run(PARENT).stdout.decode().strip()
    verdict(out != "EBADF", f"child started with fd 0 closed sees fd 0 = {out}")
