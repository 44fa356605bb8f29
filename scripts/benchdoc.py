"""benchdoc -- write docs/benchmarks.md from one `tdax bench all` run
(results/latest.txt names its result directories): the summaries and plots
are rendered again from each suite's raw results.json, the plots copied to
docs/bench/ (whatever plots were there before are removed), and the page
states the machine, the date of the run, its rounds, the noise threshold,
each suite's control pair and its noisy rounds. Every measured figure on
the page comes from that run."""
import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from tdaxbench import report  # noqa: E402
from tdaxbench.suites import SUITES  # noqa: E402


def rerender(d):
    """The suite's results (results.json) and its rendered control pair
    and summary."""
    meta = json.loads((d / "results.json").read_text())
    opts = argparse.Namespace(**meta["opts"])
    names = {r["config"] for r in meta["rows"]}
    cfgs = [c for c in SUITES[meta["suite"]](opts) if c.name in names]
    _, _, ctl, text = report.render(d, meta["suite"], cfgs, meta["rows"], opts.policies, meta)
    return meta, ctl, text


def span(d, meta):
    """When a suite's run began and ended, as recorded; results of an older
    tdax bench have only a beginning, in their directory's name
    (SUITE-YYYYmmdd-HHMMSS, local time)."""
    if meta.get("started"):
        return meta["started"], meta["finished"]
    stamp = time.strptime("-".join(d.name.rsplit("-", 2)[1:]), "%Y%m%d-%H%M%S")
    return time.strftime("%Y-%m-%d %H:%M:%S (local time)", stamp), None


def header(dirs, metas):
    m, o = metas[0]["machine"], metas[0]["opts"]
    spans = [span(d, meta) for d, meta in zip(dirs, metas)]
    first, last = min(s[0] for s in spans), max((s[1] for s in spans if s[1]), default=None)
    versions = ", ".join(f"{k} {v}" for k, v in m.items()
                         if k not in ("host", "kernel", "cpus", "cpu", "scratch"))
    rounds = {x["opts"]["repeat"] for x in metas}
    return ["# Benchmarks", "",
            "Written by `make bench` (`tdax bench all --quick`, then `scripts/benchdoc.py`): every "
            "measured figure on this page comes from that one run (the reference tables quote the thesis "
            "and the TDM paper).", "",
            f"- Run: {first}" + (f" to {last}." if last else "."),
            f"- Machine: {m['cpus']} CPUs ({m['cpu']}), kernel {m['kernel']}; the emulated device on "
            f"/dev/shm, the workloads' files on {m.get('scratch', 'the disk')}.",
            f"- Rounds: {' / '.join(map(str, sorted(rounds)))} per suite"
            + (" (--quick: short runs)" if o.get("quick") else "") + ", interleaved: each round runs "
            "every configuration once, side by side (its modes the other way round every other round). "
            "A ratio is taken within a round; the tables give "
            "the median (min..max) of the rounds'.",
            "- Noise: the suite's first configuration without tdax runs again "
            "at each round's end; a round whose control pair differs by more than "
            f"{o['noise']:g} % runs again, up to {o['retries']} times, and is kept, marked noisy, if it "
            "still does." if "noise" in o else "- Noise: this run had no control pair (an older tdax bench).",
            f"- Versions: {versions}.", "",
            "Our bar (shared/SPEC.md §4) is tdax at >= 0.9 of the same workload with syncing off. "
            "Short runs on a shared machine are noisy: read ratios, not absolute numbers, and their "
            "spread; `tdax bench SUITE` without --quick runs longer.", ""]


def control_table(metas, ctls):
    lines = ["| suite | control (without tdax) | last/first, median (min..max) | rounds run again | "
             "noisy rounds kept |", "|---|---|---|---|---|"]
    for meta, c in zip(metas, ctls):
        if not c:
            lines.append(f"| {meta['suite']} | - | not recorded | - | - |")
            continue
        noisy = ", ".join(f"round {i + 1} ({c['ratios'][i]:.2f})" for i in c["noisy"]) or "none"
        lines.append(f"| {meta['suite']} | {c['config']} | {c['median']:.2f} ({c['min']:.2f}..{c['max']:.2f}) "
                     f"| {c['repeated']} | {noisy} |")
    return ["### The control pair of each suite", ""] + lines + [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", type=Path, default=ROOT / "results" / "latest.txt",
                    help="the run's result directories, one a line (default results/latest.txt)")
    ap.add_argument("--page", type=Path, default=ROOT / "docs" / "benchmarks.md",
                    help="the page; its plots go to bench/ beside it (default docs/benchmarks.md)")
    a = ap.parse_args()
    dirs = [Path(p) for p in a.list.read_text().split()]
    plots = a.page.parent / "bench"
    plots.mkdir(parents=True, exist_ok=True)
    for old in plots.glob("*.png"):
        old.unlink()  # a plot no longer made by the run must not stay
    metas, ctls, texts = [], [], []
    for d in dirs:
        meta, ctl, text = rerender(d)
        for png in sorted(d.glob("*.png")):
            if f"({png.name})" in text:
                shutil.copy(png, plots / png.name)
                text = text.replace(f"({png.name})", f"(bench/{png.name})")
        metas.append(meta), ctls.append(ctl), texts.append(text)
    parts = header(dirs, metas) + control_table(metas, ctls)
    for text in texts:
        parts += [text, ""]
    a.page.write_text("\n".join(parts))
    print(f"wrote {a.page}")


if __name__ == "__main__":
    main()
