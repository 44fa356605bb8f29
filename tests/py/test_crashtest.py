"""The crash suite's own bookkeeping (tests/crash/crashtest.py): the report
over the --json files of parallel runs must fail on any loss and on a control
that lost nothing. The power cuts themselves run in `make test-crash`."""
import json
import os
import random
import sys
from pathlib import Path

from conftest import ROOT, run

CRASHTEST = ROOT / "tests" / "crash" / "crashtest.py"


def result(app, fault, lost=0, control=False, acked=100):
    return {"app": app, "fault": fault, "seed": 1, "acked": acked, "lost": lost, "detail": "",
            "recovery_s": 0.1, "torn": 0, "replayed": 5, "control": control}


def write_json(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def report(*files):
    return run(sys.executable, CRASHTEST, "--report", *files)


def test_report_sums_the_rounds_of_several_runs(tmp_path):
    a = write_json(tmp_path / "a.jsonl", [result("raw", "cut-all"), result("raw", "cut-all", lost=7, control=True)])
    b = write_json(tmp_path / "b.jsonl", [result("raw", "cut-all", acked=50), result("postgres", "sigkill")])
    p = report(a, b)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [line.split() for line in p.stdout.splitlines()]
    assert ["raw", "cut-all", "2", "150", "0"] in [r[:5] for r in rows]  # rounds, acked, lost
    assert ["raw", "cut-all", "(control)", "1", "100", "7"] in [r[:6] for r in rows]
    assert ["postgres", "sigkill", "1"] in [r[:3] for r in rows]
    assert "the control was caught" in p.stdout
    assert "4 passed, 0 failed" in p.stdout


def test_report_fails_on_a_lost_record(tmp_path):
    f = write_json(tmp_path / "a.jsonl", [result("redis", "cut-random"), result("redis", "cut-random", lost=1)])
    p = report(f)
    assert p.returncode == 1
    assert "FAILED" in p.stdout and "1 passed, 1 failed" in p.stdout


def test_report_fails_on_a_control_that_lost_nothing(tmp_path):
    f = write_json(tmp_path / "a.jsonl", [result("rocksdb", "cut-all", lost=0, control=True)])
    p = report(f)
    assert p.returncode == 1
    assert "CONTROL FAILED" in p.stdout


def test_report_names_the_line_that_is_not_a_result(tmp_path):
    f = tmp_path / "a.jsonl"
    f.write_text(json.dumps(result("raw", "sigkill")) + "\n{\"app\": \"raw\"}\n")
    p = report(f)
    assert p.returncode != 0
    assert f"{f}:2" in p.stderr


def test_the_persist_order_control_is_cut_at_every_acknowledgement():
    """Without fences the whole trace is one epoch; cut only there, an image
    without its lines could hold nothing unsynced when the trace ends with a
    real sync, and the control would pass by chance (it did, in a long run).
    Cut at each acknowledgement, some image lacks a record acknowledged
    after the last real sync."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "crash"))
    import pmreorder
    line = b"r" * pmreorder.LINE
    events = [("F", 0, line), ("M", pmreorder.MARK_ACKED, 1), ("F", 64, line),
              ("M", pmreorder.MARK_ACKED, 2), ("M", pmreorder.MARK_SYNCED, 2)]
    base = bytes(128)
    cuts = [(acked, synced, bytes(img)) for img, acked, synced, what in
            pmreorder.images(128, base, events, 0, random.Random(1), control=True) if "none" in what]
    assert any(acked > synced and img == base for acked, synced, img in cuts), cuts


def test_a_killed_servers_shared_memory_does_not_outlive_it():
    """PostgreSQL's dynamic shared memory lives in /dev/shm; a server
    killed by the crash leaves it behind for good (hundreds of segments
    after a long run) unless kill_tree takes it along."""
    import subprocess
    import crashtest
    seg = Path(f"/dev/shm/PostgreSQL.tdax-test-{os.getpid()}")
    code = ("import mmap, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600); os.ftruncate(fd, 4096)\n"
            "m = mmap.mmap(fd, 4096); print('mapped', flush=True); time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(seg)], stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        assert p.stdout.readline().strip() == "mapped"
        crashtest.kill_tree([p])
        p.wait(timeout=10)
        assert not seg.exists()
    finally:
        seg.unlink(missing_ok=True)
