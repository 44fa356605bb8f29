"""demo -- the README's main job (`make demo`).

SQLite in WAL mode with synchronous=FULL, one small row per transaction,
runs three ways, interleaved and repeated: without tdax, under tdax (the
emulated device on /dev/shm), and with synchronous=OFF (no durability, the
ceiling). Then a run under tdax is SIGKILLed mid-flight and, after
recovery, every transaction it acknowledged is checked to be there.
"""
import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from tdaxbench.compare import PY, ROOT, TDAX, fresh_device, measure, report, under_tdax  # noqa: E402

WORKLOAD = str(ROOT / "bench" / "sqlite_tx.py")


def throughput(device, seconds, repeat):
    def cfg(sync, tdax):
        def argv(d):
            a = [PY, WORKLOAD, os.path.join(d, "demo.db"), "--sync", sync, "--seconds", str(seconds)]
            return under_tdax(a, device) if tdax else a
        return argv
    rates = measure([("without tdax (FULL)", cfg("full", False)),
                     ("with tdax (FULL)", cfg("full", True)),
                     ("synchronous=OFF", cfg("off", False))], repeat, "tx_per_s")
    return report(f"SQLite WAL, one-row transactions, median of {repeat} interleaved runs of "
                  f"{seconds:g} s", rates, "tx/s", "with tdax (FULL)",
                  ["without tdax (FULL)", "synchronous=OFF"])


def crash(device):
    with tempfile.TemporaryDirectory(prefix="tdax-demo-", dir="/var/tmp") as d:
        return crash_in(device, d)


def crash_in(device, d):
    db, oracle = os.path.join(d, "crash.db"), os.path.join(d, "acknowledged")
    p = subprocess.Popen(under_tdax([PY, WORKLOAD, db, "--seconds", "30", "--oracle", oracle],
                                    device), stdout=subprocess.DEVNULL)
    time.sleep(1.5)
    p.send_signal(signal.SIGKILL)
    p.wait()
    acked = [int(x) for x in Path(oracle).read_text().split()]
    rec = subprocess.run([str(TDAX), "recover", "--device", device, "--json"], capture_output=True,
                         text=True, check=True)
    r = json.loads(rec.stdout)
    con = sqlite3.connect(db)
    ok = con.execute("PRAGMA integrity_check").fetchone()[0]
    have = {row[0] for row in con.execute("SELECT id FROM tx")}
    missing = [a for a in acked if a not in have]
    print(f"\nCrash: SIGKILL after 1.5 s under tdax; {len(acked)} transactions acknowledged.")
    print(f"  tdax recover: {r['mode']} mode, {r['records']} records in {len(r['files'])} files "
          f"synced and released")
    print(f"  PRAGMA integrity_check: {ok}; acknowledged transactions present: "
          f"{len(acked) - len(missing)} of {len(acked)}")
    return ok == "ok" and not missing


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    device = fresh_device(f"/dev/shm/tdax-demo-{os.getpid()}")
    print(f"Device: {device} (emulated on /dev/shm: survives process crashes and simulated power "
          f"failures, not real power loss)")
    try:
        throughput(device, a.seconds, a.repeat)
        ok = crash(device)
    finally:
        os.unlink(device)
    print("\nOK: nothing acknowledged was lost." if ok else "\nFAILED: acknowledged data lost.")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
