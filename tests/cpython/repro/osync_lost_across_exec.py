#!/usr/bin/env python3
"""O_SYNC/O_DSYNC are stripped from the kernel's descriptor of a managed
file (src/preload/interpose.c:do_open opens with flags & ~O_SYNC; tdax honours them
itself in finish_write, and F_GETFL is patched in do_fcntl from tdax's fd
table). The fd table is per process: a child that inherits the descriptor
across exec rebuilds its table from the kernel's flags
(src/preload/runtime.c:adopt_inherited_fds -> real F_GETFL), which no longer have
O_SYNC. The child's writes are then neither synchronous in the kernel nor
synced by tdax -- under --policy thesis or never, where writes that are not
upgraded are not logged, they are lost at a power cut although the file was
opened O_SYNC. /proc/PID/fdinfo shows the flags without O_SYNC too.

Expected: the child sees O_SYNC in F_GETFL and its writes are synchronous.
Actual:   F_GETFL in the child has no O_SYNC (nor O_DSYNC).
"""
from _common import Scratch, verdict

CODE = """
import fcntl, os, subprocess, sys
fd = os.open('sync.dat', os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_SYNC, 0o644)
child = ("import fcntl, os, sys; fd = int(sys.argv[1]); "
         "print(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_SYNC == os.O_SYNC)")
print(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_SYNC == os.O_SYNC)
sys.stdout.flush()
subprocess.run([sys.executable, '-c', child, str(fd)], pass_fds=[fd], check=True)
"""
with Scratch() as s:
    parent, child = s.run(CODE, policy="thesis").stdout.decode().split()
    verdict(child != "True", f"O_SYNC in F_GETFL: parent {parent}, exec'd child {child}")
