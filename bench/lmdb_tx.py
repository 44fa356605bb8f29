"""lmdb_tx -- small LMDB transactions, one put each, as fast as possible.

LMDB maps its data file read-only and writes it with pwrite; a commit
syncs twice (the pages, then the meta page). Runs under Debian's python3
(python3-lmdb), not the tdax virtual environment.

usage: lmdb_tx.py DIR [--nosync] [--seconds S] [--payload BYTES]
prints one JSON line: {"tx": N, "seconds": S, "tx_per_s": R}
"""
import argparse
import json
import time

import lmdb


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--nosync", action="store_true", help="commits not synced (LMDB's sync=False)")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--payload", type=int, default=100)
    a = ap.parse_args()
    env = lmdb.open(a.dir, map_size=1 << 30, sync=not a.nosync)
    payload = b"p" * a.payload
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < a.seconds:
        with env.begin(write=True) as t:
            t.put(b"k%010d" % n, payload)
        n += 1
    secs = time.perf_counter() - t0
    print(json.dumps({"tx": n, "seconds": round(secs, 4), "tx_per_s": round(n / secs, 1)}))


if __name__ == "__main__":
    main()
