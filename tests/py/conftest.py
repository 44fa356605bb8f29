"""Shared fixtures: paths of the built binaries, scratch devices and files."""
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
TDAX = BUILD / "bin" / "tdax"
LOGWRITER = BUILD / "tests" / "logwriter"


def run(*args, check=None, env=None, user=None, **kw):
    """Run a command, capture text output; check=N asserts the exit status."""
    cmd = [str(a) for a in args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] + cmd
    full_env = dict(os.environ)
    full_env.pop("TDAX_DEVICE", None)
    full_env.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=120, **kw)
    if check is not None:
        assert p.returncode == check, f"{cmd} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


@pytest.fixture
def device():
    """A fresh path for a device region on /dev/shm (removed afterwards)."""
    path = f"/dev/shm/tdax-pytest-{uuid.uuid4().hex[:12]}"
    yield path
    if os.path.exists(path):
        os.unlink(path)


@pytest.fixture
def diskdir():
    """A scratch directory on the disk (not tmpfs), world-traversable."""
    d = tempfile.mkdtemp(prefix="tdax-pytest-", dir="/var/tmp")
    os.chmod(d, 0o755)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)
