"""tdax bench -- the reference experiments, side by side in one run.

usage: tdax bench SUITE|all [options]      (SUITE: redis postgres rocksdb sqlite fio ycsb startup files etcd)

Every configuration runs without tdax ('default') and under tdax with each
configuration of --policies; the same workload with syncing switched off
runs alongside as the ceiling. A round runs them all once, side by side
(each configuration's modes the other way round every other round), and
the first configuration without tdax once more at its end: the control
pair, whose ratio is 1.0 on a quiet machine. --repeat rounds run; a round whose control
is off by more than --noise runs again, up to --retries times, and is
marked noisy if it still is. Medians (min..max) of every configuration, and
the ratios tdax/default and tdax/sync-off taken within each round as median
(min..max) of the rounds, are printed and written, with raw CSV/JSON, PNG
plots and a Markdown summary, to results/<suite>-<time>/. --sweep adds the
thesis' parameter study.
"""
import argparse
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import env, report, rounds
from .suites import SUITES

NEEDS = {"redis": ["redis-server", "redis-benchmark"], "ycsb": ["redis-server"],
         "postgres": [str(env.PGBIN / "postgres"), str(env.PGBIN / "pgbench")],
         "rocksdb": ["db_bench"], "fio": ["fio"], "sqlite": [], "startup": ["sh"], "files": [],
         "etcd": ["etcd"], "lmdb": ["/usr/bin/python3"]}
PACKAGES = {"redis": "redis-server redis-tools", "ycsb": "redis-server", "postgres": "postgresql",
            "rocksdb": "rocksdb-tools", "fio": "fio", "etcd": "etcd-server", "lmdb": "python3-lmdb"}
# Python modules a suite's workload imports, by the interpreter it runs under.
MODULES = {"lmdb": ("/usr/bin/python3", "lmdb")}


def parse_grid(items):
    grid = {"upgrade_threshold": [40, 60, 80], "downgrade_threshold": [10, 30],
            "write_threshold": [5], "granularity_order": [0, 4, 9]}
    short = {"U": "upgrade_threshold", "D": "downgrade_threshold", "F": "write_threshold",
             "G": "granularity_order"}
    for it in items or []:
        k, _, v = it.partition("=")
        grid[short.get(k, k)] = [int(x) for x in v.split(",")]
    return grid


def args():
    ap = argparse.ArgumentParser(prog="tdax bench", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", choices=list(SUITES) + ["all"])
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds (default 5, --quick too)")
    ap.add_argument("--noise", type=float, default=10, metavar="PCT", help="a round whose control pair "
                    "(its first configuration without tdax, run again last) differs by more than PCT %% is "
                    "noisy and runs again (default 10)")
    ap.add_argument("--retries", type=int, default=2, metavar="N", help="times a noisy round runs "
                    "again; then the least noisy attempt is kept, marked (default 2)")
    ap.add_argument("--policies", default="adaptive,bypass", help="tdax configurations to run, "
                    "comma-separated: a policy in coherent mode (adaptive, thesis, always, never), "
                    "bypass (bypass mode, policy adaptive) or bypass-POLICY (default adaptive,bypass)")
    ap.add_argument("--quick", action="store_true", help="small runs (make bench)")
    ap.add_argument("--out", help="results directory (default results/<suite>-<time>)")
    ap.add_argument("--only", help="run only configs whose name contains this")
    ap.add_argument("--sweep", action="store_true", help="the U x D x F x G parameter study")
    ap.add_argument("--grid", nargs="*", metavar="K=v,v", help="sweep values, e.g. U=40,60,80 "
                    "D=10,30 F=5 G=0,4,9 (these are the defaults)")
    ap.add_argument("--requests", type=int, help="redis-benchmark requests per run at pipeline 1 "
                    "(20000; times the pipeline at 10: a run of a few tens of ms would time "
                    "the server's start and the AOF's promotion, not its steady state)")
    ap.add_argument("--seconds", type=float, help="sqlite/lmdb/fio run time (5)")
    ap.add_argument("--pg-scale", type=int, default=1)
    ap.add_argument("--pg-seconds", type=int, help="pgbench duration (10)")
    ap.add_argument("--pg-clients", type=int, default=2)
    ap.add_argument("--rocks-num", type=int, help="db_bench writes per run (20000)")
    ap.add_argument("--ycsb-records", type=int, help="records loaded (2000)")
    ap.add_argument("--ycsb-ops", type=int, help="operations per run (5000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--persistence", choices=["adr", "gpf"], default="adr",
                    help="the memory the emulated device stands for (tdax device create --persistence)")
    a = ap.parse_args()
    q = a.quick
    for k, full, quick in (("requests", 20000, 10000), ("seconds", 5, 2), ("pg_seconds", 10, 3),
                           ("rocks_num", 20000, 3000), ("ycsb_records", 2000, 300), ("ycsb_ops", 5000, 1000)):
        if getattr(a, k) is None:
            setattr(a, k, quick if q else full)
    a.policies = [p for p in a.policies.split(",") if p]
    for p in a.policies:
        if p not in env.COLUMNS:
            ap.error(f"unknown policy {p} ({', '.join(env.COLUMNS)})")
    return a


def check_tools(suite):
    missing = [t for t in NEEDS[suite] if not shutil.which(t)]
    if suite in MODULES and not missing:
        py, module = MODULES[suite]
        if subprocess.run([py, "-c", f"import {module}"], capture_output=True).returncode:
            missing = [f"{py}'s module {module}"]
    if missing:
        sys.exit(f"tdax bench {suite}: missing {', '.join(missing)}; install with 'make bench-deps' "
                 f"(apt-get install -y {PACKAGES[suite]})")


def now():
    return time.strftime("%Y-%m-%d %H:%M:%S %Z")


def run_suite(suite, a, device, console):
    check_tools(suite)
    cfgs = SUITES[suite](a)
    if a.only:
        keep = [c for c in cfgs if c.sync and a.only in c.name]
        refs = {c.ref for c in keep}
        cfgs = keep + [c for c in cfgs if c.name in refs]
    if not cfgs:
        sys.exit(f"tdax bench {suite}: no configuration matches --only {a.only!r}")
    grid = parse_grid(a.grid) if a.sweep else None
    combos = [dict(zip(grid, vals)) for vals in itertools.product(*grid.values())] if grid else []
    runs = rounds.plan(cfgs, a.policies, combos)  # one round; sync-off configs too: the tax rows
    out = Path(a.out) if a.out else env.ROOT / "results" / f"{suite}-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    defaults = {"upgrade_threshold": 60, "downgrade_threshold": 30, "write_threshold": 5, "granularity_order": 9}
    started = now()
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console) as prog:
        total = [len(runs) * a.repeat]
        task = prog.add_task(suite, total=total[0])

        def measure(c, m, combo):
            prog.update(task, description=f"{suite}: {c.name} [{m}{' ' + json.dumps(combo) if combo else ''}]")
            env.set_tunables(device, **(combo or defaults))
            v = c.run(m, device, a)
            prog.advance(task)
            return v

        def note(rnd, attempt, ratio, again):
            if again:
                total[0] += len(runs)
                prog.update(task, total=total[0])
            if rounds.noisy(ratio, a.noise / 100):
                console.print(f"{suite}: round {rnd + 1}: control {ratio:.2f}, off 1.0 by more than "
                              f"{a.noise:g} %: " + ("running it again" if again else "kept, marked noisy"))
        rows = rounds.run(runs, measure, a.repeat, a.noise / 100, a.retries, note)
    env.set_tunables(device, **defaults)
    rows = [{"suite": suite, **r} for r in rows]
    meta = {"suite": suite, "started": started, "finished": now(), "machine": env.machine(),
            "opts": {k: v for k, v in vars(a).items()}}
    ratios, tax, ctl, _ = report.render(out, suite, cfgs, rows, a.policies, meta)
    report.write_raw(out, rows, {**meta, "ratios": ratios, "tax": tax, "control": ctl})
    print_tables(console, suite, cfgs, rows, ratios, tax, ctl, a)
    console.print(f"results: {out}")
    return out


