"""stress-ng's file stressors (another project's tests: random and
sequential writes and reads with its own verification, invalid-argument
calls, synchronous I/O, hole punching, copies, locks) under tdax, in
coherent and bypass mode under --policy always: each must end as it ends
without tdax. Its hdd stressor found a pwritev2 at offset -2 that tdax made
at the file position (test_refused_calls.py)."""
import shutil

import pytest

from conftest import TDAX, run

STRESSORS = [
    ("hdd", ["--hdd-opts", "wr-rnd,rd-rnd,fsync,iovec", "--hdd-bytes", "8M", "--hdd-write-size", "4k"]),
        ("hdd", ["--hdd-opts", "wr-rnd,rd-seq,fdatasync,direct", "--hdd-bytes", "8M", "--hdd-write-size", "4k"]),
    ("iomix", []), ("sync-file", []), ("fpunch", []), ("copy-file", []),
]


def stress(prefix, name, opts, tmp, env=None):
    for old in tmp.iterdir():
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    p = run(*prefix, "stress-ng", f"--{name}", "2", *opts, "--timeout", "2", "--verify",
            "--temp-path", tmp, env=env, check=None)
    failed = [line for line in (p.stdout + p.stderr).splitlines()
              if " fail: " in line or "incorrect" in line or "error:" in line]
    return p.returncode, failed


# How each stressor ends without tdax: run once, for both modes.
WITHOUT = {}


@pytest.mark.parametrize("mode", ["coherent", "bypass"])
@pytest.mark.parametrize("name,opts", STRESSORS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(STRESSORS)])
def test_a_stress_ng_stressor_ends_as_without_tdax(dev, diskdir, mode, name, opts):
    assert shutil.which("stress-ng"), "stress-ng is missing: make deps installs it"
    key = (name, tuple(opts))
    if key not in WITHOUT:
        WITHOUT[key] = stress([], name, opts, diskdir, env={"LD_PRELOAD": ""})
    want = WITHOUT[key]
    assert want == (0, []), f"stress-ng {name} fails without tdax here: {want}"
    got = stress([TDAX, "run", "--device", dev, "--mode", mode, "--policy", "always", "--"], name, opts,
                 diskdir, env={"TDAX_QUIET": "1"})  # (no durable shadows: they would be files of its)
    assert got == want
