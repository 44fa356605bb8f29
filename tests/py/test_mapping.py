"""How device memory is mapped (issue 19 item 8, DaxVM in shared/references):
a region on hugetlbfs is mapped with 2 MiB pages, one page fault per 2 MiB
where tmpfs without huge pages takes one per 4 KiB; `tdax status` says which
pages and what mapping them in cost; such a region keeps every acknowledged
write through a kill and a power cut, as one on tmpfs does.

The hugetlbfs fixture needs root (it reserves huge pages and mounts the file
system); CI runs as root."""
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import TDAX, TDAX_ENV, killed_and_cut, run

HUGE = 2 << 20
PAGES = 64  # 128 MiB: a 64 MiB region and room for the size tests
NR = Path("/proc/sys/vm/nr_hugepages")

# argv: file, count. Appends count 4 KiB blocks, each synced, says "acked"
# when the last sync returned, then waits to be killed.
WRITER = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(int(sys.argv[2])):
    os.write(fd, b"%08d" % i * 512)
    os.fdatasync(fd)
print("acked", flush=True)
time.sleep(600)
"""
BLOCKS = 6000  # 23.4 MiB of records: a dozen huge pages, 6000 small ones


def expected(n):
    return b"".join(b"%08d" % i * 512 for i in range(n))


@pytest.fixture(scope="module")
def hugetlbfs():
    """A hugetlbfs mount with PAGES huge pages of 2 MiB reserved for it;
    the reservation and the mount are undone afterwards."""
    assert os.geteuid() == 0, "reserving huge pages and mounting hugetlbfs needs root"
    before = int(NR.read_text())
    NR.write_text(str(before + PAGES))
    mnt = tempfile.mkdtemp(prefix="tdax-huge-", dir="/var/tmp")
    try:
        got = int(NR.read_text()) - before
        assert got == PAGES, f"the kernel reserved {got} of {PAGES} huge pages (memory fragmented?)"
        run("mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "none", mnt, check=0)
        yield Path(mnt)
        run("umount", mnt, check=0)
    finally:
        NR.write_text(str(before))
        os.rmdir(mnt)


@pytest.fixture
def hugedev(hugetlbfs):
    path = hugetlbfs / "dev"
    run(TDAX, "device", "create", "--device", path, "--size", "64M", check=0)
    yield str(path)
    path.unlink(missing_ok=True)


def status(dev):
    return json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)


def write_and_kill(dev, f, mode):
    p = subprocess.Popen([str(TDAX), "run", "--device", dev, "--mode", mode, "--policy", "always", "--",
                          "python3", "-c", WRITER, str(f), str(BLOCKS)],
                         env={**os.environ, **TDAX_ENV, "TDAX_TEST_DURABLE_SHADOW": "0"},
                         stdout=subprocess.PIPE, text=True, start_new_session=True)
    line = p.stdout.readline()
    assert line == "acked\n", line
    assert f.read_bytes() == expected(BLOCKS), "the writer did not write what it says"
    return p


def test_a_hugetlbfs_region_is_mapped_in_with_one_fault_per_2_mib(hugedev, dev, diskdir):
    """The same writer on a hugetlbfs region and on a tmpfs one: status
    names the pages, and the faults per byte mapped show them."""
    thp = Path("/sys/kernel/mm/transparent_hugepage/shmem_enabled").read_text()
    for region, small in ((hugedev, False), (dev, "[never]" in thp or "[deny]" in thp)):
        f = diskdir / f"f-{small}"
        p = write_and_kill(region, f, "coherent")
        p.kill()
        p.wait()
        s = status(region)
        faults, mapped = s["counters"]["map_faults"], s["counters"]["map_bytes"]
        assert mapped >= BLOCKS * 4096, f"only {mapped} bytes counted as mapped in for {BLOCKS * 4096} logged"
        if small:
            assert s["page_size"] == 4096 and "tmpfs" in s["pages"], s
            assert faults >= 0.9 * mapped / 4096, f"{faults} faults for {mapped} bytes of 4 KiB pages"
        else:
            assert s["page_size"] == HUGE, s
            # the region's header and tables, then one per huge page of log
            assert 0 < faults <= mapped / HUGE + 8, f"{faults} faults for {mapped} bytes of 2 MiB pages"
        text = run(TDAX, "status", "--device", region, check=0).stdout
        assert f"mapping: {s['page_size'] // 1024} KiB pages" in text, text
        assert f"{faults} page faults mapped" in text, text
        metrics = run(TDAX, "metrics", "--device", region, check=0).stdout
        assert f'tdax_device_page_size_bytes{{device="{region}"}} {s["page_size"]}' in metrics, metrics
        assert f'tdax_map_faults_total{{device="{region}"}} {faults}' in metrics, metrics


@pytest.mark.parametrize("mode", ["coherent", "bypass"])
def test_a_hugetlbfs_region_keeps_every_acknowledged_write_through_a_kill_and_a_power_cut(
        hugedev, voldisk, mode):
    f = voldisk.mnt / "f"
    p = write_and_kill(hugedev, f, mode)
    assert status(hugedev)["counters"]["light_syncs"] >= BLOCKS - 2, "the syncs were not lightweight"
    killed_and_cut(p, hugedev, voldisk)
    assert f.read_bytes() == expected(BLOCKS), f"acknowledged blocks lost ({mode})"


def test_a_hugetlbfs_region_takes_whole_huge_pages_and_says_when_there_are_too_few(hugetlbfs):
    path = hugetlbfs / "odd"
    try:
        run(TDAX, "device", "create", "--device", path, "--size", "9M", check=0)
        assert path.stat().st_size == 10 << 20
        assert json.loads(run(TDAX, "device", "info", "--device", path, "--json", check=0).stdout)["capacity"] \
            == 10 << 20
    finally:
        path.unlink(missing_ok=True)
    free = int(Path("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages").read_text())
    r = run(TDAX, "device", "create", "--device", hugetlbfs / "big", "--size", f"{(free + 1) * 2}M", check=1)
    assert "too few free huge pages" in r.stderr and f"({free} free" in r.stderr, r.stderr
    assert "vm.nr_hugepages" in r.stderr, r.stderr
    assert not (hugetlbfs / "big").exists(), "a failed create left its file behind"


# argv: file. One small record, synced; then waits to be killed.
ONE_RECORD = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.write(fd, b"r" * 128)
os.fdatasync(fd)
print("acked", flush=True)
time.sleep(600)
"""


