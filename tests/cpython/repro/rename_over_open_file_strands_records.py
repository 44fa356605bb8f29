#!/usr/bin/env python3
"""A file replaced by rename() while a process still has it open and writes
to it: the writes are logged under the replaced file's entry, whose path
now names the new file. No checkpoint can reach the old inode once the
descriptor is closed (src/preload/checkpoint.c:tdax_checkpoint_file ->
open_registered finds another inode at the path, and no fd of the process
is left), so the records stay in the log for good after every process has
exited cleanly: `tdax device info` shows live records "not yet on flash",
`tdax recover` exits 3 ("unmatched ... the path now names another file"),
`tdax device destroy` refuses, and the log space and file-table slot are
never reclaimed (files.c:reclaim_gone skips entries with records).
Root cause: src/preload/interpose.c:do_rename checkpoints the replaced target but
does not forget its entry (do_unlink does, when st_nlink reaches 0), so
later writes through an open descriptor are logged for a file that has no
name.

Found by test_mailbox under --policy always with TDAX_WB_AGE_MS=0 (2 to 8
records left after the suite exited with SUCCESS).

Expected: after the program exits, no live records; tdax recover exits 0.
Actual:   1 live record; tdax recover exits 3.
"""
import os
import subprocess
from _common import Scratch, verdict, TDAX

CODE = """
import os
fd = os.open('A', os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b'old' * 10)
b = os.open('B', os.O_RDWR | os.O_CREAT, 0o644)
os.write(b, b'new')
os.close(b)
os.rename('B', 'A')        # replaces A; the old inode lives on through fd
os.write(fd, b'more')
os.close(fd)
"""
with Scratch() as s:
    s.run(CODE, policy="always", check=True)
    if os.environ.get("REPRO_WITHOUT_TDAX") == "1":
        verdict(False, "control: nothing to check without tdax")
    r = subprocess.run([TDAX, "recover", "--device", s.device], capture_output=True, text=True,
                       timeout=60)
    unmatched = [l.strip() for l in r.stdout.splitlines() if "unmatched" in l]
    verdict(r.returncode != 0, f"tdax recover after a clean exit: exit {r.returncode}; "
            + ("; ".join(unmatched) if unmatched else "no records left"))
