"""simdoc -- docs/simulator.md: traces of Redis, PostgreSQL, RocksDB and
SQLite (WAL and rollback journal) recorded under tdax (policy thesis), every policy of `tdax sim`
compared on them, and what tracing costs. `make sim-doc`."""
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from tdaxbench import env  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TDAX = str(env.TDAX)
PY = sys.executable
OUT = ROOT / "docs" / "sim"
DUAL = ("0", "64K", "16K")  # --big-write settings of the dual-path table


def traced(device, trace, argv, user=None):
    # One scratch device for every application, owned by the one that is
    # not root (postgres): the others accept it (--allow-shared), or would
    # run without tdax and record nothing.
    pre = [TDAX, "run", "--quiet", "--allow-shared", "--device", device, "--policy", "thesis", "--trace",
           str(trace), "--"]
    if user:
        pre = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"] + pre
    return pre + [str(a) for a in argv]


def record(device, d):
    traces = {}
    # Redis, appendfsync always, redis-benchmark SET
    port = env.free_port()
    t = d / "redis.bin"
    with env.server(traced(device, t, ["redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", d,
                                       "--appendonly", "yes", "--appendfsync", "always", "--save", ""])):
        env.wait_port(port)
        subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "set", "-n", "10000",
                        "-c", "1", "-q"], check=True, capture_output=True)
    traces["Redis (AOF always)"] = t
    # PostgreSQL, pgbench TPC-B-like
    pg = d / "pg"
    pg.mkdir()
    os.chmod(d, 0o777)
    subprocess.run(["chown", "postgres:postgres", str(pg)], check=True)
    subprocess.run(["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups",
                    str(env.PGBIN / "initdb"), "-D", str(pg / "data"), "-A", "trust", "--no-sync"],
                   check=True, capture_output=True)
    port = env.free_port()
    t = pg / "postgres.bin"
    conn = ["-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]
    with env.server(traced(device, t, [env.PGBIN / "postgres", "-D", pg / "data", "-p", port, "-k", pg,
                                       "-c", "listen_addresses=127.0.0.1"], user="postgres"),
                    stop_signal=signal.SIGINT):
        for _ in range(300):
            if subprocess.run([str(env.PGBIN / "pg_isready"), *conn], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        subprocess.run([str(env.PGBIN / "pgbench"), *conn, "-i", "-q", "postgres"], check=True, capture_output=True)
        subprocess.run([str(env.PGBIN / "pgbench"), *conn, "-c", "2", "-T", "5", "postgres"], check=True,
                       capture_output=True)
    traces["PostgreSQL (pgbench)"] = t
    # RocksDB, every write synced
    t = d / "rocksdb.bin"
    subprocess.run(traced(device, t, ["db_bench", "--benchmarks=fillseq", "--sync=true", "--num=5000",
                                      f"--db={d}/rocks", "--compression_type=none"]), check=True, capture_output=True)
    traces["RocksDB (fillseq, sync)"] = t
    # SQLite, WAL, synchronous=FULL
    t = d / "sqlite.bin"
    subprocess.run(traced(device, t, [PY, ROOT / "bench" / "sqlite_tx.py", d / "s.db", "--tx", "5000"]),
                   check=True, capture_output=True)
    traces["SQLite (WAL, FULL)"] = t
    # SQLite, rollback journal (a new journal at the same name every
    # transaction), synchronous=FULL
    t = d / "sqlite-delete.bin"
    subprocess.run(traced(device, t, [PY, ROOT / "bench" / "sqlite_tx.py", d / "sd.db", "--journal", "delete",
                                      "--tx", "2000"]), check=True, capture_output=True)
    traces["SQLite (rollback journal, FULL)"] = t
    return traces


def overhead(device, d):
    """128 B append + fdatasync under tdax, with and without tracing."""
    loop = str(ROOT / "build" / "bin" / "tdax-appendloop")
    rates = {"off": [], "on": []}
    for i in range(5):
        for mode in rates:
            tr = ["--trace", str(d / f"o{i}.bin")] if mode == "on" else []
            out = subprocess.run([TDAX, "run", "--quiet", "--device", device, *tr, "--", loop, str(d / f"l{i}{mode}"),
                                  "--count", "20000"], check=True, capture_output=True, text=True).stdout
            rates[mode].append(json.loads(out)["median_ns"])
    return {m: statistics.median(v) for m, v in rates.items()}


def main():
    device = env.fresh_device(f"/dev/shm/tdax-simdoc-{os.getpid()}", "1G", owner="postgres")
    OUT.mkdir(parents=True, exist_ok=True)
    try:
        with env.scratch("tdax-simdoc-") as d:
            traces = record(device, d)
            over = overhead(device, d)
            results, dual = {}, {}
            for app, t in traces.items():
                t0 = time.perf_counter()
                p = subprocess.run([TDAX, "sim", str(t), "--policy", "all", "--json"], check=True,
                                   capture_output=True, text=True)
                results[app] = (json.loads(p.stdout), time.perf_counter() - t0,
                                json.loads(subprocess.run([TDAX, "trace", "info", str(t), "--json"],
                                                          capture_output=True, text=True).stdout))
                dual[app] = {(pol, big): json.loads(subprocess.run(
                    [TDAX, "sim", str(t), "--policy", pol, "--big-write", big, "--json"], check=True,
                    capture_output=True, text=True).stdout) for pol in ("always", "adaptive") for big in DUAL}
    finally:
        env.stop_all()
        os.unlink(device)
    policies = [r["policy"] for r in next(iter(results.values()))[0]]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    w = 0.8 / len(policies)
    for k, (ax, metric) in enumerate(zip(axes, ("light_fraction", "est_speedup"))):
        for i, p in enumerate(policies):
            ax.bar([x + i * w for x in range(len(results))],
                   [next(r[metric] for r in rs if r["policy"] == p) or 0 for rs, _, _ in results.values()],
                   w, label=p)
        ax.set_xticks([x + 0.4 - w / 2 for x in range(len(results))], list(results), fontsize=8)
        ax.set_title({"light_fraction": "fraction of syncs answered in the device",
                      "est_speedup": "estimated speedup over no tdax"}[metric])
        if k:
            ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "policies.png", dpi=110)
    lines = ["# The policy simulator", "",
             "`tdax run --trace FILE` records every write and sync of managed files; `tdax sim FILE` "
             "replays it through a policy with a simulated device (`tdax sim --help`). The `thesis` "
             "policy is the runtime's own code (src/policy/track.c, loaded through ctypes), fed as the runtime "
             "feeds it, so a simulation of a trace under the settings it was recorded with reproduces the "
             "run's own counters (`tests/py/test_sim.py` checks it within 5 %; on the traces below every "
             "sync is classified as the runtime did).", "",
             "Written by `make sim-doc` on this machine: traces of the four applications (SQLite in two journal modes) recorded under "
             "tdax (policy thesis, default tunables), then `tdax sim --policy all`. The estimated speedup "
             "uses the default costs (real sync 250 µs, lightweight sync 0.6 µs, write 1 µs, logging "
             "0.25 µs per record + 0.13 ns per byte). The simulated `always` logs every write from a "
             "file's open on (a trace is taken with every file registered at its open); the runtime's "
             "`always` starts at a file's first sync, which copies a small new file into the log "
             "(docs/durability.md): it logs fewer bytes than the simulation says, and answers the same "
             "syncs but a large or old file's first.", "",
             "![policies](sim/policies.png)", ""]
    for app, (rs, secs, inf) in results.items():
        lines += [f"## {app}", "",
                  f"{inf['events']} events over {inf['seconds']} s, {inf['processes']} processes, "
                  f"{inf['files']} files; all policies simulated in {secs:.1f} s.", "",
                  "| policy | light syncs | real syncs | light fraction | logged MiB | peak device MiB | "
                  "upgrades | downgrades | oscillations | reactivity | downgraded after | est. speedup |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rs:
            react = f"{r['reactivity_ms']} ms / {r['reactivity_syncs']} syncs" if r["reactivity_ms"] is not None else "-"
            down = f"{r['downgrade_after_ms']} ms" if r["downgrade_after_ms"] is not None else "-"
            lines.append(f"| {r['policy']} | {r['light_syncs']} | {r['real_syncs']} | {r['light_fraction']:.3f} | "
                         f"{r['logged_bytes'] / 2**20:.1f} | {r['peak_device_bytes'] / 2**20:.1f} | {r['upgrades']} | "
                         f"{r['downgrades']} | {r['oscillations']} | {react} | {down} | {r['est_speedup']} |")
        th = next(r for r in rs if r["policy"] == "thesis")
        lines += ["", f"The run itself: {th['runtime_real_syncs']} real syncs; the simulated thesis policy "
                  f"classified {th['disagreements']} syncs differently.", ""]
    lines += ["## Which policy wins where", "",
              "Per trace, the policy with the highest estimated speedup, and how the others compare "
              "(generated from the tables above):", ""]
    for app, (rs, _, _) in results.items():
        by = {r["policy"]: r for r in rs}
        best = max(rs, key=lambda r: r["est_speedup"] or 0)
        th = by["thesis"]
        lines.append(f"- **{app}**: `{best['policy']}` ({best['est_speedup']}x, light fraction "
                     f"{best['light_fraction']:.3f}, peak device {best['peak_device_bytes'] / 2**20:.1f} MiB); "
                     f"`thesis` {th['est_speedup']}x with {th['light_fraction']:.3f} of syncs light and "
                     f"{th['peak_device_bytes'] / 2**20:.1f} MiB peak; `adaptive` {by['adaptive']['est_speedup']}x "
                     f"with {by['adaptive']['light_fraction']:.3f} light and {by['adaptive']['logged_bytes'] / 2**20:.1f} "
                     f"MiB logged (thesis {th['logged_bytes'] / 2**20:.1f}); `bandwidth` {by['bandwidth']['est_speedup']}x; "
                     f"`bypass` {by['bypass']['est_speedup']}x with {by['bypass']['light_fraction']:.3f} light, deferring "
                     f"{by['bypass']['deferred_fraction']:.3f} of the writes.")
    lines += ["", "Reading: on single-log workloads (Redis, RocksDB, SQLite) the thesis policy is within a few "
              "syncs of logging everything. On PostgreSQL, where many backends write WAL and data files, it "
              "leaves more syncs on the kernel path than `always`, `fsync-streak` or `bandwidth`, which upgrade "
              "whole files: the price of their extra device memory is visible in the peak column. `bandwidth` "
              "is bypass mode's selection (src/policy/select.c, the Transparent DAX Mappings paper's §4.3) as "
              "the upgrade policy: only files that synced in the last second are candidates, ranked by "
              "bandwidth and taken while their records for the write-back age (1 s) fit 90 % of the device, "
              "every 100 ms -- a file first written just after a selection waits up to 100 ms for the next, a "
              "large share of a trace of 0.1 s. `bypass` is bypass mode: files the selection (50 % of the device) "
              "takes are promoted at a sync once they hold a write lease (taken at their first lightweight sync), and then every write of them is deferred (logged, whatever `thesis` "
              "says of its range) and every sync is a fence until demotion (the selection drops the file, the "
              "write-back takes its records at their age, or the log is full); other files follow `thesis`. So "
              "it answers lightly the syncs `thesis` does and more -- those of a promoted file whose writes fall "
              "in ranges `thesis` does not log yet -- and its `deferred_fraction` is the share of writes bypass "
              "mode makes to the device alone (`tdax sim --policy bypass`). The thesis' own conclusion (§6.3) that its metric is not the best for "
              "PostgreSQL shows here too. `adaptive` (docs/policy.md) is never below `thesis` here and gains "
              "where the thesis waits: PostgreSQL's WAL segment, whose first bulk write holds M under U for "
              "hundreds of syncs, and SQLite's rollback journal, a steady stream (across the journals, by "
              "heirs) whose M stays under U. The reactivity column is the median time from a file's first sync "
              "to its first upgrade (and its sync count then); `downgraded after`, from a file's last sync to a "
              "downgrade.", "",
              "## The size-aware dual path", "",
              "`tdax sim --big-write SIZE` (the runtime's `TDAX_BIG_WRITE`, docs/policy.md): a write of SIZE "
              "or more is not logged even where its range is, and makes its file's next sync real. Per trace, "
              "under `always` and `adaptive`: the fraction of syncs answered lightly, the bytes logged, and "
              "the bytes logged per byte written.", "",
              "| trace | policy | big writes from | light fraction | logged MiB | device bytes per byte | big writes |",
              "|---|---|---|---|---|---|---|"]
    for app, by in dual.items():
        for (pol, big), r in by.items():
            lines.append(f"| {app} | {pol} | {'none' if big == '0' else big} | {r['light_fraction']:.3f} | "
                         f"{r['logged_bytes'] / 2**20:.1f} | {r['device_bytes_per_byte']:.3f} | {r['big_writes']} |")
    lines += ["",
              f"## What tracing costs", "",
              f"128 B append + fdatasync under tdax, median latency over 5 runs: {over['off']:,.0f} ns without "
              f"tracing, {over['on']:,.0f} ns with (`scripts/simdoc.py`). Off, tracing costs one predictable "
              "branch per event; on, a 32-byte record into a per-process buffer under a mutex, written with "
              "one O_APPEND write per 64 KiB.", ""]
    (ROOT / "docs" / "simulator.md").write_text("\n".join(lines))
    print("wrote docs/simulator.md")


if __name__ == "__main__":
    main()
