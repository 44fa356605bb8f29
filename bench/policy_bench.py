"""policy_bench -- the tracking policy measured (issue #4):

  * reactivity: a new WAL-like stream (128 B append + fdatasync) on a fresh
    file; how many syncs and how long until its syncs become lightweight,
    and what fraction of them is, for granularity orders G = 0, 4, 9;
  * Redis 7, appendonly yes, appendfsync always and everysec,
    redis-benchmark SET (1 client, pipeline 1), under the policies adaptive
    (the default), thesis, always and never, interleaved and repeated;
    default / always is the bar (>= 0.95, issue #21).

usage: policy_bench.py [--repeat N] [--requests N]
"""
import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tdaxbench.compare import ROOT, TDAX, fresh_device, under_tdax  # noqa: E402

APPEND = str(ROOT / "build" / "bin" / "tdax-appendloop")


def reactivity(dev):
    print("\nReactivity: 128 B append + fdatasync on a new file, 5000 times "
          "(a sync under 20 us counts as lightweight)")
    print(f"  {'G':>3} {'range':>9} {'first light sync':>17} {'after':>10} {'light syncs':>12}")
    for g in (0, 4, 9):
        subprocess.run([str(TDAX), "set", "--device", dev, f"granularity_order={g}"], check=True)
        d = tempfile.mkdtemp(prefix="tdax-react-", dir="/var/tmp")
        try:
            out = subprocess.run(under_tdax([APPEND, os.path.join(d, "wal"), "--count", "5000",
                                             "--light-under", "20000"], dev),
                                 capture_output=True, text=True, check=True).stdout
        finally:
            shutil.rmtree(d, ignore_errors=True)
        r = __import__("json").loads(out)
        size = 4 << g
        print(f"  {g:>3} {size:>6} KiB {r['first_light_sync']:>17} "
              f"{r['first_light_ns'] / 1e6:>7.2f} ms {100 * r['light_fraction']:>11.1f}%")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_once(dev, policy, fsync, requests):
    d = tempfile.mkdtemp(prefix="tdax-redis-", dir="/var/tmp")
    port = free_port()
    cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--appendonly",
           "yes", "--appendfsync", fsync, "--save", "", "--auto-aof-rewrite-percentage", "0"]
    srv = subprocess.Popen(under_tdax(cmd, dev, policy), stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.02)
        out = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "set",
                              "-n", str(requests), "-c", "1", "-P", "1", "--csv", "-q"],
                             capture_output=True, text=True, check=True, timeout=600).stdout
        return float(out.strip().splitlines()[-1].split(",")[1].strip('"'))
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=60)
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--requests", type=int, default=20000)
    a = ap.parse_args()
    dev = fresh_device(f"/dev/shm/tdax-policy-{os.getpid()}")
    try:
        reactivity(dev)
        subprocess.run([str(TDAX), "set", "--device", dev, "granularity_order=9"], check=True)
        for fsync in ("always", "everysec"):
            rates = {p: [] for p in ("adaptive", "thesis", "always", "never")}
            for _ in range(a.repeat):
                for p in rates:
                    rates[p].append(redis_once(dev, p, fsync, a.requests))
            print(f"\nRedis SET, appendfsync {fsync}, 1 client, pipeline 1, {a.requests} requests; "
                  f"median of {a.repeat} interleaved runs")
            med = {p: statistics.median(v) for p, v in rates.items()}
            for p, v in rates.items():
                print(f"  policy {p:<8} {med[p]:>10,.0f} req/s  (runs: {min(v):,.0f}..{max(v):,.0f})")
            print(f"  adaptive (the default) / always: {med['adaptive'] / med['always']:.2f}   "
                  f"thesis / always: {med['thesis'] / med['always']:.2f}   "
                  f"adaptive / never: {med['adaptive'] / med['never']:.2f}x")
    finally:
        os.unlink(dev)


if __name__ == "__main__":
    main()
