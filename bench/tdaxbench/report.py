"""report -- medians, per-round ratios and their spread, the control pair,
CSV/JSON, plots and the Markdown summary of a `tdax bench` run.

A ratio (tdax/default, tdax/sync off, the tax) is taken within each round,
between runs made side by side, and reported as the median (min..max) of
those per-round ratios; only the rounds rounds.py kept count."""
import csv
import json
import statistics
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import rounds  # noqa: E402
from .suites import REFERENCE  # noqa: E402


def measured(rows):
    """The rows the figures come from: the kept rounds' runs, without the
    control runs and the sweep."""
    return [r for r in rows if r.get("kept", True) and not r.get("control") and not r.get("sweep")]


def medians(rows):
    """{(config, mode): (median, min, max, n)} over the measured rows."""
    by = defaultdict(list)
    for r in measured(rows):
        by[(r["config"], r["mode"])].append(r["value"])
    return {k: rounds.spread(v) for k, v in by.items()}


def per_round(rows):
    """{(round, config, mode): value} of the measured rows."""
    return {(r["rep"], r["config"], r["mode"]): r["value"] for r in measured(rows)}


def round_ratios(by, num, den):
    """num/den of each round holding both ((config, mode) pairs), in order."""
    reps = sorted({k[0] for k in by})
    return [by[(r, *num)] / by[(r, *den)] for r in reps
            if (r, *num) in by and by.get((r, *den))]


def with_spread(out, key, ratios):
    """out[key] = the median of ratios, out[key + "_range"] = [min, max]."""
    s = rounds.spread(ratios)
    out[key] = s[0] if s else None
    out[key + "_range"] = [s[1], s[2]] if s else None
    return out


def ratio_rows(cfgs, rows, policies):
    """Per sync config and policy: tdax/default and tdax/sync-off, each
    round's, their median and range."""
    med, by, out = medians(rows), per_round(rows), []
    for c in cfgs:
        if not c.sync or (c.name, "default") not in med:
            continue
        for p in policies:
            if (c.name, p) in med:
                r = {"config": c.name, "policy": p, "default": med[(c.name, "default")][0],
                     "tdax": med[(c.name, p)][0], "sync_off": med.get((c.ref, "default"), (None,))[0],
                     "rounds": med[(c.name, p)][3]}
                with_spread(r, "vs_default", round_ratios(by, (c.name, p), (c.name, "default")))
                out.append(with_spread(r, "vs_sync_off", round_ratios(by, (c.name, p), (c.ref, "default"))))
    return out


def tax_rows(cfgs, rows, policies):
    """Per sync-off config and policy: under tdax / without tdax -- what
    tdax costs a workload it cannot speed up (issue 17: >= 0.97)."""
    med, by, out = medians(rows), per_round(rows), []
    for c in cfgs:
        if c.sync or (c.name, "default") not in med:
            continue
        for p in policies:
            if (c.name, p) in med:
                r = {"config": c.name, "policy": p, "default": med[(c.name, "default")][0],
                     "tdax": med[(c.name, p)][0], "rounds": med[(c.name, p)][3]}
                out.append(with_spread(r, "ratio", round_ratios(by, (c.name, p), (c.name, "default"))))
    return out


def fmt_ratio(row, key, suffix=""):
    """A ratio cell: median (min..max) across rounds."""
    med, rng = row.get(key), row.get(key + "_range")
    if med is None:
        return "-"
    return f"{med:.2f}{suffix}" + (f" ({rng[0]:.2f}..{rng[1]:.2f}{suffix})" if row.get("rounds", 1) > 1 else "")


def control_line(ctl, retries=None):
    """One sentence on the control pair of a suite's rounds."""
    if not ctl:
        return "No control pair (these results predate it)."
    spread = f"{ctl['median']:.2f}" + (f" ({ctl['min']:.2f}..{ctl['max']:.2f})" if ctl["rounds"] > 1 else "")
    noisy = ", ".join(f"round {i + 1} ({ctl['ratios'][i]:.2f})" for i in ctl["noisy"]) or "none"
    return (f"Control: '{ctl['config']}' without tdax, first and last run of each round, last/first "
            f"{spread}; threshold {ctl['noise'] * 100:g} %; rounds run again: {ctl['repeated']}"
            + (f" (at most {retries} per round)" if retries is not None else "")
            + f"; noisy rounds kept: {noisy}.")


