"""The device region changes under a running application (issue 15): it is
removed (`rm`, systemd-logind's RemoveIPC, tmpfs cleaners) or truncated.
The application must not get a signal, and no sync may be acknowledged
from a region no recovery will find: on a real power cut of ext4 on a
volatile disk, everything acknowledged is there."""
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import PY, TDAX, TDAX_ENV

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "crash"))
import crashtest  # noqa: E402

APP = r"""
import os, sys, time
path, go = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.fsync(fd)
dfd = os.open(os.path.dirname(path), os.O_RDONLY); os.fsync(dfd)
for i in range(100):
    os.write(fd, b"before %04d\n" % i); os.fdatasync(fd)
print("written", flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
time.sleep(0.2)  # a write-back pass or two
for i in range(100):
    os.write(fd, b"after %04d\n" % i); os.fdatasync(fd)
print("acked", flush=True)
time.sleep(60)
"""


def run_case(dev, tmp_path, damage):
    os.chmod(tmp_path, 0o755)
    disk = crashtest.Disk(tmp_path, "lose-all", 1)
    p = None
    try:
        path, go = disk.mnt / "log", tmp_path / "go"
        env = dict(os.environ, **{**TDAX_ENV, "TDAX_QUIET": "0"})
        p = subprocess.Popen([TDAX, "run", "--device", dev, "--policy", "always", "--", PY, "-c", APP,
                              path, go], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, start_new_session=True)
        assert p.stdout.readline().strip() == "written"
        damage(dev)
        go.write_bytes(b"")
        line = p.stdout.readline().strip()
        assert line == "acked", "the application died: " + p.stderr.read()
        crashtest.kill_tree([p])
        err = p.stderr.read()
        p = None
        disk.cut()
        disk.reboot()
        want = b"".join(b"before %04d\n" % i for i in range(100)) + \
            b"".join(b"after %04d\n" % i for i in range(100))
        assert path.read_bytes()[:len(want)] == want, "acknowledged data lost"
        return err
    finally:
        if p:
            crashtest.kill_tree([p])
        disk.detach()


def test_a_removed_region_is_given_up_and_nothing_acknowledged_is_lost(dev, tmp_path):
    err = run_case(dev, tmp_path, os.unlink)
    assert "was removed while in use" in err, err


def test_a_truncated_region_costs_no_signal_and_nothing_acknowledged(dev, tmp_path):
    err = run_case(dev, tmp_path, lambda d: os.truncate(d, 0))
    assert "was truncated while in use" in err, err
