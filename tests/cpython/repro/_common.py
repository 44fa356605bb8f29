"""Shared by the reproductions: a fresh device region, a scratch directory
on the disk, and `tdax run` of a Python snippet with /usr/bin/python3.11.
Each reproduction exits 1 while the bug is there, 0 once it is fixed;
with REPRO_WITHOUT_TDAX=1 it runs the same code without tdax (the control:
it must say ok)."""
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(os.environ.get("REPRO_ROOT", Path(__file__).resolve().parents[3]))
TDAX = str(ROOT / "build" / "bin" / "tdax")
PY = "/usr/bin/python3.11"


class Scratch:
    def __enter__(self):
        self.device = f"/dev/shm/tdax-cpy-repro-{uuid.uuid4().hex[:8]}"
        subprocess.run([TDAX, "device", "create", "--device", self.device, "--size", "64M"],
                       check=True, capture_output=True)
        self.dir = Path(tempfile.mkdtemp(prefix="tdax-cpy-repro-", dir="/var/tmp"))
        return self

    def run(self, code, *args, policy="always", tdax=True, **kw):
        cmd = [PY, "-c", code] + [str(a) for a in args]
        if tdax and os.environ.get("REPRO_WITHOUT_TDAX") != "1":
            cmd = [TDAX, "run", "--device", self.device, "--policy", policy, "--quiet", "--"] + cmd
        env = dict(os.environ, TMPDIR=str(self.dir))
        kw.setdefault("stdin", subprocess.DEVNULL)
        if "stdout" not in kw and "stderr" not in kw:
            kw["capture_output"] = True
        return subprocess.run(cmd, cwd=self.dir, env=env, timeout=60, **kw)

    def __exit__(self, *exc):
        if os.path.exists(self.device):
            os.unlink(self.device)
        shutil.rmtree(self.dir, ignore_errors=True)


def verdict(bug, what):
    print(("BUG: " if bug else "ok: ") + what)
    sys.exit(1 if bug else 0)
