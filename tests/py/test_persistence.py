"""An emulated region made as GPF memory (`tdax device create --persistence
gpf`: the CPU caches in the persistence domain, as with CXL's Global
Persistent Flush or eADR) persists with fences alone; everything else --
records, lightweight syncs, recovery -- is what it is on ADR memory."""
import json

import pytest

from conftest import PY, TDAX, TDAX_ENV, info, power_cut, run

# 300 synced 100-byte records, in coherent mode (pwrite at offsets) and, in
# bypass mode, into a promoted file; then an exit, or a SIGKILL before any
# write-back.
WRITER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
for i in range(300):
    os.pwrite(fd, b"%099d\n" % i, 100 * i)
    os.fdatasync(fd)
print("acknowledged", flush=True)
if sys.argv[2] == "kill":
    os.kill(os.getpid(), 9)
"""
EXPECTED = b"".join(b"%099d\n" % i for i in range(300))


def test_create_says_how_the_region_persists(device):
    run(TDAX, "device", "create", "--device", device, "--size", "64M", "--persistence", "gpf", check=0)
    d = info(device)
    assert d["emulated_persistence"] == "gpf" and "GPF" in d["persistence"], d
    assert "not real power loss" in d["persistence"], d
    assert "GPF" in run(TDAX, "device", "info", "--device", device, check=0).stdout


def test_the_default_is_adr(device):
    run(TDAX, "device", "create", "--device", device, "--size", "64M", check=0)
    d = info(device)
    assert d["emulated_persistence"] == "adr" and "ADR" in d["persistence"], d


@pytest.mark.parametrize("args, says", [
    (["--persistence", "eadr"], "unknown --persistence 'eadr' (adr, gpf)"),
    (["--persistence", "gpf", "--backend", "fsdax"], "are for the emulated backend"),
])
def test_a_wrong_persistence_is_refused_before_anything_is_made(device, args, says):
    p = run(TDAX, "device", "create", "--device", device, "--size", "64M", *args)
    assert p.returncode == 2 and says in p.stderr, p.stderr
    assert not __import__("os").path.exists(device)


@pytest.mark.parametrize("mode", ["coherent", "bypass"])
def test_acknowledged_records_survive_a_kill_and_a_power_cut(device, diskdir, mode):
    run(TDAX, "device", "create", "--device", device, "--size", "64M", "--persistence", "gpf", check=0)
    def written(f, end):
        p = run(TDAX, "run", "--device", device, "--policy", "always", "--mode", mode, "--", PY, "-c", WRITER,
                f, end, env=TDAX_ENV)
        assert "acknowledged" in p.stdout and p.returncode == (-9 if end == "kill" else 0), p.stderr
    written(diskdir / "e", "exit")
    c = info(device)["counters"]
    assert c["light_syncs"] >= 290, c  # answered from the device, not by the kernel
    f = diskdir / "f"
    written(f, "kill")
    rep = power_cut(device, f)
    assert f.read_bytes() == EXPECTED, rep
