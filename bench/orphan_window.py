"""orphan_window -- how long a promoted file lacks its acknowledged bytes
after its writer is killed (issue #19 item 7: `tdax run`, the writer's
parent in bypass mode, writes them in once it has reaped it).

Each round: a writer appends 128 B records with an fdatasync after each
under `tdax run --mode bypass --policy always`, tells how many it has
acknowledged, and is SIGKILLed (tdax run is not); this process (without
tdax) then stats the file until it holds every acknowledged byte, and
times that from the kill. Prints one JSON line: median and max in ms.

usage: orphan_window.py DEVICE DIR [--rounds N]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tdaxbench.env import tdax_prefix  # noqa: E402

WRITER = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.write(fd, b"%0127d\n" % 0); os.fdatasync(fd)
time.sleep(0.1)  # (leases need tdax's write-back thread running)
for n in range(1, 2000):
    os.write(fd, b"%0127d\n" % n); os.fdatasync(fd)
print(os.getpid(), 2000, flush=True)
time.sleep(60)
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("device")
    ap.add_argument("dir")
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args()
    waits, short_at_kill = [], 0
    for r in range(a.rounds):
        path = os.path.join(a.dir, f"log{r}")
        p = subprocess.Popen(tdax_prefix("bypass-always", a.device) + [sys.executable, "-c", WRITER, path],
                             stdout=subprocess.PIPE, text=True, env=dict(os.environ, TDAX_QUIET="1"))
        try:
            pid, acked = (int(x) for x in p.stdout.readline().split())
            short_at_kill += os.stat(path).st_size < acked * 128  # else nothing was deferred
            t0 = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            while os.stat(path).st_size < acked * 128:
                if time.perf_counter() - t0 > 10:
                    sys.exit(f"orphan_window: {path} still short 10 s after the kill")
            waits.append((time.perf_counter() - t0) * 1e3)
            p.wait(timeout=30)  # tdax run ends once its command is reaped
        finally:
            p.kill()
            p.wait()
    print(json.dumps({"rounds": len(waits), "deferred_at_kill": short_at_kill,
                      "median_ms": statistics.median(waits), "max_ms": max(waits)}))


if __name__ == "__main__":
    main()
