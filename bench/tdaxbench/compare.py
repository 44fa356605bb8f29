"""compare -- run workloads side by side and report medians and ratios.

Each configuration is a command line printing one JSON line with a rate
field. Configurations run interleaved (A B C A B C ...) `repeat` times, so
that machine noise hits all of them alike; the median of each is reported,
with the ratios of the first against the others. Used by `make demo`
(scripts/demo.py) and the benchmarks bench/runtime_bench.py and
bench/policy_bench.py.
"""
import json
import shutil
import statistics
import subprocess
import tempfile

from .env import ROOT, TDAX, fresh_device, tdax_prefix

__all__ = ["PY", "ROOT", "TDAX", "fresh_device", "measure", "report", "under_tdax"]

PY = str(ROOT / "build" / "venv" / "bin" / "python")


def under_tdax(argv, device, policy="thesis"):
    """argv under `tdax run` with a column of env.COLUMNS (a policy, or bypass)."""
    return tdax_prefix(policy, device) + argv


def measure(configs, repeat, rate_key, workdir_prefix="tdax-bench-"):
    """configs: list of (name, function(workdir) -> argv). Returns
    {name: [rates]}. Each run gets a fresh directory on the disk."""
    rates = {name: [] for name, _ in configs}
    for _ in range(repeat):
        for name, make_argv in configs:
            d = tempfile.mkdtemp(prefix=workdir_prefix, dir="/var/tmp")
            try:
                out = subprocess.run(make_argv(d), capture_output=True, text=True, check=True,
                                     timeout=600).stdout
                rates[name].append(json.loads(out.strip().splitlines()[-1])[rate_key])
            finally:
                shutil.rmtree(d, ignore_errors=True)
    return rates


def report(title, rates, unit, base, others):
    """Print medians and the ratios base/other for each other."""
    print(f"\n{title}")
    width = max(len(n) for n in rates)
    for name, v in rates.items():
        spread = f"{min(v):,.0f}..{max(v):,.0f}" if len(v) > 1 else ""
        print(f"  {name:<{width}}  {statistics.median(v):>12,.0f} {unit}  (runs: {spread})")
    med = {n: statistics.median(v) for n, v in rates.items()}
    for o in others:
        print(f"  {base} / {o}: {med[base] / med[o]:.2f}x")
    return med
