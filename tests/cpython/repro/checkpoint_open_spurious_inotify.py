#!/usr/bin/env python3
"""The write-back's checkpoint opened the file by its path for writing and
closed it again (src/preload/coherent.c:open_registered, O_RDWR, from
tdax_checkpoint_file): file watchers (inotify/fanotify: config
reloaders, build tools, tail -F, systemd path units) saw IN_CLOSE_WRITE --
"a writer finished" -- about a second after the program's last write,
while the program still had the file open and had not finished. Same
descriptor as checkpoint_open_rdwr_etxtbsy.py. The checkpoint now opens
read-only: a watcher sees IN_OPEN and IN_CLOSE_NOWRITE, as for any reader
(a backup, an indexer); docs/durability.md lists that as a known limit.

Expected: no IN_CLOSE_WRITE or IN_MODIFY while the program keeps the file
          open and idle.
Actual:   IN_CLOSE_WRITE (--policy always; default write-back age).
"""
from _common import Scratch, verdict

CODE = """
import ctypes, os, struct, time
libc = ctypes.CDLL(None, use_errno=True)
IN_MODIFY, IN_CLOSE_WRITE = 0x2, 0x8
ifd = libc.inotify_init1(os.O_NONBLOCK)
fd = os.open('ino.dat', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b'hello\\n')          # then keep the file open, idle
libc.inotify_add_watch(ifd, b'ino.dat', IN_CLOSE_WRITE | IN_MODIFY)
os.read(ifd, 4096) if False else None
time.sleep(2.5)
evs = []
try:
    buf = os.read(ifd, 4096)
    off = 0
    while off < len(buf):
        wd, mask, cookie, ln = struct.unpack_from('iIII', buf, off)
        off += 16 + ln
        evs.append({IN_CLOSE_WRITE: 'IN_CLOSE_WRITE', IN_MODIFY: 'IN_MODIFY'}.get(mask, hex(mask)))
except BlockingIOError:
    pass
print(' '.join(evs))
"""
with Scratch() as s:
    evs = s.run(CODE, policy="always").stdout.decode().split()
    verdict(bool(evs), f"inotify events while the file is open and idle: {evs}")
