#!/usr/bin/env python3
"""The write-back's checkpoint opens the file it syncs by its path for
writing (src/preload/coherent.c:open_registered, O_RDWR, from
tdax_checkpoint_file, run by the write-back thread in
src/preload/writeback.c:tdax_writeback_pass and at exit). While that descriptor is
open, execve() of the file fails with ETXTBSY -- in this process, and in
any child forked meanwhile (it inherits the descriptor until exec). A
program that writes a script or binary and runs it (build systems, test
suites, installers) fails at random.

test_subprocess POSIXProcessTestCase.test_args_string: "OSError: [Errno 26]
Text file busy" under --policy always with TDAX_WB_AGE_MS=0 (the write-back
checkpoints at once; with the default 1000 ms the window is the same, only
rarer: a checkpoint of a file written a second ago, or any tdax process's
exit, while the file is being exec'ed).

Expected: no ETXTBSY; every run exits 47.
Actual:   some of the execs fail with ETXTBSY.
"""
import os
from _common import Scratch, verdict

CODE = """
import errno, os, subprocess, sys, time
busy = 0
for i in range(500):
    name = f'script{i}.sh'
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700)
    os.write(fd, f"#!/bin/sh\\nexit 47\\n".encode())
    os.close(fd)
    try:
        subprocess.run(['./' + name]).returncode
    except OSError as e:
        if e.errno != errno.ETXTBSY:
            raise
        busy += 1
print(busy)
"""
with Scratch() as s:
    os.environ.update(TDAX_WB_AGE_MS="0", TDAX_WB_INTERVAL_MS="1")
    busy = int(s.run(CODE, policy="always").stdout.decode())
    verdict(busy > 0, f"{busy} of 500 execs of a just-written script failed with ETXTBSY")
