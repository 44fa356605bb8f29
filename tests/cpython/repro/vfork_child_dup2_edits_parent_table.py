#!/usr/bin/env python3
"""subprocess (CPython >= 3.10) starts children with vfork(): the child
shares the parent's memory until it execs, and _posixsubprocess's
child_exec calls dup2()/close() through libc's exported symbols -- tdax's
hooks (src/preload/interpose.c dup2/dup3/close -> src/preload/runtime.c tdax_fd_copy /
tdax_fd_forget). They edit the PARENT's fd table: after
subprocess.run(..., stdout=x) the parent's fd 1 is recorded as file x.
The parent's own writes to its stdout are then logged as writes to x (at
stdout's offsets), fsync(1) is answered from x's state, and after a power
cut recovery replays the parent's stdout into x.

docs/durability.md lists "vfork children" as not supported; but CPython's
subprocess uses vfork by default since 3.10 (no preexec_fn, user, group,
umask...), so every Python program that redirects a child's output to a
file it has open is in this case.

Expected: data.dat holds 64 'D' after `tdax recover --power-failure`.
Actual:   it starts with b'PARENT-STDOUT...' (the parent's stdout, a file
          on the disk here as in CI logs, was logged as data.dat).
"""
import os
import subprocess
from _common import Scratch, verdict, TDAX

CODE = """
import os, signal, subprocess
x = os.open('data.dat', os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(x, b'D' * 64)
os.fsync(x)
subprocess.run(['/bin/true'], stdout=x)        # vfork; the child does dup2(x, 1)
os.write(1, b'PARENT-STDOUT-PARENT-STDOUT\\n')  # the parent's stdout
os.kill(os.getpid(), signal.SIGKILL)           # before any checkpoint
"""
with Scratch() as s:
    with open(s.dir / "stdout.log", "wb") as out:
        s.run(CODE, policy="always", stdout=out, stderr=subprocess.DEVNULL)
    if os.environ.get("REPRO_WITHOUT_TDAX") != "1":
        subprocess.run([TDAX, "recover", "--device", s.device, "--power-failure"],
                       capture_output=True, timeout=60)
    data = (s.dir / "data.dat").read_bytes()
    verdict(data != b"D" * 64, f"data.dat after recovery starts {data[:16]!r}")
