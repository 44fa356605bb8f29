#!/usr/bin/env python3
"""Recovery finds a file by the path registered in the device's file table
(checked against its inode). Three ways a tdax process moves a managed file
without tdax updating that path; writes after it are fsync'ed (lightweight:
the records are the only durable copy) and after a power cut recovery
cannot apply them ("unmatched"), so data an fsync acknowledged is lost:
  1. rename() of a directory holding the file: src/preload/interpose.c:do_rename
     looks only the two paths themselves up (tdax_checkpoint_path),
     a directory is not in the table, the files under it keep the old path.
  2. renameat2(RENAME_EXCHANGE): do_rename updates the path of the file
     that moved from oldpath (tdax_files_rename) but not of the one that
     moved from newpath to oldpath, and does not mark it uncovered.
  3. link(P, Q) then unlink(P): do_unlink (src/preload/interpose.c) forgets the
     entry only when st_nlink reaches 0; the file lives on at Q, the entry
     still says P.

Expected: `tdax recover --power-failure` applies every record (exit 0) and
          each file holds its last fsync'ed bytes.
Actual:   exit 3, "unmatched ... records" for each variant.
"""
import os
import subprocess
from _common import Scratch, verdict, TDAX

CODE = """
import ctypes, os, signal, sys
how = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
os.mkdir('d1')
fd = os.open('d1/x', os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b'1' * 100)
os.fsync(fd)
if how == 'dir-rename':
    os.rename('d1', 'd2')
elif how == 'exchange':
    other = os.open('y', os.O_RDWR | os.O_CREAT, 0o644)
    os.write(other, b'y' * 100)
    os.fsync(other)
    assert libc.renameat2(-100, b'd1/x', -100, b'y', 2) == 0   # RENAME_EXCHANGE
    fd = other                                                  # the file now at d1/x
elif how == 'link-unlink':
    os.link('d1/x', 'z')
    os.unlink('d1/x')
os.pwrite(fd, b'2' * 100, 0)
os.fsync(fd)
os.kill(os.getpid(), signal.SIGKILL)
"""
lost = []
for how in ("dir-rename", "exchange", "link-unlink"):
    with Scratch() as s:
        s.run(CODE, how)
        if os.environ.get("REPRO_WITHOUT_TDAX") == "1":
            continue
        r = subprocess.run([TDAX, "recover", "--device", s.device, "--power-failure"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or "unmatched" in r.stdout:
            lost.append(how)
verdict(bool(lost), "records recovery cannot apply after: " + ", ".join(lost) if lost
        else "recovery applied every record")
