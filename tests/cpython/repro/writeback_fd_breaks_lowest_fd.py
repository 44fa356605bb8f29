#!/usr/bin/env python3
"""POSIX: open() returns the lowest-numbered free descriptor, and a
single-threaded program relies on it (close(0); open("/dev/null") to
replace stdin, as daemons do). Under tdax the write-back thread opens
descriptors in the process's table at any time (src/preload/coherent.c:open_registered
from tdax_checkpoint_file, src/preload/writeback.c:tdax_writeback_pass), so
the program's open() sometimes gets another number and fd 0 stays closed
(or becomes tdax's).

test_io PyIOTest.test_opener_invalid_fd failed once with the default
settings (support's make_bad_fd closes a descriptor and expects its number
to stay invalid; the write-back had a checkpoint descriptor there).
test_os FwalkTests.test_fd_leak / BytesFwalkTests.test_fd_leak (the lowest
free fd after 256 fwalk()s is not the one before) and test_zipfile
TestsWithMultipleOpens.test_many_opens (the fd count changes), under
--policy always with TDAX_WB_AGE_MS=0 TDAX_WB_INTERVAL_MS=1; with the
default 1000 ms age the same happens, less often.

Worse, the other way round: when the program dup2()s onto the number
tdax's checkpoint descriptor has (here: restoring stdin while tdax holds
fd 0), tdax then fdatasync()s and close()s the program's descriptor --
the program's fd 0 is closed behind its back (the "closed" count).

And dup2() onto a number another thread is opening fails with EBUSY
(Linux), which a single-threaded program never sees without tdax.

Expected: every open() after close(0) returns 0; fd 0 is never closed
          by anyone but the program; dup2 never fails with EBUSY.
Actual:   some open()s return another number, and fd 0 is found closed.
"""
import os
from _common import Scratch, verdict

CODE = """
import os
data = os.open('data.bin', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
saved = os.dup(0)
wrong = closed = busy = 0
for i in range(100000):
    if wrong + closed + busy >= 3:
        break
    os.pwrite(data, b'x' * 512, (i % 64) * 512)   # keeps the write-back busy
    try:
        os.close(0)
    except OSError:                               # EBADF: someone closed our fd 0
        closed += 1
    fd = os.open('/dev/null', os.O_RDONLY)        # must be 0
    if fd != 0:
        wrong += 1
        os.close(fd)
    while True:
        try:
            os.dup2(saved, 0)
            break
        except OSError as e:                      # EBUSY: fd 0 is being opened by a thread
            busy += 1
print(wrong, closed, busy)
"""
with Scratch() as s:
    os.environ.update(TDAX_WB_AGE_MS="0", TDAX_WB_INTERVAL_MS="1")
    r = s.run(CODE, policy="always")
    wrong, closed, busy = map(int, r.stdout.decode().split() or [0, 0, 0])
    if r.returncode:
        print(r.stderr.decode()[-500:])
    verdict(wrong > 0 or closed > 0 or busy > 0 or r.returncode != 0,
            f"in up to 100000 rounds: {wrong} open()s after close(0) did not return fd 0; "
            f"{closed} times fd 0 had been closed behind the program's back; "
            f"{busy} dup2(saved, 0) failed with EBUSY")
