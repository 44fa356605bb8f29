"""tdax trace / tdax sim.

  tdax trace info FILE [--json]        what a trace holds
  tdax trace dump FILE [--limit N]     its events, one per line
  tdax sim FILE [--policy P|all] [--set KEY=VALUE ...] [--capacity SIZE]
                [--selection KEY=VALUE ...] [--wb-age-ms MS] [--big-write SIZE]
                [--cost KEY=VALUE ...] [--sweep KEY=FROM:TO:STEP ...] [--json] [--out DIR]

Policies: thesis (the runtime's own code, heirs included), always, never,
fsync-streak (SPFS), bandwidth (Transparent DAX Mappings: bypass mode's
selection, src/policy/select.c, as the upgrade policy: the files it picks
logged whole), adaptive (the runtime's: thesis with thresholds of its own per
range and upgrade-ahead), bypass (bypass mode: files the selection takes
are promoted at a sync, then every write of them is deferred -- logged --
and every sync a fence until demotion: unselected, write-back, log full;
other files follow thesis; reported as promotions, demotions,
deferred_writes). --selection sets the selection of bandwidth and bypass as
the runtime's TDAX_BYPASS_* variables do: share_pct (bypass 50, bandwidth
90), floor (bytes a second, 0), window_ms (1000); --wb-age-ms the write-back
age (TDAX_WB_AGE_MS, 1000), which bounds a file's footprint and demotes
promoted files; --big-write the size-aware dual path (TDAX_BIG_WRITE, 0:
none): a write of that size or more is not logged, even where its range is,
and makes its file's next sync real (reported as big_writes, big_bytes and
device_bytes_per_byte, the bytes logged per byte written).
Costs (microseconds unless named): real_sync_us, light_sync_us, write_us,
log_record_us, log_ns_per_byte. A sweep runs the thesis policy over the grid
on all cores and plots heatmaps of the lightweight-sync fraction and the
estimated speedup over the first two keys.
"""
import argparse
import itertools
import json
import os
import signal
import sys
from multiprocessing import Pool
from pathlib import Path

from .sim import DEFAULT_COSTS, POLICIES, SELECTION, Sim
from .trace import KINDS, Trace

TUNABLES = ["upgrade_threshold", "downgrade_threshold", "write_threshold", "granularity_order",
            "writeback_window_ms", "write_window_ms"]
SHORT = {"U": "upgrade_threshold", "D": "downgrade_threshold", "F": "write_threshold",
         "G": "granularity_order"}


def size(s):
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].lower()]) if s[-1].lower() in mult else int(s)


def kv(items, allowed, conv=int):
    out = {}
    for it in items or []:
        k, sep, v = it.partition("=")
        k = SHORT.get(k, k)
        if not sep or k not in allowed:
            raise SystemExit(f"tdax sim: '{it}': expected KEY=VALUE with KEY one of {', '.join(allowed)}")
        out[k] = conv(v)
    return out


def trace_cmd(argv):
    ap = argparse.ArgumentParser(prog="tdax trace", description="read a trace of tdax run --trace")
    ap.add_argument("what", choices=["info", "dump"])
    ap.add_argument("file")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args(argv)
    t = load(a.file)
    if a.what == "info":
        i = t.info()
        if a.json:
            print(json.dumps(i))
        else:
            print(f"{a.file}: {i['events']} events over {i['seconds']} s from {i['processes']} processes, "
                  f"{i['files']} files, {i['bytes_written']} bytes written")
            print("  " + ", ".join(f"{k} {v}" for k, v in i["by_kind"].items() if k != "name"))
            print("  tunables " + " ".join(f"{k}={v}" for k, v in i["tunables"].items()) +
                  f"; log capacity {i['log_capacity']} bytes" + ("; incomplete tail" if i["truncated_tail"] else ""))
        return
    for n, e in enumerate(t.events):
        if a.limit and n >= a.limit:
            break
        print(f"{(e.t - t.start_ns) / 1e9:12.6f} pid {e.pid:<7} {KINDS.get(e.kind, e.kind):<5} "
              f"{t.names.get(e.file, '#%d' % e.file)} off {e.off} len {e.length} flags {e.flags}")


def load(path):
    try:
        return Trace(path)
    except (OSError, ValueError) as err:
        raise SystemExit(f"tdax: {err}")


def one(job):
    path, policy, tun, cap, costs, more = job
    return Sim(load(path), policy, tun, cap, costs, **more).run()


def grid(items):
    axes = {}
    for it in items:
        k, _, v = it.partition("=")
        k = SHORT.get(k, k)
        if k not in TUNABLES or v.count(":") != 2:
            raise SystemExit(f"tdax sim: sweep '{it}': expected KEY=FROM:TO:STEP")
        lo, hi, st = (int(x) for x in v.split(":"))
        axes[k] = list(range(lo, hi + 1, st))
    return axes


