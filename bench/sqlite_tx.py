"""sqlite_tx -- small SQLite transactions, one row each, as fast as possible.

The embedded workload of `make demo` and the SQLite tests and benchmarks.
With --oracle, the id of every committed transaction is appended to that
file only after COMMIT returned: the record of what was acknowledged.

usage: sqlite_tx.py DB [--journal wal|delete] [--sync full|normal|off]
                       [--seconds S | --tx N] [--oracle FILE] [--payload BYTES]
prints one JSON line: {"tx": N, "seconds": S, "tx_per_s": R}
"""
import argparse
import json
import os
import sqlite3
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db")
    ap.add_argument("--journal", choices=["wal", "delete"], default="wal")
    ap.add_argument("--sync", choices=["full", "normal", "off"], default="full")
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--tx", type=int)
    ap.add_argument("--oracle")
    ap.add_argument("--payload", type=int, default=100)
    a = ap.parse_args()
    con = sqlite3.connect(a.db, isolation_level=None)
    con.execute(f"PRAGMA journal_mode={a.journal}")
    con.execute(f"PRAGMA synchronous={a.sync}")
    con.execute("CREATE TABLE IF NOT EXISTS tx(id INTEGER PRIMARY KEY, v BLOB)")
    start = (con.execute("SELECT max(id) FROM tx").fetchone()[0] or 0) + 1
    oracle = os.open(a.oracle, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if a.oracle else None
    payload = b"p" * a.payload
    n, t0 = 0, time.perf_counter()
    end = t0 + (a.seconds if a.seconds else 1e9)
    limit = a.tx if a.tx else 1 << 62
    while n < limit and time.perf_counter() < end:
        con.execute("BEGIN")
        con.execute("INSERT INTO tx(id, v) VALUES (?, ?)", (start + n, payload))
        con.execute("COMMIT")
        if oracle is not None:
            os.write(oracle, b"%d\n" % (start + n))
        n += 1
    secs = time.perf_counter() - t0
    print(json.dumps({"tx": n, "seconds": round(secs, 4), "tx_per_s": round(n / secs, 1)}))


if __name__ == "__main__":
    main()
