"""lease_break -- how long another program's open() of a file waits while a
process under tdax holds it (issue #19: the opener is held <= 50 ms, median
<= 5 ms).

A writer appends 128 B records with an fdatasync after each, a millisecond
apart, under `tdax run --policy always` in the given mode (or without tdax:
`none`). This process, without tdax, opens the file --count times, 150 ms
apart (time for the writer to take its lease again -- tdax tries 100 ms
after a break, src/preload/lease.c -- and in bypass mode to promote the file
again), and times each open(); it checks that every open finds at least the
bytes acknowledged before it began, and counts the opens that broke a lease.
Prints one JSON line.

usage: lease_break.py DEVICE FILE coherent|bypass|none [--count N]
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
from tdaxbench.env import TDAX, tdax_prefix  # noqa: E402

WRITER = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
n = 0
while True:
    os.write(fd, b"%0127d\n" % n)
    os.fdatasync(fd)
    n += 1
    if n % 8 == 0:
        print(n, flush=True)  # acknowledged: n records
    time.sleep(0.001)
"""


def info(device):
    return json.loads(subprocess.run([str(TDAX), "device", "info", "--device", device, "--json"],
                                     capture_output=True, text=True, check=True).stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("device")
    ap.add_argument("file")
    ap.add_argument("mode", choices=["coherent", "bypass", "none"])
    ap.add_argument("--count", type=int, default=50)
    a = ap.parse_args()
    pre = [] if a.mode == "none" else tdax_prefix("bypass-always" if a.mode == "bypass" else "always", a.device)
    w = subprocess.Popen(pre + [sys.executable, "-c", WRITER, a.file], stdout=subprocess.PIPE,
                         env=dict(os.environ, TDAX_QUIET="1"), start_new_session=True)
    breaks0 = info(a.device)["counters"]["lease_breaks"] if pre else 0
    out = w.stdout.fileno()
    os.set_blocking(out, False)
    buf, acked, waits, short = b"", 0, [], 0

    def latest():
        """The writer's last word: how many records it has acknowledged."""
        nonlocal buf, acked
        try:
            while chunk := os.read(out, 65536):
                buf += chunk
        except BlockingIOError:
            pass
        lines = buf.split(b"\n")
        buf = lines[-1]
        if len(lines) > 1:
            acked = int(lines[-2])
        return acked
    try:
        while not latest():
            time.sleep(0.01)
        for _ in range(a.count):
            time.sleep(0.15)
            before = latest()
            t0 = time.perf_counter()
            fd = os.open(a.file, os.O_RDONLY)
            waits.append((time.perf_counter() - t0) * 1e3)
            short += os.fstat(fd).st_size < before * 128
            os.close(fd)
    finally:
        os.killpg(w.pid, signal.SIGKILL)
        w.wait()
    breaks = info(a.device)["counters"]["lease_breaks"] - breaks0 if pre else 0
    waits.sort()
    print(json.dumps({"mode": a.mode, "opens": len(waits), "median_ms": statistics.median(waits),
                      "p90_ms": waits[int(len(waits) * 0.9) - 1], "max_ms": waits[-1],
                      "breaks": breaks, "short": short}))


if __name__ == "__main__":
    main()
