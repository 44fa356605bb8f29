"""page_size -- what the pages device memory is mapped with cost (issue #19
item 8, DaxVM in shared/references), measured side by side in one run: the
same workloads on a region on tmpfs (4 KiB pages where transparent huge
pages are off, Debian's default) and on one on hugetlbfs (2 MiB pages):

  * a 128 B append + fdatasync loop in bypass mode (every write a copy into
    device memory) and in coherent mode (a write, then a log copy);
  * 4 KiB random reads of a promoted file whose blocks are all in device
    memory (bypass mode serves them from its records).

Each run gets a fresh region, so it maps its memory in from nothing: the
page faults per run come from `tdax status` (map_faults). Configurations
run interleaved, medians are printed with the ratio hugetlbfs / tmpfs.
Needs root (it reserves huge pages and mounts hugetlbfs, and gives both
back at the end).

usage: page_size.py [--repeat N] [--count N] [--reads N]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tdaxbench.compare import ROOT, TDAX, fresh_device, measure, report  # noqa: E402

APPEND = str(ROOT / "build" / "bin" / "tdax-appendloop")
NR = Path("/proc/sys/vm/nr_hugepages")
SIZE = "64M"
PAGES = 40  # a 64 MiB region and spare


def faults(device):
    c = json.loads(subprocess.run([str(TDAX), "status", "--device", device, "--json"], check=True,
                                  capture_output=True, text=True).stdout)["counters"]
    return c["map_faults"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--count", type=int, default=200000, help="appends per run")
    ap.add_argument("--blocks", type=int, default=1000, help="4 KiB blocks written for the read test")
    ap.add_argument("--reads", type=int, default=200000, help="random reads per run")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("page_size.py: needs root, to reserve huge pages (vm.nr_hugepages) and mount hugetlbfs")
    before = int(NR.read_text())
    NR.write_text(str(before + PAGES))
    mnt = tempfile.mkdtemp(prefix="tdax-bench-huge-", dir="/var/tmp")
    regions = {"tmpfs": f"/dev/shm/tdax-bench-pages-{os.getpid()}", "hugetlbfs": f"{mnt}/region"}
    seen = {}  # (workload, region) -> page faults per run
    try:
        if int(NR.read_text()) - before < PAGES:
            sys.exit("page_size.py: the kernel could not reserve the huge pages (memory fragmented?)")
        subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "none", mnt], check=True)

        def config(work, region, mode, extra):
            def argv(d):
                fresh_device(regions[region], SIZE)
                return [str(TDAX), "run", "--device", regions[region], "--mode", mode, "--policy", "always",
                        "--quiet", "--", APPEND, os.path.join(d, "f")] + extra
            return (region, argv)

        def after(work, region):
            seen.setdefault((work, region), []).append(faults(regions[region]))

        works = {"bypass 128 B append+fdatasync": ("bypass", ["--count", str(a.count)], "ops_per_s"),
                 "coherent 128 B append+fdatasync": ("coherent", ["--count", str(a.count)], "ops_per_s"),
                 f"bypass 4 KiB random reads of {a.blocks} blocks": ("bypass", ["--size", "4096",
                                                                            "--count", str(a.blocks),
                                                                            "--reads", str(a.reads)],
                                                                           "reads_per_s")}
        for work, (mode, extra, key) in works.items():
            rates = {}
            for _ in range(a.repeat):
                for region in regions:
                    name, argv = config(work, region, mode, extra)
                    rates.setdefault(name, []).extend(measure([(name, argv)], 1, key)[name])
                    after(work, region)
            unit = "reads/s" if key == "reads_per_s" else "ops/s"
            report(f"{work}, {unit}", rates, unit, "hugetlbfs", ["tmpfs"])
            print("  page faults mapping the region in, per run (medians): " +
                  ", ".join(f"{r} {statistics.median(seen[(work, r)]):,.0f}" for r in regions))
    finally:
        for r in regions.values():
            if os.path.exists(r):
                os.unlink(r)
        subprocess.run(["umount", mnt], capture_output=True)
        NR.write_text(str(before))
        os.rmdir(mnt)


if __name__ == "__main__":
    main()
