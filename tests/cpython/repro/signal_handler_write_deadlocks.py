#!/usr/bin/env python3
"""write() is async-signal-safe, and programs do log from signal handlers.
Under tdax a handler's write() to a managed file, arriving while the
interrupted code is itself inside tdax's write(), deadlocks the process:
  - src/preload/interpose.c:positional holds the file's pid lock (util.c
    tdax_pidlock_acquire, keyed by pid: the same process's second
    acquisition waits for itself, for ever) around the real write;
  - the first write of a process starts the write-back thread holding
    start_lock (src/preload/writeback.c:tdax_writeback_ensure, a plain mutex); a
    handler's write to ANY managed file arriving then blocks on that mutex
    (the second variant: the handler writes another file).
docs/durability.md lists "write from a signal handler that interrupted a
write of the same file" as not supported; the start_lock case is not that
(another file, and only the process's first write).
Any policy (the lock is taken before the policy is asked). This program
writes 64-byte lines in a loop while SIGALRM (every 100 us) writes another
line to the same file from its handler.

Expected: both variants finish ("done") in well under a second.
Actual:   they hang (killed after 20 s): "pid lock" when the write-back
          thread was already running, "start_lock" when the first write
          is interrupted (timing-dependent, but it hangs in every run here).
"""
import os
import shutil
import subprocess
from _common import Scratch, verdict, TDAX

C = r"""
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
static int fd, hfd;
static volatile sig_atomic_t handled;
static void on_alarm(int sig) { (void)sig; if (write(hfd, "signal\n", 7) == 7) handled++; }
int main(int argc, char **argv)
{
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	hfd = argc > 3 ? open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644) : fd;
	if (atoi(argv[2])) { /* start the write-back thread first */
		if (write(fd, "first\n", 6) != 6) return 1;
		usleep(50000);
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 100 }, { 0, 100 } };
	setitimer(ITIMER_REAL, &it, NULL);
	char line[64];
	memset(line, 'x', 63);
	line[63] = '\n';
	for (int i = 0; i < 200000 && handled < 2000; i++)
		if (write(fd, line, 64) != 64) return 1;
	printf("done\n");
	return 0;
}
"""
hung = []
with Scratch() as s:
    (s.dir / "sigwrite.c").write_text(C)
    subprocess.run([shutil.which("cc") or "gcc", "-O2", "-o", s.dir / "sigwrite", s.dir / "sigwrite.c"],
                   check=True)
    for name, first, other in (("pid lock (same file)", "1", []),
                               ("start_lock (another file)", "0", [s.dir / "handler.log"])):
        cmd = [str(s.dir / "sigwrite"), str(s.dir / "sig.log"), first] + [str(o) for o in other]
        if os.environ.get("REPRO_WITHOUT_TDAX") != "1":
            cmd = [TDAX, "run", "--device", s.device, "--policy", "thesis", "--quiet", "--"] + cmd
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, start_new_session=True)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            hung.append(name)
    verdict(bool(hung), "hung: " + ", ".join(hung) if hung else "both variants finished")
