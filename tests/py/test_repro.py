"""The reductions of what CPython's suites and their reviewers found under
tdax (tests/cpython/repro, README there): each script exits 1 while its bug
is there and 0 once it is fixed, on the product build."""
import subprocess
from pathlib import Path

import pytest

REPRO = Path(__file__).resolve().parents[1] / "cpython" / "repro"
SCRIPTS = sorted(p.name for p in REPRO.glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_reproduction_no_longer_reproduces(script):
    p = subprocess.run(["/usr/bin/python3.11", REPRO / script], cwd=REPRO, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
