"""tdax bench: the results a run leaves, the sweep, rounds and their control
pair, the benchmark page, and a clean Ctrl-C."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, TDAX, run, waited

sys.path.insert(0, str(ROOT / "bench"))
from tdaxbench import env, report, rounds, suites  # noqa: E402
from tdaxbench.suites import Config  # noqa: E402


def test_sqlite_suite_writes_raw_data_plots_and_summary(tmp_path):
    out = tmp_path / "res"
    p = run(TDAX, "bench", "sqlite", "--repeat", "2", "--retries", "1", "--seconds", "0.3",
            "--only", "wal full", "--out", out, check=0)
    assert "wal full" in p.stdout
    all_rows = json.loads((out / "results.json").read_text())["rows"]
    rows = [r for r in all_rows if r["kept"] and not r["control"]]
    # wal full and its sync-off reference (the tax row), each without tdax,
    # under the default policy and in bypass mode (the default columns), twice, interleaved
    assert [(r["config"], r["mode"]) for r in rows][:6] == [
        ("wal full", "default"), ("wal full", "adaptive"), ("wal full", "bypass"),
        ("wal off", "default"), ("wal off", "adaptive"), ("wal off", "bypass")]
    assert len(rows) == 2 * 6 and {r["rep"] for r in rows} == {0, 1}
    # each round (each attempt of it) ends with its first run again: the control pair
    attempts = {(r["rep"], r["attempt"]) for r in all_rows}
    controls = [r for r in all_rows if r["control"]]
    assert len(controls) == len(attempts) and len(all_rows) == 7 * len(attempts)
    assert all((r["config"], r["mode"]) == ("wal full", "default") for r in controls)
    assert all(r["value"] > 0 for r in all_rows)
    meta = json.loads((out / "results.json").read_text())
    assert meta["machine"]["kernel"] and meta["ratios"][0]["vs_default"] > 1
    assert meta["started"] and meta["control"]["config"] == "wal full" and meta["control"]["rounds"] == 2
    assert "Control: 'wal full' without tdax" in p.stdout
    assert (out / "raw.csv").read_text().count("\n") == len(all_rows) + 1
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
    sweep = [r for r in rows if r["sweep"] and r["kept"]]
    assert len(sweep) == 4 and {r["sweep"]["upgrade_threshold"] for r in sweep} == {40, 80}
    assert (out / "sqlite-sweep.png").stat().st_size > 10000


# The second case is `make test` started in the background by a shell
# without job control (`make test > log &` in a script): its jobs inherit
# SIGINT ignored, Python leaves it so, and tdax bench once ran on with its
# servers until the test gave up after 60 s (issue 22, item 6).
@pytest.mark.parametrize("sig,inherited", [("SIGINT", "default"), ("SIGINT", "ignored"),
                                           ("SIGTERM", "default")])
def test_ctrl_c_stops_every_server(tmp_path, sig, inherited):
    sig = getattr(signal, sig)

    def start():
        if inherited == "ignored":
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    p = subprocess.Popen([str(TDAX), "bench", "redis", "--repeat", "1", "--requests", "200000",
                          "--out", str(tmp_path / "r")], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=start)
    try:
        time.sleep(4)
        kids = subprocess.run(["pgrep", "-s", str(p.pid), "redis-server"], capture_output=True, text=True)
        assert kids.stdout.split(), "a redis-server should be running by now"
        os.kill(p.pid, sig)  # only tdax bench: it must stop its servers itself
        waited(p, 60)
        assert p.returncode == 128 + sig and "every server stopped" in p.stderr.read()
        left = subprocess.run(["pgrep", "-s", str(p.pid)], capture_output=True, text=True)
        assert left.stdout.strip() == ""
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # whatever a failed run left in its session
        except ProcessLookupError:
            pass
        p.wait()


def test_a_server_deaf_to_its_stop_signal_is_killed_with_its_children(monkeypatch):
    """A server has GRACE seconds to stop; then it and every process below
    it are killed (a PostgreSQL postmaster killed alone leaves its backends)."""
    monkeypatch.setattr(env, "GRACE", 0.5)
    t0 = time.monotonic()
    with env.server(["sh", "-c", "trap '' TERM; sleep 300 & sleep 300 & wait"]) as p:
        time.sleep(0.3)
        kids = env.descendants(p.pid)
        assert len(kids) == 2
    assert time.monotonic() - t0 < 10 and p.returncode == -signal.SIGKILL and not env._servers

    def dead(k):  # gone, or a zombie init has not reaped yet
        try:
            return open(f"/proc/{k}/stat").read().rsplit(")", 1)[1].split()[0] in "ZX"
        except OSError:
            return True
    deadline = time.monotonic() + 5
    while not all(dead(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(dead(k) for k in kids), kids


# ---- rounds, the control pair, per-round ratios: injected measurements ----

CFGS = [Config("sync", None, "ops/s", ref="off"), Config("off", None, "ops/s", sync=False)]


def fake_measure(values):
    """measure(config, mode, sweep) returning values[(config, mode)] in turn."""
    seen = {}

    def measure(c, m, combo):
        k = (c.name, m)
        seen[k] = seen.get(k, 0) + 1
        return values[k][seen[k] - 1]
    return measure


def test_a_noisy_round_runs_again_and_is_kept_marked_when_it_stays_noisy():
    # A round: sync default, sync tdax, off default, off tdax, then sync default again.
    # Round 1 (0-based 0): control 0.7 -> again; then 1.0 -> kept.
    # Round 2: 1.3, 0.6, 1.2: noisy each time -> the 1.2 attempt kept, marked noisy.
    # Round 3: 1.05 -> kept at once.
    firsts = [100, 100, 100, 100, 100, 100]
    lasts = [70, 100, 130, 60, 120, 105]
    values = {("sync", "default"): [v for pair in zip(firsts, lasts) for v in pair],
              ("sync", "tdax"): [500 + i for i in range(6)], ("off", "default"): [1000] * 6,
              ("off", "tdax"): [900] * 6}
    notes = []
    rows = rounds.run(rounds.plan(CFGS, ["tdax"]), fake_measure(values), 3, noise=0.10, retries=2,
                      note=lambda *a: notes.append(a))
    assert [(rnd, att, again) for rnd, att, _, again in notes] == [
        (0, 0, True), (0, 1, False), (1, 0, True), (1, 1, True), (1, 2, False), (2, 0, False)]
    kept = [r for r in rows if r["kept"]]
    assert {(r["rep"], r["attempt"]) for r in kept} == {(0, 1), (1, 2), (2, 0)}
    assert [r["value"] for r in kept if (r["config"], r["mode"]) == ("sync", "tdax")] == [501, 504, 505]
    ctl = rounds.control(rows, 0.10)
    assert ctl["config"] == "sync" and ctl["repeated"] == 3 and ctl["noisy"] == [1]
    assert [round(x, 2) for x in ctl["ratios"]] == [1.0, 1.2, 1.05]
    assert (round(ctl["median"], 2), round(ctl["min"], 2), round(ctl["max"], 2)) == (1.05, 1.0, 1.2)
    assert "noisy rounds kept: round 2 (1.20)" in report.control_line(ctl, 2)


def test_every_other_round_runs_each_configurations_modes_the_other_way_round():
    """A run may pay for the one before it (a disk still writing back): in
    odd rounds each configuration's modes run in reverse; the control run
    stays last, the sweep's runs stay after the configurations'."""
    order = []
    rounds.run(rounds.plan(CFGS, ["tdax", "bypass"], [{"U": 40}]),
               lambda c, m, combo: order.append((c.name, m, bool(combo))) or 100.0, 2)
    even = [("sync", "default"), ("sync", "tdax"), ("sync", "bypass"),
            ("off", "default"), ("off", "tdax"), ("off", "bypass")]
    odd = even[2::-1] + even[:2:-1]
    tail = [("sync", "thesis", True), ("sync", "default", False)]
    assert order == [(c, m, False) for c, m in even] + tail + [(c, m, False) for c, m in odd] + tail


def rows_of(rounds_values, kept=True, attempt=0):
    """Rows of rounds whose values are {(config, mode): [one per round]}."""
    return [{"config": c, "mode": m, "rep": i, "attempt": attempt, "control": False, "kept": kept,
             "value": v, "unit": "ops/s", "sweep": None}
            for (c, m), vs in rounds_values.items() for i, v in enumerate(vs)]


def test_ratios_are_each_rounds_own_then_their_median_and_range(tmp_path):
    # tdax/default per round: 5.0, 2.0, 1.1 -> median 2.0 (the ratio of the
    # medians, 500/200, would be 2.5); a discarded attempt does not count.
    rows = rows_of({("sync", "default"): [100, 300, 200], ("sync", "tdax"): [500, 600, 220],
                    ("off", "default"): [1000, 1000, 1000], ("off", "tdax"): [900, 950, 1000]})
    rows += rows_of({("sync", "default"): [1], ("sync", "tdax"): [10 ** 6], ("off", "default"): [1],
                     ("off", "tdax"): [1]}, kept=False, attempt=1)
    r = report.ratio_rows(CFGS, rows, ["tdax"])[0]
    assert (r["vs_default"], r["vs_default_range"]) == (2.0, [1.1, 5.0])
    assert (r["vs_sync_off"], r["vs_sync_off_range"]) == (0.5, [0.22, 0.6])
    assert (r["default"], r["tdax"]) == (200, 500)
    t = report.tax_rows(CFGS, rows, ["tdax"])[0]
    assert (t["ratio"], t["ratio_range"]) == (0.95, [0.9, 1.0])
    meta = {"opts": {"repeat": 3, "noise": 10, "retries": 2}, "started": "2026-01-02 03:04:05 UTC",
            "machine": {"cpus": 2, "kernel": "6.1"}}
    _, _, _, text = report.render(tmp_path, "sqlite", CFGS, rows, ["tdax"], meta)
    assert "| sync | 200 (100..300) | 500 (220..600) | 1,000 (1,000..1,000) | 2.00x (1.10..5.00x) | " \
           "0.50 (0.22..0.60) |" in text
    assert "| off | 1,000 (1,000..1,000) | 950 (900..1,000) | 0.95 (0.90..1.00) |" in text


def write_run(d, suite, cfg_names, started, finished, lasts):
    """A suite's results.json as tdax bench writes it: 3 rounds with control
    runs (control ratios lasts/100), the second run again once."""
    sync, off = cfg_names
    rows = []
    for rep, last in enumerate(lasts):
        for attempt, lst in enumerate([130, last] if rep == 1 else [last]):
            for c, m, v, ctl in [(sync, "default", 100, False), (sync, "adaptive", 300 + rep, False),
                                 (off, "default", 1000, False), (off, "adaptive", 990, False),
                                 (sync, "default", lst, True)]:
                rows.append({"suite": suite, "config": c, "mode": m, "rep": rep, "attempt": attempt,
                             "control": ctl, "kept": rep != 1 or attempt == 1, "value": v,
                             "unit": "tx/s", "sweep": None})
    d.mkdir()
    meta = {"suite": suite, "started": started, "finished": finished,
            "machine": {"scratch": "ext4 on /dev/vdz", "host": "h", "kernel": "6.1.99-test", "cpus": 2,
                        "cpu": "Test CPU 9000", "sqlite": "3.40"},
            "opts": {"repeat": 3, "noise": 10, "retries": 2, "quick": True, "policies": ["adaptive"],
                     "only": None, "seconds": 1}, "rows": rows}
    (d / "results.json").write_text(json.dumps(meta))
    return d


def test_the_page_states_date_machine_rounds_threshold_and_control_and_nothing_stale(tmp_path):
    runs = [write_run(tmp_path / "sqlite-20260102-030405", "sqlite", ("wal full", "wal off"),
                      "2026-01-02 03:04:05 UTC", "2026-01-02 03:10:00 UTC", [101, 120, 99]),
            write_run(tmp_path / "files-20260102-031000", "files",
                      ("create+write+rename + fsync", "create+write+rename"),
                      "2026-01-02 03:10:01 UTC", "2026-01-02 03:12:00 UTC", [100, 104, 96])]
    (tmp_path / "latest.txt").write_text("\n".join(map(str, runs)) + "\n")
    page = tmp_path / "docs" / "benchmarks.md"
    (page.parent / "bench").mkdir(parents=True)
    (page.parent / "bench" / "redis.png").write_bytes(b"stale")  # from an older run
    page.write_text("# Benchmarks\n\n| always P1 c1 | 5,002 | 13,532 | 2.71x |\n")
    run(ROOT / "build" / "venv" / "bin" / "python", ROOT / "scripts" / "benchdoc.py", "--list",
        tmp_path / "latest.txt", "--page", page, check=0)
    text = page.read_text()
    assert "Run: 2026-01-02 03:04:05 UTC to 2026-01-02 03:12:00 UTC." in text
    assert "2 CPUs (Test CPU 9000), kernel 6.1.99-test" in text and "ext4 on /dev/vdz" in text
    assert "Rounds: 3 per suite" in text and "more than 10 % runs again, up to 2 times" in text
    assert "| sqlite | wal full | 1.01 (0.99..1.20) | 1 | round 2 (1.20) |" in text
    assert "| files | create+write+rename + fsync | 1.00 (0.96..1.04) | 1 | none |" in text
    assert "| wal full | 100 (100..100) | 301 (300..302) | 1,000 (1,000..1,000) | 3.01x (3.00..3.02x) |" in text
    assert "always P1 c1" not in text and "5,002" not in text  # the old page is gone
    assert sorted(x.name for x in (page.parent / "bench").iterdir()) == ["files.png", "sqlite.png"]
    assert "(bench/sqlite.png)" in text and "(bench/files.png)" in text


def test_a_run_the_dynamic_linker_left_without_tdax_is_no_figure(tmp_path):
    """A libtdax.so that cannot be loaded (a build replacing it while a
    benchmark runs) makes `tdax run` run the workload without tdax, with
    only the dynamic linker's line on stderr: the harness refuses that
    run's figure instead of reporting it as tdax's."""
    bad = tmp_path / "libtdax.so"
    bad.write_bytes(b"\x7fELF" + b"\0" * 60)
    cmd = ["env", f"LD_PRELOAD={bad}", sys.executable, "-c", "print(1)"]
    with pytest.raises(RuntimeError, match="ran without tdax"):
        suites.out_of(cmd)
    assert suites.out_of([sys.executable, "-c", "print(1)"]) == "1\n"
