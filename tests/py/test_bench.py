"""tdax bench: the results a run leaves, the sweep, and a clean Ctrl-C."""
import json
import os
import signal
import subprocess
import time

from conftest import ROOT, TDAX, run


def test_sqlite_suite_writes_raw_data_plots_and_summary(tmp_path):
    out = tmp_path / "res"
    p = run(TDAX, "bench", "sqlite", "--repeat", "2", "--seconds", "0.3", "--only", "wal full",
            "--out", out, check=0)
    assert "wal full" in p.stdout
    rows = json.loads((out / "results.json").read_text())["rows"]
    # wal full and its sync-off reference (the tax row), each without tdax,
    # under the default policy and in bypass mode (the default columns), twice, interleaved
    assert [(r["config"], r["mode"]) for r in rows][:6] == [
        ("wal full", "default"), ("wal full", "adaptive"), ("wal full", "bypass"),
        ("wal off", "default"), ("wal off", "adaptive"), ("wal off", "bypass")]
    assert len(rows) == 2 * 6
    assert all(r["value"] > 0 for r in rows)
    meta = json.loads((out / "results.json").read_text())
    assert meta["machine"]["kernel"] and meta["ratios"][0]["vs_default"] > 1
    assert (out / "raw.csv").read_text().count("\n") == len(rows) + 1
    assert (out / "sqlite.png").stat().st_size > 10000
    s = (out / "summary.md").read_text()
    assert "| wal full |" in s and "adaptive/default" in s
    tax = meta["tax"]
    assert [(t["config"], t["policy"]) for t in tax] == [("wal off", "adaptive"), ("wal off", "bypass")]
    assert all(t["ratio"] > 0 for t in tax)
    assert "| wal off |" in s and "adaptive/without" in s and "bypass/without" in s and "tax:" in p.stdout
    assert "bypass/default" in s and "bypass/sync off" in s


def test_every_suite_of_all_runs_on_a_device_its_user_owns(tmp_path):
    """`tdax bench all` once ran every suite on one device owned by postgres
    (for the PostgreSQL suite): tdax refused it in every root process, and
    the other suites ran without tdax, silently (--quiet). Each suite's
    device must be its workload user's."""
    code = r"""
import os, pathlib, pwd, sys
from tdaxbench import __main__ as m
seen = []
def run_suite(suite, a, device, console):
    seen.append((suite, pwd.getpwuid(os.stat(device).st_uid).pw_name))
    return "x"
m.run_suite = run_suite
m.env.ROOT = pathlib.Path(sys.argv[1])  # its results/latest.txt, not the checkout's
(m.env.ROOT / "results").mkdir()
sys.argv = ["tdax bench", "all"]
m.main()
print(seen)
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "bench"))
    p = run(str(ROOT / "build" / "venv" / "bin" / "python"), "-c", code, tmp_path, env=env, check=0)
    seen = dict(eval(p.stdout.strip().splitlines()[-1]))
    assert seen["postgres"] == "postgres", seen
    assert all(owner == "root" for suite, owner in seen.items() if suite != "postgres"), seen


def test_sweep_runs_the_grid_and_plots_it(tmp_path):
    out = tmp_path / "res"
    run(TDAX, "bench", "sqlite", "--repeat", "1", "--seconds", "0.2", "--only", "wal full",
        "--sweep", "--grid", "U=40,80", "D=10", "G=0,9", "--out", out, check=0)
    rows = json.loads((out / "results.json").read_text())["rows"]
    sweep = [r for r in rows if r["sweep"]]
    assert len(sweep) == 4 and {r["sweep"]["upgrade_threshold"] for r in sweep} == {40, 80}
    assert (out / "sqlite-sweep.png").stat().st_size > 10000


def test_ctrl_c_stops_every_server(tmp_path):
    p = subprocess.Popen([str(TDAX), "bench", "redis", "--repeat", "1", "--requests", "200000",
                          "--out", str(tmp_path / "r")], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(4)
    kids = subprocess.run(["pgrep", "-s", str(p.pid), "redis-server"], capture_output=True, text=True)
    assert kids.stdout.split(), "a redis-server should be running by now"
    os.kill(p.pid, signal.SIGINT)  # only tdax bench: it must stop its servers itself
    p.wait(timeout=60)
    assert p.returncode == 130 and "every server stopped" in p.stderr.read()
    left = subprocess.run(["pgrep", "-s", str(p.pid)], capture_output=True, text=True)
    assert left.stdout.strip() == ""
