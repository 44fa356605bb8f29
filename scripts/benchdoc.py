"""benchdoc -- write docs/benchmarks.md from the latest `tdax bench all` run
(results/latest.txt names its result directories): the summaries and plots
are rendered again from each run's raw results.json, and the plots copied to
docs/bench/."""
import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from tdaxbench import report  # noqa: E402
from tdaxbench.suites import SUITES  # noqa: E402


def rerender(d):
    meta = json.loads((d / "results.json").read_text())
    opts = argparse.Namespace(**meta["opts"])
    names = {r["config"] for r in meta["rows"]}
    cfgs = [c for c in SUITES[meta["suite"]](opts) if c.name in names]
    report.render(d, meta["suite"], cfgs, meta["rows"], opts.policies, meta)


def main():
    dirs = [Path(p) for p in (ROOT / "results" / "latest.txt").read_text().split()]
    docs = ROOT / "docs" / "bench"
    docs.mkdir(parents=True, exist_ok=True)
    meta = json.loads((dirs[0] / "results.json").read_text())
    m = meta["machine"]
    parts = ["# Benchmarks", "",
             "Written by `make bench` (`tdax bench all --quick`, then this page). Every number is a "
             "median of interleaved runs made side by side in one run on this machine: "
             f"{m['cpus']} CPUs ({m['cpu']}), kernel {m['kernel']}, the emulated device on /dev/shm, "
             "files on the disk (ext4 on virtio). Versions: " +
             ", ".join(f"{k} {v}" for k, v in m.items() if k not in ("host", "kernel", "cpus", "cpu")) + ".",
             "", "The quick runs are short and this 2-core VM is noisy: read ratios, not absolute "
             "numbers; `tdax bench SUITE --repeat 5` (without --quick) for longer runs. Our bar "
             "(shared/SPEC.md §4) is tdax at >= 0.9 of the same workload with syncing off.", ""]
    for d in dirs:
        rerender(d)
        text = (d / "summary.md").read_text()
        for png in d.glob("*.png"):
            shutil.copy(png, docs / png.name)
            text = text.replace(f"({png.name})", f"(bench/{png.name})")
        parts += [text, ""]
    (ROOT / "docs" / "benchmarks.md").write_text("\n".join(parts))
    print("wrote docs/benchmarks.md")


if __name__ == "__main__":
    main()
