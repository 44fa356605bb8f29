"""dual_path -- the size-aware dual path (TDAX_BIG_WRITE, issue #21),
measured side by side: appends of SIZE bytes, each followed by fdatasync,
without tdax, under tdax with every write logged (the default: no write is
too big for the log), and under tdax with writes of SIZE taking the block
path (TDAX_BIG_WRITE=SIZE: not logged, each sync real). Interleaved and
repeated; medians, the two paths' ratio, and the bytes each puts in the
device per byte written. Where the block path is faster, a TDAX_BIG_WRITE
of that size pays; where it is slower, it only saves device space and
bandwidth.

usage: dual_path.py [--repeat N] [--sizes 4K,64K,...] [--policy P]
"""
import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tdaxbench.compare import ROOT, fresh_device, measure, under_tdax  # noqa: E402
from tdaxsim.__main__ import size  # noqa: E402  (SIZE with K, M, G as tdax sim reads it)

APPEND = str(ROOT / "build" / "bin" / "tdax-appendloop")
TOTAL = 16 << 20  # bytes appended per run (and at least 64 appends)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default="4K,16K,64K,256K,1M")
    ap.add_argument("--policy", default="always")
    a = ap.parse_args()
    dev = fresh_device(f"/dev/shm/tdax-bench-{os.getpid()}")
    try:
        print(f"appends of SIZE + fdatasync, policy {a.policy}, medians of {a.repeat} interleaved runs (ops/s)")
        print(f"{'size':>6} {'without tdax':>14} {'tdax, logged':>14} {'tdax, block path':>17} "
              f"{'block/logged':>13} {'logged/without':>15} {'device B/B logged':>18}")
        for n in (size(s) for s in a.sizes.split(",")):
            count = max(64, TOTAL // n)

            def loop(big=None, tdax=True):
                def argv(d):
                    cmd = [APPEND, os.path.join(d, "log"), "--size", str(n), "--count", str(count)]
                    if not tdax:
                        return cmd
                    return ["env", f"TDAX_BIG_WRITE={big or 0}"] + under_tdax(cmd, dev, a.policy)
                return argv
            r = measure([("without", loop(tdax=False)), ("logged", loop()), ("block", loop(big=n))],
                        a.repeat, "ops_per_s")
            m = {k: statistics.median(v) for k, v in r.items()}
            print(f"{n >> 10:>5}K {m['without']:>14,.0f} {m['logged']:>14,.0f} {m['block']:>17,.0f} "
                  f"{m['block'] / m['logged']:>13.2f} {m['logged'] / m['without']:>15.2f} "
                  f"{(n + 64) / n:>18.3f}")
        print("device B/B: bytes the logged path puts in the device per byte written (record"
              " header included); the block path puts none")
    finally:
        os.unlink(dev)


if __name__ == "__main__":
    main()
