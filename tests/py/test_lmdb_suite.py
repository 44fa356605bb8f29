"""py-lmdb's own test suite (a test we did not write: environments opened,
copied, resized and closed, cursors, transactions, readers -- LMDB maps its
data file and writes it with pwrite) without tdax, then under tdax in
coherent mode and in bypass mode: every test that passes without tdax
passes under it. The suite is the sdist of the version Debian's
python3-lmdb is, fetched by scripts/deps.sh."""
import re
import subprocess

import pytest

from conftest import TDAX, TDAX_ENV, info

from pathlib import Path

SUITE = Path(__file__).resolve().parents[2] / "build" / "py-lmdb-1.4.0" / "tests"
# Counts page faults to prove values are prefaulted: the page cache's
# state decides it (it fails here without tdax too).
ENVIRONMENTAL = {"test_preload (cursor_test.PreloadTest.test_preload)"}


def outcome(prefix, tmp):
    tmp.mkdir()
    p = subprocess.run(prefix + ["/usr/bin/python3", "-m", "unittest", "discover", "-s", str(SUITE),
                                 "-p", "*_test.py"],
                       cwd=SUITE, capture_output=True, text=True, timeout=600,
                       env={**TDAX_ENV, "PATH": "/usr/bin:/bin", "TMPDIR": str(tmp)})
    ran = re.search(r"^Ran (\d+) tests", p.stderr, re.M)
    assert ran, p.stderr[-2000:]
    bad = set(re.findall(r"^(?:FAIL|ERROR): (.+)$", p.stderr, re.M)) - ENVIRONMENTAL
    return int(ran.group(1)), bad, p.stderr


@pytest.mark.parametrize("mode", ["coherent", "bypass"])
def test_py_lmdb_suite_passes_under_tdax_as_without(dev, diskdir, mode):
    ran0, bad0, _ = outcome([], diskdir / "without")
    ran, bad, err = outcome([TDAX, "run", "--device", dev, "--policy", "always", "--mode", mode, "--"],
                            diskdir / "under")
    assert ran == ran0 >= 150, (ran, ran0)
    assert bad <= bad0, (sorted(bad - bad0), err[-3000:])
    c = info(dev)["counters"]
    assert c["light_syncs"] >= 100, c  # tdax answered its commits' syncs
