"""runtime_bench -- what tdax buys an unmodified application, measured side
by side in one run (issue #3's targets):

  * a 128 B append + fdatasync loop: without tdax, with tdax, and the same
    loop with no sync at all;
  * SQLite WAL, synchronous=FULL, one-row transactions: without tdax, with
    tdax, and synchronous=OFF;
  * the hot path budget: what tdax adds to the real write of a logged
    append (its write time less the bare write's, both medians), and what
    a lightweight sync costs;
  * bypass mode (issue #19): the same append loop with its file promoted
    (target: >= 2x the no-sync loop without tdax, a sync <= 200 ns), and
    how long another program's open() of a file tdax holds waits
    (bench/lease_break.py; target: median <= 5 ms, at most 50 ms);
  * the append loops again on a region emulating GPF memory (`device
    create --persistence gpf`: the CPU caches persistent, a fence and no
    line written back), beside the default ADR region's.

Configurations run interleaved and repeated; medians and ratios are
printed, and the median latency of one lightweight append+sync.

usage: runtime_bench.py [--repeat N] [--seconds S] [--count N]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tdaxbench.compare import PY, ROOT, fresh_device, measure, report, under_tdax  # noqa: E402

APPEND = str(ROOT / "build" / "bin" / "tdax-appendloop")
SQLITE = str(ROOT / "bench" / "sqlite_tx.py")
LEASE_BREAK = str(ROOT / "bench" / "lease_break.py")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0, help="per SQLite run")
    ap.add_argument("--count", type=int, default=20000, help="appends per tdax/no-sync run")
    ap.add_argument("--policy", default="thesis")
    a = ap.parse_args()
    dev = fresh_device(f"/dev/shm/tdax-bench-{os.getpid()}")
    gpf = fresh_device(f"/dev/shm/tdax-bench-gpf-{os.getpid()}", persistence="gpf")
    try:
        def loop(extra, tdax=False, count=a.count, on=dev):
            def argv(d):
                cmd = [APPEND, os.path.join(d, "log"), "--size", "128", "--count", str(count)] + extra
                return under_tdax(cmd, on, tdax if isinstance(tdax, str) else a.policy) if tdax else cmd
            return argv
        rates = measure([("default (fdatasync)", loop([], count=max(200, a.count // 100))),
                         ("tdax (fdatasync)", loop([], tdax=True)),
                         ("tdax bypass (fdatasync)", loop([], tdax="bypass")),
                         ("tdax, gpf (fdatasync)", loop([], tdax=True, on=gpf)),
                         ("tdax bypass, gpf (fdatasync)", loop([], tdax="bypass", on=gpf)),
                         ("no sync", loop(["--nosync"]))], a.repeat, "ops_per_s")
        report("128 B append + fdatasync, ops/s (gpf: on a region emulating GPF memory)", rates, "ops/s",
               "tdax (fdatasync)", ["default (fdatasync)"])
        med = {n: statistics.median(v) for n, v in rates.items()}
        for n in ("tdax (fdatasync)", "tdax, gpf (fdatasync)"):
            print(f"  {n} / no sync: {med[n] / med['no sync']:.2f} (target 0.6)")
        for n in ("tdax bypass (fdatasync)", "tdax bypass, gpf (fdatasync)"):
            print(f"  {n} / no sync: {med[n] / med['no sync']:.2f}x (target 2x)")
        lat = measure([("tdax", loop([], tdax=True))], a.repeat, "median_ns")["tdax"]
        sync = measure([("tdax", loop([], tdax=True))], a.repeat, "sync_median_ns")["tdax"]
        bare = measure([("write", loop(["--nosync"]))], a.repeat, "median_ns")["write"]
        lat, sync, bare = (statistics.median(x) for x in (lat, sync, bare))
        print(f"  under tdax, median of {a.repeat} runs' medians: append + sync "
              f"{lat:,.0f} ns, the lightweight sync alone {sync:,.0f} ns")
        # The hot path budget (issue #17): what tdax adds to the real write
        # of a logged append, and what a lightweight sync costs.
        print(f"  hot path budget: a logged write adds {lat - sync - bare:,.0f} ns to the bare "
              f"write's {bare:,.0f} ns (budget 300); a lightweight sync {sync:,.0f} ns (budget 500)")
        bsync = {n: statistics.median(v) for n, v in measure(
            [("adr", loop([], tdax="bypass")), ("gpf", loop([], tdax="bypass", on=gpf))], a.repeat,
            "sync_median_ns").items()}
        print(f"  bypass mode: a sync of a promoted file {bsync['adr']:,.0f} ns, on the gpf region "
              f"{bsync['gpf']:,.0f} ns (target 200)")
        lease_breaks(dev, a.repeat)

        def sq(sync, tdax=False):
            def argv(d):
                cmd = [PY, SQLITE, os.path.join(d, "b.db"), "--sync", sync, "--seconds", str(a.seconds)]
                return under_tdax(cmd, dev, a.policy) if tdax else cmd
            return argv
        rates = measure([("default (FULL)", sq("full")), ("tdax (FULL)", sq("full", True)),
                         ("synchronous=OFF", sq("off"))], a.repeat, "tx_per_s")
        report("SQLite WAL, one-row transactions, tx/s", rates, "tx/s", "tdax (FULL)",
               ["default (FULL)", "synchronous=OFF"])
    finally:
        os.unlink(dev)
        os.unlink(gpf)


def lease_breaks(dev, repeat):
    """Another program's open() of a file a writer under tdax holds, in
    each mode (bench/lease_break.py): medians of the runs' medians, the
    worst of their maxima."""
    print("\nopen() of a file another process writes and syncs under tdax, ms")
    runs = {m: [] for m in ("none", "coherent", "bypass")}
    for _ in range(repeat):
        for m in runs:
            d = tempfile.mkdtemp(prefix="tdax-bench-", dir="/var/tmp")
            try:
                out = subprocess.run([PY, LEASE_BREAK, dev, os.path.join(d, "log"), m, "--count", "20"],
                                     capture_output=True, text=True, check=True, timeout=300).stdout
                runs[m].append(json.loads(out.strip().splitlines()[-1]))
            finally:
                shutil.rmtree(d, ignore_errors=True)
    for m, rs in runs.items():
        label = {"none": "without tdax", "coherent": "coherent (lease)", "bypass": "bypass (promoted)"}[m]
        print(f"  {label:<18}  median {statistics.median(r['median_ms'] for r in rs):7.3f}  "
              f"p90 {statistics.median(r['p90_ms'] for r in rs):7.3f}  max {max(r['max_ms'] for r in rs):7.3f}"
              f"  (leases broken: {sum(r['breaks'] for r in rs)} of {sum(r['opens'] for r in rs)} opens; "
              f"opens that missed acknowledged bytes: {sum(r['short'] for r in rs)})")
    print("  target in bypass mode: median <= 5 ms, max <= 50 ms")


if __name__ == "__main__":
    main()
