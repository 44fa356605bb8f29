#!/usr/bin/env python3
"""With stdout closed (`cmd >&-`, a daemon, a cron job), the device region
becomes fd 1 and the program's own output overwrites the device header: the
region is destroyed ("not a tdax device (bad magic)") and every record in
it lost.

Expected: write(1, ...) fails with EBADF; the device region is intact.
Actual:   the bytes land at offset 0 of the device region (dev->fd of
          src/device.c:tdax_device_open, opened at the lowest free number
          by src/runtime.c:tdax_start). With stderr closed, tdax's own
          warnings (src/runtime.c:warn writes to fd 2) would do the same.
"""
import os
import subprocess
from _common import Scratch, verdict, TDAX

with Scratch() as s:
    r = s.run("import os\ntry:\n    os.write(1, b'hello from stdout')\nexcept OSError:\n    pass",
              preexec_fn=lambda: os.close(1))
    head = open(s.device, "rb").read(17)
    info = subprocess.run([TDAX, "device", "info", "--device", s.device], capture_output=True, text=True)
    verdict(info.returncode != 0, f"device header now starts {head!r}; tdax device info: "
            f"{(info.stderr or info.stdout).strip()[:80]}")
