#!/usr/bin/env python3
"""Before a truncation by path (open with O_TRUNC, truncate()), tdax
checkpoints the file so that "no record may outlive a truncate"
(src/preload/interpose.c:do_open and truncate -> src/preload/coherent.c:
tdax_checkpoint_path). That lookup opens the path with O_NOFOLLOW:
through a symlink (a shell's `> link`, open('link', 'w'), truncate('link'))
it finds nothing, the truncation goes ahead and the file's older records
stay live. After a power cut recovery replays them into the truncated file:
the bytes the program truncated away come back -- over whatever the kernel
had already written of the new contents.

Also without a symlink: open(F, O_RDONLY | O_TRUNC) truncates on Linux,
but do_open only checkpoints when it manages the open (not O_RDONLY).

Expected: F is empty after `tdax recover --power-failure` (as when the
          same open goes through F's own name, writable).
Actual:   F is 100 bytes of the old data again, for O_TRUNC and truncate()
          through the symlink, and for O_RDONLY|O_TRUNC.
"""
import os
import subprocess
from _common import Scratch, verdict, TDAX

CODE = """
import os, signal, sys
how = sys.argv[1]
fd = os.open('F', os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b'A' * 100)
os.fsync(fd)                   # real (the create)
os.pwrite(fd, b'a' * 100, 0)
os.fsync(fd)                   # lightweight: the record is the durable copy
os.symlink('F', 'L')
if how == 'O_TRUNC':
    os.open('L', os.O_WRONLY | os.O_TRUNC)
elif how == 'O_RDONLY|O_TRUNC':               # Linux truncates; tdax's do_open does not look
    os.open('F', os.O_RDONLY | os.O_TRUNC)
else:
    os.truncate('L', 0)
os.kill(os.getpid(), signal.SIGKILL)
"""
back = []
for how in ("O_TRUNC", "truncate", "O_RDONLY|O_TRUNC"):
    with Scratch() as s:
        s.run(CODE, how)
        if os.environ.get("REPRO_WITHOUT_TDAX") != "1":
            subprocess.run([TDAX, "recover", "--device", s.device, "--power-failure"],
                           capture_output=True, timeout=60)
        size = (s.dir / "F").stat().st_size
        if size:
            back.append(f"{how}: {size} bytes")
verdict(bool(back), "truncated data back after recovery: " + ", ".join(back) if back
        else "F stays empty after recovery")
