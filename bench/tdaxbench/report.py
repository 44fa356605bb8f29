"""report -- medians, ratios, CSV/JSON, plots and the Markdown summary of a
`tdax bench` run."""
import csv
import json
import statistics
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .suites import REFERENCE  # noqa: E402


def medians(rows):
    """{(config, mode): (median, min, max, n)} over the non-sweep rows."""
    by = defaultdict(list)
    for r in rows:
        if not r.get("sweep"):
            by[(r["config"], r["mode"])].append(r["value"])
    return {k: (statistics.median(v), min(v), max(v), len(v)) for k, v in by.items()}


def ratio_rows(cfgs, med, policies):
    """Per sync config and policy: tdax/default and tdax/sync-off."""
    out = []
    for c in cfgs:
        if not c.sync or (c.name, "default") not in med:
            continue
        base = med[(c.name, "default")][0]
        off = med.get((c.ref, "default"), (None,))[0]
        for p in policies:
            if (c.name, p) in med:
                v = med[(c.name, p)][0]
                out.append({"config": c.name, "policy": p, "default": base, "tdax": v, "sync_off": off,
                            "vs_default": v / base if base else None,
                            "vs_sync_off": v / off if off else None})
    return out


def tax_rows(cfgs, med, policies):
    """Per sync-off config and policy: under tdax / without tdax -- what
    tdax costs a workload it cannot speed up (issue 17: >= 0.97)."""
    out = []
    for c in cfgs:
        if c.sync or (c.name, "default") not in med:
            continue
        base = med[(c.name, "default")][0]
        for p in policies:
            if (c.name, p) in med:
                v = med[(c.name, p)][0]
                out.append({"config": c.name, "policy": p, "default": base, "tdax": v,
                            "ratio": v / base if base else None})
    return out


def render(outdir, suite, cfgs, rows, policies, meta):
    """Everything a run leaves besides the raw data: plots and summary."""
    med = medians(rows)
    ratios = ratio_rows(cfgs, med, policies)
    plot_suite(outdir, suite, cfgs, med, ratios, policies)
    plot_sweep(outdir, suite, rows, med)
    return ratios, summary(outdir, suite, cfgs, med, ratios, policies, meta)


def write_raw(outdir, rows, meta):
    with open(outdir / "raw.csv", "w", newline="") as f:
        keys = ["suite", "config", "mode", "rep", "value", "unit", "sweep"]
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
        rs = [r for r in ratios if r["policy"] == p]
        a2.plot([r["config"] for r in rs], [r["vs_sync_off"] or 0 for r in rs], "o-", label=f"{p} / sync off")
    a2.axhline(0.9, color="grey", ls="--", lw=1, label="bar: 0.9 of sync off")
    a2.set_ylim(0, max(1.2, max([r["vs_sync_off"] or 0 for r in ratios] + [0])))
    a2.tick_params(axis="x", rotation=30, labelsize=8)
    for lbl in a2.get_xticklabels():
        lbl.set_ha("right")
    a2.set_title("tdax relative to syncing off")
    a2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(outdir / f"{suite}.png", dpi=110)
    plt.close(fig)


def plot_sweep(outdir, suite, rows, med):
    """Speedup over default by upgrade threshold, one column per downgrade
    threshold, one row per config, one line per granularity order (and write
    threshold) -- the layout of the thesis' figures 6.1-6.11."""
    sw = [r for r in rows if r.get("sweep")]
    if not sw:
        return None
    cfgs = sorted({r["config"] for r in sw})
    ds = sorted({r["sweep"]["downgrade_threshold"] for r in sw})
    fig, axes = plt.subplots(len(cfgs), len(ds), figsize=(3.2 * len(ds), 2.6 * len(cfgs)), squeeze=False)
    for i, c in enumerate(cfgs):
        base = med.get((c, "default"), (None,))[0]
        for j, d in enumerate(ds):
            ax = axes[i][j]
            lines = defaultdict(lambda: defaultdict(list))
            for r in sw:
                s = r["sweep"]
                if r["config"] == c and s["downgrade_threshold"] == d:
                    lines[(s["granularity_order"], s["write_threshold"])][s["upgrade_threshold"]].append(r["value"])
            for (g, f), pts in sorted(lines.items()):
                us = sorted(pts)
                ax.plot(us, [statistics.median(pts[u]) / base if base else 0 for u in us], "o-",
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


def summary(outdir, suite, cfgs, med, ratios, policies, meta):
    lines = [f"### {suite}", "", f"Medians (min..max) of {meta['opts']['repeat']} interleaved runs; "
             f"{meta['machine']['cpus']} CPUs, kernel {meta['machine']['kernel']}, emulated device.", "",
             "| config | without tdax | " + " | ".join(f"tdax {p}" for p in policies) +
             " | sync off | " + " | ".join(f"{p}/default | {p}/sync off" for p in policies) + " |",
             "|---" * (3 + 3 * len(policies)) + "|"]
    for c in cfgs:
        if not c.sync:
            continue
        d = med.get((c.name, "default"), (0,))[0]
        off = med.get((c.ref, "default"), (0,))[0]
        cells = [fmt(med.get((c.name, p))) for p in policies]
        rat = []
        for p in policies:
            v = med.get((c.name, p), (0,))[0]
            rat += [f"{v / d:.2f}x" if d else "-", f"{v / off:.2f}" if off else "-"]
        lines.append(f"| {c.name} | {fmt(med.get((c.name, 'default')))} | " + " | ".join(cells) +
                     f" | {fmt(med.get((c.ref, 'default')))} | " + " | ".join(rat) + " |")
    tax = tax_rows(cfgs, med, policies)
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
                             " | ".join(f"{r['ratio']:.2f}" for r in rs) + " |")
    lines += ["", f"Unit: {cfgs[0].unit}. Plot: ![{suite}]({suite}.png)", ""]
    if suite in REFERENCE:
        lines += ["Reference (shared/SPEC.md §4, the thesis and the TDM paper, on their hardware):", "",
                  "| config | speedup over default | of sync off |", "|---|---|---|"]
        lines += [f"| {c} | {s} | {o} |" for c, s, o in REFERENCE[suite]]
        lines.append("")
    text = "\n".join(lines)
    (outdir / "summary.md").write_text(text)
    return text