def heatmaps(out, axes, results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    (kx, xs), (ky, ys) = list(axes.items())[:2]
    fig, axs = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, metric in zip(axs, ("light_fraction", "est_speedup")):
        m = [[next((r[metric] for r in results if r["tunables"][kx] == x and r["tunables"][ky] == y
                    and all(r["tunables"][k] == v[0] for k, v in list(axes.items())[2:])), 0) or 0
              for x in xs] for y in ys]
        im = ax.imshow(m, origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(xs)), xs)
        ax.set_yticks(range(len(ys)), ys)
        ax.set_xlabel(kx)
        ax.set_ylabel(ky)
        ax.set_title(metric.replace("_", " "))
        for i in range(len(ys)):
            for j in range(len(xs)):
                ax.text(j, i, f"{m[i][j]:.2f}", ha="center", va="center", color="w", fontsize=7)
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(out / "sweep.png", dpi=110)
    plt.close(fig)


def sim_cmd(argv):
    ap = argparse.ArgumentParser(prog="tdax sim", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("trace")
    ap.add_argument("--policy", default="thesis", help="one of: " + ", ".join(POLICIES) + ", all")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    ap.add_argument("--capacity", type=size, help="device log capacity (default: the trace's)")
    ap.add_argument("--selection", nargs="*", default=[], metavar="KEY=VALUE",
                    help="bypass mode's selection: " + ", ".join(SELECTION))
    ap.add_argument("--wb-age-ms", type=int, default=1000, help="the write-back age (TDAX_WB_AGE_MS)")
    ap.add_argument("--big-write", type=size, default=0,
                    help="writes of this many bytes or more take the block path (TDAX_BIG_WRITE; default 0: none)")
    ap.add_argument("--cost", nargs="*", default=[], metavar="KEY=VALUE")
    ap.add_argument("--sweep", nargs="*", metavar="KEY=FROM:TO:STEP")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", help="directory for sweep results and plots (default results/sim-<trace>)")
    a = ap.parse_args(argv)
    tun = kv(a.set, TUNABLES)
    costs = kv(a.cost, list(DEFAULT_COSTS), float)
    selection = {}
    for k, v in kv(a.selection, list(SELECTION), str).items():
        try:
            selection.update(SELECTION[k](v))
        except ValueError:
            raise SystemExit(f"tdax sim: --selection {k}={v}: expected a whole number")
    if not 1 <= selection.get("share", 0.5) * 100 <= 100 or a.wb_age_ms < 1:
        raise SystemExit("tdax sim: share_pct is 1..100 and --wb-age-ms at least 1")
    more = {"selection": selection, "wb_age_ms": a.wb_age_ms, "big_write": a.big_write}
    load(a.trace)  # clear errors before any work
    if a.sweep:
        axes = grid(a.sweep)
        jobs = [(a.trace, "thesis", {**tun, **dict(zip(axes, vals))}, a.capacity, costs, more)
                for vals in itertools.product(*axes.values())]
        with Pool(os.cpu_count()) as pool:
            results = pool.map(one, jobs)
        out = Path(a.out) if a.out else Path("results") / f"sim-{Path(a.trace).stem}"
        out.mkdir(parents=True, exist_ok=True)
        (out / "sweep.json").write_text(json.dumps(results, indent=1))
        if len(axes) >= 2:
            heatmaps(out, axes, results)
        for r in results:
            print(" ".join(f"{k}={r['tunables'][k]}" for k in axes),
                  f"light {r['light_fraction']:.3f} speedup {r['est_speedup']} upgrades {r['upgrades']}")
        print(f"results: {out}")
        return
    names = list(POLICIES) if a.policy == "all" else [a.policy]
    if any(n not in POLICIES for n in names):
        raise SystemExit(f"tdax sim: unknown policy {a.policy} (one of {', '.join(POLICIES)}, all)")
    with Pool(min(len(names), os.cpu_count())) as pool:
        results = pool.map(one, [(a.trace, n, tun, a.capacity, costs, more) for n in names])
    if a.json:
        print(json.dumps(results if len(results) > 1 else results[0]))
        return
    cols = ["light_syncs", "real_syncs", "light_fraction", "logged_bytes", "peak_device_bytes",
            "upgrades", "downgrades", "oscillations", "reactivity_ms", "est_speedup"]
    if any(r["promotions"] or r["policy"] == "bypass" for r in results):
        cols += ["promotions", "deferred_fraction"]
    print(f"{'policy':<13}" + "".join(f"{c:>18}" for c in cols))
    for r in results:
        print(f"{r['policy']:<13}" + "".join(f"{str(r[c]):>18}" for c in cols))


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("trace", "sim"):
        raise SystemExit("usage: tdax trace info|dump FILE | tdax sim FILE ...")
    try:
        (trace_cmd if sys.argv[1] == "trace" else sim_cmd)(sys.argv[2:])
        if sys.stdout:  # (None: started with it closed, as the C commands take it: /dev/null)
            sys.stdout.flush()
    except BrokenPipeError:
        # The reader went (tdax trace dump F | head): stop as a C tool's
        # SIGPIPE would, quietly; the interpreter's own flush at exit
        # must not find the pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(128 + signal.SIGPIPE)


if __name__ == "__main__":
    main()