def render(outdir, suite, cfgs, rows, policies, meta):
    """Everything a run leaves besides the raw data: plots and summary.
    Returns the ratios, the tax rows, the control pair and the summary."""
    med = medians(rows)
    ratios, tax = ratio_rows(cfgs, rows, policies), tax_rows(cfgs, rows, policies)
    ctl = rounds.control(rows, meta["opts"].get("noise", 10) / 100)
    plot_suite(outdir, suite, cfgs, med, ratios, policies)
    plot_sweep(outdir, suite, rows)
    return ratios, tax, ctl, summary(outdir, suite, cfgs, med, ratios, tax, ctl, policies, meta)


def write_raw(outdir, rows, meta):
    with open(outdir / "raw.csv", "w", newline="") as f:
        keys = ["suite", "config", "mode", "rep", "attempt", "control", "kept", "value", "unit", "sweep"]
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({**r, "sweep": json.dumps(r.get("sweep")) if r.get("sweep") else ""})
    (outdir / "results.json").write_text(json.dumps({**meta, "rows": rows}, indent=1))


def plot_suite(outdir, suite, cfgs, med, ratios, policies):
    syncs = [c for c in cfgs if c.sync]
    names = [c.name for c in syncs]
    modes = ["default"] + policies
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(8, 1.3 * len(names) + 4), 4.2))
    w = 0.8 / (len(modes) + 1)
    for i, m in enumerate(modes + ["sync off"]):
        ys = [med.get((c.ref, "default") if m == "sync off" else (c.name, m), (0,))[0] for c in syncs]
        a1.bar([x + i * w for x in range(len(names))], ys, w, label=m)
    a1.set_xticks([x + w * len(modes) / 2 for x in range(len(names))], names, rotation=30, ha="right",
                  fontsize=8)
    a1.set_yscale("log")
    a1.set_ylabel(cfgs[0].unit)
    a1.set_title(f"{suite}: throughput (median)")
    a1.legend(fontsize=8)
    for p in policies:
        rs = [r for r in ratios if r["policy"] == p and r["vs_sync_off"] is not None]
        ys = [r["vs_sync_off"] for r in rs]
        err = [[y - r["vs_sync_off_range"][0] for y, r in zip(ys, rs)],
               [r["vs_sync_off_range"][1] - y for y, r in zip(ys, rs)]]
        a2.errorbar([r["config"] for r in rs], ys, yerr=err, fmt="o-", capsize=3, label=f"{p} / sync off")
    a2.axhline(0.9, color="grey", ls="--", lw=1, label="bar: 0.9 of sync off")
    a2.set_ylim(0, max(1.2, max([(r["vs_sync_off_range"] or [0, 0])[1] for r in ratios] + [0])))
    a2.tick_params(axis="x", rotation=30, labelsize=8)
    for lbl in a2.get_xticklabels():
        lbl.set_ha("right")
    a2.set_title("tdax relative to syncing off\n(median and range of the rounds' ratios)", fontsize=10)
    a2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(outdir / f"{suite}.png", dpi=110)
    plt.close(fig)


