"""The device region changes under a running application (issue 15): it is
removed (`rm`, systemd-logind's RemoveIPC, tmpfs cleaners) or truncated.
The application must not get a signal, and no sync may be acknowledged
from a region no recovery will find: on a real power cut of ext4 on a
volatile disk, everything acknowledged is there."""
import os

from conftest import started

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


def run_case(dev, disk, tmp_path, damage):
    path, go = disk.mnt / "log", tmp_path / "go"
    with started(dev, APP, path, go, env={"TDAX_QUIET": "0"}) as p:
        assert p.stdout.readline().strip() == "written"
        damage(dev)
        go.write_bytes(b"")
        assert p.stdout.readline().strip() == "acked", "the application died: " + p.stderr.read()
        p.kill()  # the process itself: its stderr ends
        err = p.stderr.read()
    disk.cut()
    disk.reboot()
    want = b"".join(b"before %04d\n" % i for i in range(100)) + \
        b"".join(b"after %04d\n" % i for i in range(100))
    assert path.read_bytes()[:len(want)] == want, "acknowledged data lost"
    return err


def test_a_removed_region_is_given_up_and_nothing_acknowledged_is_lost(dev, voldisk, tmp_path):
    err = run_case(dev, voldisk, tmp_path, os.unlink)
    assert "was removed while in use" in err, err


def test_a_truncated_region_costs_no_signal_and_nothing_acknowledged(dev, voldisk, tmp_path):
    err = run_case(dev, voldisk, tmp_path, lambda d: os.truncate(d, 0))
    assert "was truncated while in use" in err, err