def print_tables(console, suite, cfgs, rows, ratios, tax, ctl, a):
    """The run's tables: medians of every config, the ratios as median
    (min..max) of the rounds, the tax, and the control pair."""
    med = report.medians(rows)
    t = Table(title=f"{suite} ({cfgs[0].unit}, median of {a.repeat} rounds; ratios: median (min..max) "
                    "of each round's)")
    for col in ["config", "without tdax"] + [f"tdax {p}" for p in a.policies] + ["sync off"] + \
               [x for p in a.policies for x in (f"{p}/default", f"{p}/sync off")]:
        t.add_column(col, justify="right")
    for c in cfgs:
        if c.sync:
            vs = [med.get(k, (0,))[0] for k in [(c.name, "default")] + [(c.name, p) for p in a.policies] +
                  [(c.ref, "default")]]
            t.add_row(c.name, *[f"{v:,.0f}" for v in vs], *report.ratio_cells(ratios, c.name, a.policies))
    console.print(t)
    if tax:
        t = Table(title="tax: the same workload with syncing off, without and under tdax")
        for col in ["config", "without tdax"] + [f"tdax {p}" for p in a.policies] + \
                   [f"{p}/without" for p in a.policies]:
            t.add_column(col, justify="right")
        for name in dict.fromkeys(r["config"] for r in tax):
            rs = [r for r in tax if r["config"] == name]
            t.add_row(name, f"{rs[0]['default']:,.0f}", *[f"{r['tdax']:,.0f}" for r in rs],
                      *[report.fmt_ratio(r, "ratio") for r in rs])
        console.print(t)
    console.print(report.control_line(ctl, a.retries))


def main():
    a = args()
    # A terminal's width; written to a file or a pipe, wide enough for a
    # column per configuration (rich would squeeze them into 80).
    console = Console(width=None if sys.stdout.isatty() else 160)
    suites = list(SUITES) if a.suite == "all" else [a.suite]
    device = f"/dev/shm/tdax-bench-{os.getpid()}"
    outs = []
    env.catch_signals()
    try:
        for s in suites:
            # A fresh device per suite, owned by the user the workload runs
            # as: tdax refuses a region another user owns (a root process on
            # PostgreSQL's would run without tdax, silently under --quiet).
            env.fresh_device(device, "1G", owner="postgres" if s == "postgres" else None,
                             persistence=a.persistence)
            outs.append(run_suite(s, a, device, console))
    except KeyboardInterrupt as e:
        env.ignore_signals()
        env.stop_all(quick=True)
        sig = getattr(e, "signum", signal.SIGINT)
        print(f"tdax bench: interrupted ({signal.Signals(sig).name}); every server stopped, "
              "partial results not written", file=sys.stderr)
        sys.exit(128 + sig)
    finally:
        env.ignore_signals()
        env.stop_all(quick=True)
        if os.path.exists(device):
            os.unlink(device)
    if a.suite == "all":
        (env.ROOT / "results" / "latest.txt").write_text("\n".join(str(o) for o in outs) + "\n")


if __name__ == "__main__":
    main()