def plot_sweep(outdir, suite, rows):
    """Speedup over default by upgrade threshold, one column per downgrade
    threshold, one row per config, one line per granularity order (and write
    threshold) -- the layout of the thesis' figures 6.1-6.11. A speedup is a
    round's, over that round's run without tdax; the median is plotted."""
    by = per_round(rows)
    sw = [r for r in rows if r.get("sweep") and r.get("kept", True) and by.get((r["rep"], r["config"], "default"))]
    if not sw:
        return None
    cfgs = sorted({r["config"] for r in sw})
    ds = sorted({r["sweep"]["downgrade_threshold"] for r in sw})
    fig, axes = plt.subplots(len(cfgs), len(ds), figsize=(3.2 * len(ds), 2.6 * len(cfgs)), squeeze=False)
    for i, c in enumerate(cfgs):
        for j, d in enumerate(ds):
            ax = axes[i][j]
            lines = defaultdict(lambda: defaultdict(list))
            for r in sw:
                s = r["sweep"]
                if r["config"] == c and s["downgrade_threshold"] == d:
                    lines[(s["granularity_order"], s["write_threshold"])][s["upgrade_threshold"]].append(
                        r["value"] / by[(r["rep"], c, "default")])
            for (g, f), pts in sorted(lines.items()):
                us = sorted(pts)
                ax.plot(us, [statistics.median(pts[u]) for u in us], "o-",
                        label=f"G={g} F={f}")
            ax.set_title(f"{c}\nD={d}", fontsize=8)
            ax.set_xlabel("upgrade threshold U", fontsize=8)
            if j == 0:
                ax.set_ylabel("speedup over default", fontsize=8)
            ax.legend(fontsize=6)
    fig.tight_layout()
    path = outdir / f"{suite}-sweep.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def fmt(m):
    """median (min..max) of one cell."""
    if not m:
        return "-"
    med, lo, hi, n = m
    return f"{med:,.0f}" + (f" ({lo:,.0f}..{hi:,.0f})" if n > 1 else "")


def ratio_cells(ratios, config, policies):
    """The ratio cells of one sync config: per policy tdax/default, tdax/sync off."""
    cells = []
    for p in policies:
        r = next((r for r in ratios if r["config"] == config and r["policy"] == p), {})
        cells += [fmt_ratio(r, "vs_default", "x"), fmt_ratio(r, "vs_sync_off")]
    return cells


def summary(outdir, suite, cfgs, med, ratios, tax, ctl, policies, meta):
    m, o = meta["machine"], meta["opts"]
    when = f"Run {meta['started']}; " if meta.get("started") else ""
    lines = [f"### {suite}", "", f"Medians (min..max) of {o['repeat']} interleaved rounds; a ratio is each "
             f"round's own, their median (min..max). {when}{m['cpus']} CPUs, kernel {m['kernel']}, "
             "emulated device.", "", control_line(ctl, o.get("retries")), "",
             "| config | without tdax | " + " | ".join(f"tdax {p}" for p in policies) +
             " | sync off | " + " | ".join(f"{p}/default | {p}/sync off" for p in policies) + " |",
             "|---" * (3 + 3 * len(policies)) + "|"]
    for c in cfgs:
        if c.sync:
            lines.append(f"| {c.name} | {fmt(med.get((c.name, 'default')))} | " +
                         " | ".join(fmt(med.get((c.name, p))) for p in policies) +
                         f" | {fmt(med.get((c.ref, 'default')))} | " +
                         " | ".join(ratio_cells(ratios, c.name, policies)) + " |")
    if tax:
        lines += ["", "Tax: the sync-off workloads, without and under tdax.", "",
                  "| config | without tdax | " + " | ".join(f"tdax {p}" for p in policies) + " | " +
                  " | ".join(f"{p}/without" for p in policies) + " |",
                  "|---" * (2 + 2 * len(policies)) + "|"]
        for c in cfgs:
            rs = [r for r in tax if r["config"] == c.name]
            if rs:
                lines.append(f"| {c.name} | {fmt(med.get((c.name, 'default')))} | " +
                             " | ".join(fmt(med.get((c.name, r["policy"]))) for r in rs) + " | " +
                             " | ".join(fmt_ratio(r, "ratio") for r in rs) + " |")
    lines += ["", f"Unit: {cfgs[0].unit}. Plot: ![{suite}]({suite}.png)", ""]
    if suite in REFERENCE:
        lines += ["Reference (shared/SPEC.md §4, the thesis and the TDM paper, on their hardware):", "",
                  "| config | speedup over default | of sync off |", "|---|---|---|"]
        lines += [f"| {c} | {speedup} | {off} |" for c, speedup, off in REFERENCE[suite]]
        lines.append("")
    text = "\n".join(lines)
    (outdir / "summary.md").write_text(text)
    return text
