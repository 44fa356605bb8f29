"""tdax-oracle, the C oracle workload of the VM tests (tests/vm): its checker
must pass what was written, through renames and truncations, and must see
every kind of loss. Under tdax with real power cuts it runs in `make vmtest`."""
import os
import signal
import subprocess
import time

from conftest import BUILD, run

ORACLE = BUILD / "tests" / "tdax-oracle"


def write_for(seconds, d, oracle):
    p = subprocess.Popen([str(ORACLE), "run", str(d), str(oracle)])
    time.sleep(seconds)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert oracle.stat().st_size > 0


def check(d, oracle):
    p = run(ORACLE, "check", d, oracle)
    acked, lost = (int(x) for x in p.stdout.split()[1::2])
    return p.returncode, acked, lost


def test_check_passes_what_was_written_through_renames_and_truncations(diskdir):
    (diskdir / "app").mkdir()
    write_for(3, diskdir / "app", diskdir / "oracle")
    text = (diskdir / "oracle").read_text()
    assert "rename append.0 append.0.old" in text and "truncate pwrite" in text
    rc, acked, lost = check(diskdir / "app", diskdir / "oracle")
    assert (rc, lost) == (0, 0) and acked > 300


def test_check_sees_a_lost_record_a_torn_file_and_a_missing_rename(diskdir):
    d = diskdir / "app"
    d.mkdir()
    write_for(2, d, diskdir / "oracle")
    data = (d / "writev").read_bytes()
    (d / "writev").write_bytes(data[:len(data) // 2])  # the tail of the file is gone
    rc, acked, lost = check(d, diskdir / "oracle")
    assert rc == 1 and lost > 0
    (d / "writev").write_bytes(data)
    assert check(d, diskdir / "oracle")[0] == 0
    with open(d / "dsync", "r+b") as f:  # one flipped byte tears the rest of the file
        f.seek(30)
        b = f.read(1)
        f.seek(30)
        f.write(bytes([b[0] ^ 0xFF]))
    assert check(d, diskdir / "oracle")[2] > 0
    (d / "dsync").write_bytes(b"")
    assert check(d, diskdir / "oracle")[0] == 1
    os.unlink(d / "append.0.old")  # records acknowledged before a rename live under the new name
    rc, acked, lost = check(d, diskdir / "oracle")
    assert rc == 1 and lost >= 60
