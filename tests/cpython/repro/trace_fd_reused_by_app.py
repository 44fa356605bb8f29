#!/usr/bin/env python3
"""tdax run --trace: the trace file's descriptor (src/core/trace.c trace_fd, a
low number opened at start-up) is the application's to close. A program
that closes every inherited descriptor (os.closerange, close_range, a
daemon's close loop) and opens files gets that number for one of its own
files, and tdax's trace flush (src/core/trace.c:tdax_trace_flush, at exit and
from the write-back) appends binary trace records to the application's
file; the trace itself is left empty. The device region's dev->fd
(src/core/device.c) is in the same position, but is not written through.

Expected: every userN.dat is 10 bytes; the trace has the events.
Actual:   one userN.dat has ~1 KB of trace records appended; 0 events.
"""
import os
import subprocess
from _common import Scratch, verdict, TDAX, PY

CODE = """
import os
os.closerange(3, 1024)
fds = [os.open(f'user{i}.dat', os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644) for i in range(4)]
for fd in fds:
    os.write(fd, b'user data\\n')
"""
with Scratch() as s:
    trace = s.dir / "run.trace"
    cmd = [PY, "-c", CODE]
    if os.environ.get("REPRO_WITHOUT_TDAX") != "1":
        cmd = [TDAX, "run", "--device", s.device, "--quiet", "--trace", str(trace), "--"] + cmd
    subprocess.run(cmd, cwd=s.dir, capture_output=True, timeout=60, check=True)
    sizes = [(s.dir / f"user{i}.dat").stat().st_size for i in range(4)]
    verdict(sizes != [10] * 4, f"sizes of the application's files: {sizes}")
