"""tdax bench -- the reference experiments, side by side in one run.

usage: tdax bench SUITE|all [options]      (SUITE: redis postgres rocksdb sqlite fio ycsb startup files)

Every configuration runs without tdax ('default') and under tdax with each
policy of --policies, interleaved (A B A B ...) --repeat times; the same
workload with syncing switched off runs alongside as the ceiling. Medians,
spreads and the ratios tdax/default and tdax/sync-off are printed and
written, with raw CSV/JSON, PNG plots and a Markdown summary, to
results/<suite>-<time>/. --sweep adds the thesis' parameter study.
"""
import argparse
import itertools
import json
import os
import shutil
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import env, report
from .suites import SUITES

NEEDS = {"redis": ["redis-server", "redis-benchmark"], "ycsb": ["redis-server"],
         "postgres": [str(env.PGBIN / "postgres"), str(env.PGBIN / "pgbench")],
         "rocksdb": ["db_bench"], "fio": ["fio"], "sqlite": [], "startup": ["sh"], "files": [],
         "etcd": ["etcd"]}
PACKAGES = {"redis": "redis-server redis-tools", "ycsb": "redis-server", "postgres": "postgresql",
            "rocksdb": "rocksdb-tools", "fio": "fio", "etcd": "etcd-server"}


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
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", choices=list(SUITES) + ["all"])
    ap.add_argument("--repeat", type=int, default=3, help="interleaved repetitions (default 3)")
    ap.add_argument("--policies", default="adaptive,bypass", help="tdax configurations to run, "
                    "comma-separated: a policy in coherent mode (adaptive, thesis, always, never), "
                    "bypass (bypass mode, policy adaptive) or bypass-POLICY (default adaptive,bypass)")
    ap.add_argument("--quick", action="store_true", help="small runs (make bench)")
    ap.add_argument("--out", help="results directory (default results/<suite>-<time>)")
    ap.add_argument("--only", help="run only configs whose name contains this")
    ap.add_argument("--sweep", action="store_true", help="the U x D x F x G parameter study")
    ap.add_argument("--grid", nargs="*", metavar="K=v,v", help="sweep values, e.g. U=40,60,80 "
                    "D=10,30 F=5 G=0,4,9 (these are the defaults)")
    ap.add_argument("--requests", type=int, help="redis-benchmark requests per run (20000)")
    ap.add_argument("--seconds", type=float, help="sqlite/fio run time (5)")
    ap.add_argument("--pg-scale", type=int, default=1)
    ap.add_argument("--pg-seconds", type=int, help="pgbench duration (10)")
    ap.add_argument("--pg-clients", type=int, default=2)
    ap.add_argument("--rocks-num", type=int, help="db_bench writes per run (20000)")
    ap.add_argument("--ycsb-records", type=int, help="records loaded (2000)")
    ap.add_argument("--ycsb-ops", type=int, help="operations per run (5000)")
    ap.add_argument("--seed", type=int, default=1)
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
    if missing:
        sys.exit(f"tdax bench {suite}: missing {', '.join(missing)}; install with 'make bench-deps' "
                 f"(apt-get install -y {PACKAGES[suite]})")


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
    plan = []
    for rep in range(a.repeat):
        for c in cfgs:
            for m in ["default"] + a.policies:  # sync-off configs too: the tax rows
                plan.append((rep, c, m, None))
        for combo in combos:
            plan += [(rep, c, "thesis", combo) for c in cfgs if c.sync]
    out = Path(a.out) if a.out else env.ROOT / "results" / f"{suite}-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    defaults = {"upgrade_threshold": 60, "downgrade_threshold": 30, "write_threshold": 5, "granularity_order": 9}
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console) as prog:
        task = prog.add_task(suite, total=len(plan))
        for rep, c, m, combo in plan:
            prog.update(task, description=f"{suite}: {c.name} [{m}{' ' + json.dumps(combo) if combo else ''}]")
            env.set_tunables(device, **(combo or defaults))
            v = c.run(m, device, a)
            rows.append({"suite": suite, "config": c.name, "mode": m, "rep": rep, "value": v,
                         "unit": c.unit, "sweep": combo})
            prog.advance(task)
    env.set_tunables(device, **defaults)
    meta = {"suite": suite, "machine": env.machine(), "opts": {k: v for k, v in vars(a).items()}}
    ratios, _ = report.render(out, suite, cfgs, rows, a.policies, meta)
    report.write_raw(out, rows, {**meta, "ratios": ratios,
                                 "tax": report.tax_rows(cfgs, report.medians(rows), a.policies)})
    med = report.medians(rows)
    t = Table(title=f"{suite} ({cfgs[0].unit}, median of {a.repeat})")
    for col in ["config", "without tdax"] + [f"tdax {p}" for p in a.policies] + ["sync off"] + \
               [x for p in a.policies for x in (f"{p}/default", f"{p}/sync off")]:
        t.add_column(col, justify="right")
    for c in cfgs:
        if c.sync:
            d, off = med.get((c.name, "default"), (0,))[0], med.get((c.ref, "default"), (0,))[0]
            vs = [med.get((c.name, p), (0,))[0] for p in a.policies]
            t.add_row(c.name, f"{d:,.0f}", *[f"{v:,.0f}" for v in vs], f"{off:,.0f}",
                      *[x for v in vs for x in (f"{v / d:.2f}x" if d else "-", f"{v / off:.2f}" if off else "-")])
    console.print(t)
    tax = report.tax_rows(cfgs, med, a.policies)
    if tax:
        t = Table(title="tax: the same workload with syncing off, without and under tdax")
        for col in ["config", "without tdax"] + [f"tdax {p}" for p in a.policies] + \
                   [f"{p}/without" for p in a.policies]:
            t.add_column(col, justify="right")
        for name in dict.fromkeys(r["config"] for r in tax):
            rs = [r for r in tax if r["config"] == name]
            t.add_row(name, f"{rs[0]['default']:,.0f}", *[f"{r['tdax']:,.0f}" for r in rs],
                      *[f"{r['ratio']:.2f}" for r in rs])
        console.print(t)
    console.print(f"results: {out}")
    return out


def main():
    a = args()
    # A terminal's width; written to a file or a pipe, wide enough for a
    # column per configuration (rich would squeeze them into 80).
    console = Console(width=None if sys.stdout.isatty() else 160)
    suites = list(SUITES) if a.suite == "all" else [a.suite]
    device = f"/dev/shm/tdax-bench-{os.getpid()}"
    outs = []
    try:
        for s in suites:
            # A fresh device per suite, owned by the user the workload runs
            # as: tdax refuses a region another user owns (a root process on
            # PostgreSQL's would run without tdax, silently under --quiet).
            env.fresh_device(device, "1G", owner="postgres" if s == "postgres" else None)
            outs.append(run_suite(s, a, device, console))
    except KeyboardInterrupt:
        env.stop_all()
        print("tdax bench: interrupted; every server stopped, partial results not written",
              file=sys.stderr)
        sys.exit(130)
    finally:
        env.stop_all()
        if os.path.exists(device):
            os.unlink(device)
    if a.suite == "all":
        (env.ROOT / "results" / "latest.txt").write_text("\n".join(str(o) for o in outs) + "\n")


if __name__ == "__main__":
    main()
