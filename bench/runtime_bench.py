"""runtime_bench -- what tdax buys an unmodified application, measured side
by side in one run (issue #3's targets):

  * a 128 B append + fdatasync loop: without tdax, with tdax, and the same
    loop with no sync at all;
  * SQLite WAL, synchronous=FULL, one-row transactions: without tdax, with
    tdax, and synchronous=OFF;
  * the hot path budget: what tdax adds to the real write of a logged
    append (its write time less the bare write's, both medians), and what
    a lightweight sync costs.

Configurations run interleaved and repeated; medians and ratios are
printed, and the median latency of one lightweight append+sync.

usage: runtime_bench.py [--repeat N] [--seconds S] [--count N]
"""
import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tdaxbench.compare import PY, ROOT, fresh_device, measure, report, under_tdax  # noqa: E402

APPEND = str(ROOT / "build" / "bin" / "tdax-appendloop")
SQLITE = str(ROOT / "bench" / "sqlite_tx.py")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0, help="per SQLite run")
    ap.add_argument("--count", type=int, default=20000, help="appends per tdax/no-sync run")
    ap.add_argument("--policy", default="thesis")
    a = ap.parse_args()
    dev = fresh_device(f"/dev/shm/tdax-bench-{os.getpid()}")
    try:
        def loop(extra, tdax=False, count=a.count):
            def argv(d):
                cmd = [APPEND, os.path.join(d, "log"), "--size", "128", "--count", str(count)] + extra
                return under_tdax(cmd, dev, a.policy) if tdax else cmd
            return argv
        rates = measure([("default (fdatasync)", loop([], count=max(200, a.count // 100))),
                         ("tdax (fdatasync)", loop([], tdax=True)),
                         ("no sync", loop(["--nosync"]))], a.repeat, "ops_per_s")
        report("128 B append + fdatasync, ops/s", rates, "ops/s", "tdax (fdatasync)",
               ["default (fdatasync)", "no sync"])
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


if __name__ == "__main__":
    main()