def test_a_claimed_segment_is_mapped_in_by_the_write_back_thread(dev, diskdir):
    """The writer maps 64 KiB ahead of its tail (log.c); the rest of the
    segment it claimed is the write-back thread's to map, off the writer's
    path: with one record written, the whole segment is mapped all the same."""
    seg = json.loads(run(TDAX, "device", "info", "--device", dev, "--json", check=0).stdout)["segment_size"]
    # What attaching alone maps (the header and tables): a process that syncs
    # a file under policy never logs nothing.
    run(TDAX, "run", "--device", dev, "--policy", "never", "--", "python3", "-c", ONE_RECORD.replace(
        "time.sleep(600)", ""), str(diskdir / "attach"), env={**os.environ, **TDAX_ENV}, check=0)
    base = status(dev)["counters"]["map_bytes"]
    p = subprocess.Popen([str(TDAX), "run", "--device", dev, "--policy", "always", "--", "python3", "-c",
                          ONE_RECORD, str(diskdir / "f")], env={**os.environ, **TDAX_ENV},
                         stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert p.stdout.readline() == "acked\n"
        for _ in range(100):  # (the mapping and the counters come with the thread's pass)
            c = status(dev)["counters"]
            mapped = c["map_bytes"] - 2 * base
            if mapped >= seg and c["logged_writes"]:
                break
            time.sleep(0.05)
        assert c["logged_writes"] == 1, c
        assert mapped == seg, f"{mapped} bytes of a {seg}-byte segment mapped in"
    finally:
        os.killpg(p.pid, 9)
        p.wait()
