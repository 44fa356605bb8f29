"""Traces and the policy simulator: the simulator, fed a trace of a real run,
must reproduce that run's own counters."""
import ctypes
import json
import os
import re
import signal
import struct
import subprocess
import sys

import pytest

from conftest import BUILD, PY, ROOT, TDAX, TDAX_ENV, info, run

sys.path.insert(0, str(ROOT / "bench"))
from tdaxsim import ctrack, sim as csim, trace as ctrace  # noqa: E402

SQLITE_TX = str(TDAX.parents[2] / "bench" / "sqlite_tx.py")


def traced_sqlite(dev, diskdir, tx=3000, policy="thesis"):
    trace = diskdir / "t.bin"
    env = dict(TDAX_ENV)
    del env["TDAX_WB_AGE_MS"]  # the default background write-back, as in production
    run(TDAX, "run", "--device", dev, "--policy", policy, "--trace", trace, "--", PY, SQLITE_TX,
        diskdir / "d.db", "--tx", tx, env=env, check=0)
    return trace


def bypass_over_thesis(by):
    """Reports of one trace by policy: bypass answers every sync the thesis
    policy answers lightly, and more where a promoted file writes a range
    the thesis policy does not log; the same syncs in all."""
    b, th = by["bypass"], by["thesis"]
    assert b["light_syncs"] >= th["light_syncs"], (b, th)
    assert b["light_syncs"] + b["real_syncs"] == th["light_syncs"] + th["real_syncs"]
    assert b["logged_writes"] >= th["logged_writes"] and b["deferred_writes"] <= b["logged_writes"], (b, th)
    assert b["demotions"] == sum(b["demotions_" + k] for k in ("unselected", "full", "kernel", "gone"))


def close(a, b, pct=5, slack=2):
    return abs(a - b) <= max(slack, pct / 100 * max(a, b))


@pytest.mark.parametrize("policy", ["thesis", "adaptive"])
def test_simulator_reproduces_the_runs_counters(dev, diskdir, policy):
    """The run under a policy and its trace replayed under the same: the
    same counts within 5 % (issue #21: the runtime and the simulator agree)."""
    trace = traced_sqlite(dev, diskdir, policy=policy)
    c = info(dev)["counters"]
    r = json.loads(run(TDAX, "sim", trace, "--policy", policy, "--json", check=0).stdout)
    for k in ("light_syncs", "real_syncs", "upgrades", "downgrades"):
        assert close(r[k], c[k]), f"{k}: simulated {r[k]}, the run counted {c[k]}"
    assert r["runtime_real_syncs"] == c["real_syncs"]
    assert r["disagreements"] <= 0.05 * (c["light_syncs"] + c["real_syncs"])
    assert c["light_syncs"] > 2500


def test_trace_info_and_dump(dev, diskdir):
    trace = traced_sqlite(dev, diskdir, tx=200)
    i = json.loads(run(TDAX, "trace", "info", trace, "--json", check=0).stdout)
    assert i["by_kind"]["sync"] >= 200 and i["by_kind"]["write"] >= 400 and i["processes"] == 1
    assert i["tunables"]["upgrade_threshold"] == 60 and not i["truncated_tail"]
    dump = run(TDAX, "trace", "dump", trace, "--limit", "5", check=0).stdout.splitlines()
    assert len(dump) == 5 and "d.db" in "".join(dump)
    # A reader that went (| head): the end of a C tool's SIGPIPE, no traceback.
    p = subprocess.Popen([TDAX, "trace", "dump", trace], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 128 + signal.SIGPIPE and "Traceback" not in err, err
    p = subprocess.run([TDAX, "trace", "info", trace], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, preexec_fn=lambda: os.close(1))  # started with stdout closed
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    bad = diskdir / "bad.bin"
    bad.write_bytes(b"x" * 100)
    p = run(TDAX, "trace", "info", bad)
    assert p.returncode != 0 and "not a tdax trace" in p.stderr


def test_all_policies_and_a_sweep(dev, diskdir):
    trace = traced_sqlite(dev, diskdir, tx=1000)
    rs = json.loads(run(TDAX, "sim", trace, "--policy", "all", "--json", check=0).stdout)
    by = {r["policy"]: r for r in rs}
    assert set(by) == {"thesis", "always", "never", "fsync-streak", "bandwidth", "adaptive", "bypass"}
    # never: only syncs with nothing new since the last real sync are light
    assert by["never"]["light_fraction"] < 0.01 and by["never"]["upgrades"] == 0
    assert by["always"]["light_fraction"] >= by["thesis"]["light_fraction"] > 0.9
    assert by["thesis"]["est_speedup"] > 5 and by["never"]["est_speedup"] == 1.0
    # bypass: thesis, and the promoted files' writes all logged on top
    bypass_over_thesis(by)
    assert all(set(r) == set(by["thesis"]) for r in rs)  # one set of keys for every policy
    assert by["thesis"]["promotions"] == by["thesis"]["deferred_writes"] == 0
    out = diskdir / "sweep"
    p = run(TDAX, "sim", trace, "--sweep", "U=40:80:20", "G=0:9:9", "--out", out, check=0)
    assert len(json.loads((out / "sweep.json").read_text())) == 6
    assert (out / "sweep.png").stat().st_size > 10000 and "light" in p.stdout
    assert "unknown policy" in run(TDAX, "sim", trace, "--policy", "magic").stderr


def test_the_simulated_adaptive_policy_takes_up_the_journals_the_thesis_leaves(dev, diskdir):
    """A trace of SQLite in rollback-journal mode (a new journal at the same
    name every transaction) under the thesis policy: replayed, the thesis
    policy leaves the journals' syncs real, as the run did; the adaptive
    policy (heirs, and lower thresholds for a steady stream) answers
    nearly all of them from the log."""
    trace = diskdir / "j.bin"
    run(TDAX, "run", "--device", dev, "--policy", "thesis", "--trace", trace, "--", PY, SQLITE_TX,
        diskdir / "d.db", "--journal", "delete", "--tx", 500, env=TDAX_ENV, check=0)
    c = info(dev)["counters"]
    rs = {r["policy"]: r for r in json.loads(run(TDAX, "sim", trace, "--policy", "all", "--json",
                                                     check=0).stdout)}
    th, ad = rs["thesis"], rs["adaptive"]
    assert close(th["real_syncs"], c["real_syncs"]) and th["light_fraction"] < 0.5, (th, c)
    assert ad["light_fraction"] > 0.9 and ad["light_fraction"] >= th["light_fraction"] + 0.4, ad
    assert ad["upgrades"] >= 1 and ad["downgrade_after_ms"] is None, ad
    bypass_over_thesis(rs)


MS, S = 1_000_000, 1_000_000_000
HOT, COLD = 1, 2


def write_trace(path, events, names, capacity, start=10 * S):
    """A trace as src/core/trace.h lays it out (default tunables): events
    (t from start, file, off, len, kind), names {file: path}."""
    out = [ctrace.HEADER.pack(b"TDAXTRC1", 1, ctrace.RECORD.size, 60, 30, 5, 9, S, 1500 * MS, capacity, start)]
    for fid, name in names.items():
        b = name.encode()
        out.append(ctrace.RECORD.pack(start, 1, fid, 0, len(b), ctrace.NAME, 0) + b.ljust((len(b) + 31) & ~31, b"\0"))
    out += [ctrace.RECORD.pack(start + t, 1, fid, off, n, kind, 0) for t, fid, off, n, kind in sorted(events)]
    path.write_bytes(b"".join(out))
    return path


def hot_and_cold(path, secs=6):
    """A hot log (a 512 B append and a sync every millisecond: 512 KB/s, a
    second of its records 576 KB; in the block cache, its append
    reservation: a tenth of a second, 51 KB) and, from 1.5 s on, a cold file
    (a 128 KiB write in place and a sync every 500 ms: 256 KiB/s, its blocks
    of a second 262 KB), on a device of 1.2 MB. A share of 150 KB (an eighth
    of the device) holds the hot log's reservation, never the cold file's
    blocks beside it (one write of it is 131 KB)."""
    ev = [(0, HOT, 1, 0, ctrace.OPEN), (0, COLD, 1, 0, ctrace.OPEN)]
    for i in range(secs * 1000):
        t = MS + i * MS
        ev += [(t, HOT, i * 512, 512, ctrace.WRITE), (t + 1000, HOT, 0, 0, ctrace.SYNC)]
    ev.append((1000, COLD, 4 * 131072 - 1, 1, ctrace.WRITE))  # its size: the writes below are in place
    for k in range(secs * 2 - 3):
        t = 1501 * MS + k * 500 * MS
        ev += [(t, COLD, (k % 4) * 131072, 131072, ctrace.WRITE), (t + 1000, COLD, 0, 0, ctrace.SYNC)]
    return write_trace(path, ev, {HOT: "/data/hot.log", COLD: "/data/cold.db"}, 1_200_000)


def writes_after(s, fid, t):
    return sum(1 for e in s.trace.events if e.kind == ctrace.WRITE and e.file == fid and e.t > t)


def test_the_bandwidth_selection_takes_the_hot_synced_file_and_not_the_cold_one(tmp_path):
    """The policy "bandwidth" is src/policy/select.c with a share of the
    device: 22.5 % of 666 KB, room for the hot log, not for the cold file
    beside it: the hot one is selected within its first window and stays,
    the cold one never."""
    trace = hot_and_cold(tmp_path / "hc.bin")
    s = csim.Sim(ctrace.Trace(trace), "bandwidth", capacity=666_000, selection={"share": 0.225})
    r = s.run()
    when, _ = s.files[HOT].upgraded_at
    assert when <= S, when
    assert s.files[COLD].upgraded_at is None and s.policy.selection.promoted == {HOT}
    assert r["upgrades"] == 1 and r["downgrades"] == 0 and r["log_full"] == 0, r
    # with room for both, the cold file is taken too: the capacity kept it out
    s = csim.Sim(ctrace.Trace(trace), "bandwidth", capacity=4 << 20)
    s.run()
    assert s.policy.selection.promoted == {HOT, COLD}


def promoted_syncs_real(s):
    """Run Sim s (policy bypass); its report, and how many syncs of files
    promoted at the time were real (bypass mode answers every one with a
    fence: none)."""
    p, real, sync = s.policy, [], s.policy.sync

    def hook(fid, f, t):
        was = fid in p.selection.promoted
        sync(fid, f, t)
        real.append(was and (f.uncovered or f.kernel_only))
    p.sync = hook
    return s.run(), sum(real)


def test_bypass_promotes_the_hot_file_and_defers_its_writes(tmp_path):
    """The policy "bypass": the selection (an eighth of the device) promotes the hot
    log at its first sync after its first lightweight one (where the
    runtime takes the write lease a promotion needs) and refuses the cold
    file; the hot log's writes from then on go to the device (deferred)
    whatever the thesis policy says of their ranges, but for the few after
    each write-back demotion before its next sync. Its syncs are then all
    light, where the thesis policy leaves more real (while its second range
    waits for an upgrade); the cold file's are the thesis policy's."""
    trace = ctrace.Trace(hot_and_cold(tmp_path / "hc.bin"))
    s = csim.Sim(trace, "bypass", selection={"share": 0.125})
    r, real = promoted_syncs_real(s)
    assert real == 0, r
    p = s.policy
    when = p.promoted_at[HOT]
    assert when - s.trace.start_ns <= S, when
    assert p.deferred[HOT] >= 0.95 * writes_after(s, HOT, when), (p.deferred[HOT], r)
    assert COLD not in p.promoted_at and p.deferred[COLD] == 0
    assert p.selection.refused.get(COLD), "the cold file was never asked for"
    assert r["promotions"] >= 1 and r["deferred_writes"] == p.deferred[HOT]
    assert r["deferred_fraction"] == round(p.deferred[HOT] / r["writes"], 4) > 0.9
    # the write-back releases its records without demoting it: promoted once, for good
    assert r["promotions"] == 1 and r["demotions"] == 0 and HOT in p.selection.promoted, r
    th = csim.Sim(trace, "thesis")
    t = th.run()
    bypass_over_thesis({"bypass": r, "thesis": t})
    assert th.files[COLD].real_syncs == s.files[COLD].real_syncs
    # the thesis policy leaves more of the hot log's syncs real (10 here,
    # 5 of them before its first lightweight one)
    assert s.files[HOT].real_syncs < th.files[HOT].real_syncs, (s.files[HOT].real_syncs, t)
    assert r["light_fraction"] > t["light_fraction"], (r, t)


def test_bypass_through_the_command_answers_more_syncs_lightly_than_thesis(tmp_path):
    """As `tdax sim` runs it: bypass's report counts the promoted hot log's
    syncs light, more than the thesis policy does; thesis defers nothing."""
    trace = hot_and_cold(tmp_path / "hc.bin")
    rs = {r["policy"]: r for r in json.loads(run(TDAX, "sim", trace, "--policy", "all", "--json",
                                                   check=0).stdout)}
    bypass_over_thesis(rs)
    assert rs["bypass"]["light_fraction"] > rs["thesis"]["light_fraction"], (rs["bypass"], rs["thesis"])
    assert rs["bypass"]["deferred_writes"] > 0 and rs["thesis"]["deferred_writes"] == 0
    assert "deferred" in run(TDAX, "sim", trace, "--policy", "bypass", check=0).stdout


def test_bypass_demotes_a_file_the_selection_drops(tmp_path):
    """A log promoted alone (512 KB/s: its append reservation 51 KB) is
    dropped once a busier one (1.8 MB/s, 180 KB, from 2 s on) needs the
    room of a share of 200 KB: demoted by the selection, never promoted
    again, while the busier one is."""
    A, B = 3, 4
    ev = [(0, A, 1, 0, ctrace.OPEN), (0, B, 1, 0, ctrace.OPEN)]
    for i in range(5000):
        t = MS + i * MS
        ev += [(t, A, i * 512, 512, ctrace.WRITE), (t + 1000, A, 0, 0, ctrace.SYNC)]
        if t >= 2 * S:
            j = i - 1999
            ev += [(t + 2000, B, j * 1800, 1800, ctrace.WRITE), (t + 3000, B, 0, 0, ctrace.SYNC)]
    trace = ctrace.Trace(write_trace(tmp_path / "ab.bin", ev, {A: "/data/a.log", B: "/data/b.log"}, 4_000_000))
    s = csim.Sim(trace, "bypass", selection={"share": 0.05})
    r, real = promoted_syncs_real(s)
    th = csim.Sim(trace, "thesis").run()
    assert real == 0
    bypass_over_thesis({"bypass": r, "thesis": th})
    p = s.policy
    assert r["demotions_unselected"] >= 1 and A not in p.selection.promoted and B in p.selection.promoted, r
    assert p.promoted_at[A] - trace.start_ns <= S and p.promoted_at[B] - trace.start_ns <= 2 * S + 100 * MS
    # A: deferred until B's window filled (3 s), not after
    before = lambda t: writes_after(s, A, 0) - writes_after(s, A, trace.start_ns + t)  # noqa: E731
    assert 0.9 * before(3 * S) <= p.deferred[A] <= before(3200 * MS), (p.deferred[A], r)
    assert p.deferred[B] >= 0.9 * writes_after(s, B, p.promoted_at[B]), r


def test_bypass_demotes_a_file_whose_write_the_log_has_no_room_for(tmp_path):
    """The hot log alone (promoted once it has a lease), then at 2.5 s one
    write of 1 MB, more than the log (1.2 MB) has room for: not stored, the
    file demoted (demotions_full) and uncovered, its next sync real (one
    more than without that write), and promoted again at it."""
    ev = [(0, HOT, 1, 0, ctrace.OPEN)]
    for i in range(4000):
        t = MS + i * MS
        ev += [(t, HOT, i * 512, 512, ctrace.WRITE), (t + 1000, HOT, 0, 0, ctrace.SYNC)]
    plain = csim.Sim(ctrace.Trace(write_trace(tmp_path / "plain.bin", ev, {HOT: "/data/hot.log"},
                                              1_200_000)), "bypass")
    plain.run()
    ev.append((2500 * MS + 500_000, HOT, 10 << 20, 1_000_000, ctrace.WRITE))
    trace = ctrace.Trace(write_trace(tmp_path / "full.bin", ev, {HOT: "/data/hot.log"}, 1_200_000))
    s = csim.Sim(trace, "bypass")
    r, real = promoted_syncs_real(s)
    assert real == 0 and r["log_full"] == r["demotions_full"] == 1, r
    assert s.files[HOT].real_syncs == plain.files[HOT].real_syncs + 1, s.files[HOT].real_syncs
    assert r["promotions"] == r["demotions"] + len(s.policy.selection.promoted)
    assert r["deferred_bytes"] == 512 * r["deferred_writes"], r
    bypass_over_thesis({"bypass": r, "thesis": csim.Sim(trace, "thesis").run()})


def test_select_through_ctypes_takes_the_two_synced_files_with_most_bandwidth():
    """ctrack's mirrors of struct tdax_candidate and tdax_select_params
    round-trip through tdax_select and tdax_select_total: room for two of
    three files, the busiest never synced."""
    lib = ctrack.load()
    rates = [ctrack.Rates(0, 0, 100_000, 100, 10), ctrack.Rates(0, 0, 200_000, 200, 0),
             ctrack.Rates(0, 50_000, 0, 50, 5)]
    c = (ctrack.Candidate * 3)(*(ctrack.Candidate(r) for r in rates))
    c[2].promoted = True
    # blocks for a second of writes in place, a tenth of one of appends
    foot = [r.write + r.append // 10 for r in rates]
    p = ctrack.SelectParams(foot[0] + foot[2], 4096, S, S // 10, ctrack.KEEP_PCT)
    total = lib.tdax_select_total(c, 3, ctypes.byref(p))
    assert lib.tdax_select(c, (ctypes.c_uint32 * 3)(), 3, ctypes.byref(p)) == total == 150_000 == \
        lib.tdax_select_bandwidth(ctypes.byref(rates[0])) + lib.tdax_select_bandwidth(ctypes.byref(rates[2]))
    assert [x.selected for x in c] == [True, False, True] and [x.promoted for x in c] == [False, False, True]
    assert [x.footprint for x in c] == foot and c[1].score == 0
    assert c[0].score == 100_000 and c[2].score == 50_000 * (100 + ctrack.KEEP_PCT) // 100
    assert [(x.rates.append, x.rates.syncs) for x in c] == [(r.append, r.syncs) for r in rates]
    # half the room over half the holds: the same; half the floor keeps the promoted one
    p.capacity //= 2
    p.hold_ns //= 2
    p.append_hold_ns //= 2
    p.floor = 2 * 50_000 - 1
    assert lib.tdax_select_total(c, 3, ctypes.byref(p)) == 150_000
    lib.tdax_select(c, (ctypes.c_uint32 * 3)(), 3, ctypes.byref(p))
    assert [x.selected for x in c] == [True, False, True]
    assert not lib.tdax_select_due(total, total) and lib.tdax_select_due(total, 2 * total)
    assert lib.tdax_select_due(0, 1) and not lib.tdax_select_due(0, 0)
    # a profile fed through ctypes gives its rates back: bytes and writes per
    # second, syncs a count over the window (here 2 s)
    prof, r = ctrack.Profile(), ctrack.Rates()
    for i in range(10):
        lib.tdax_profile_write(ctypes.byref(prof), 2 * S, 5 * S + i * MS, 640, True)
        lib.tdax_profile_sync(ctypes.byref(prof), 2 * S, 5 * S + i * MS)
    lib.tdax_profile_write(ctypes.byref(prof), 2 * S, 5 * S + 10 * MS, 100, False)
    lib.tdax_profile_read(ctypes.byref(prof), 2 * S, 5 * S + 10 * MS, 64)
    lib.tdax_profile_rates(ctypes.byref(prof), 2 * S, 5 * S + 20 * MS, ctypes.byref(r))
    assert (r.read, r.write, r.append, r.ops, r.syncs) == (32, 64, 3200, 5, 10)


def c_layouts():
    """The C side: build/tests/sizes (tests/c/sizes.c, built by make all)."""
    return json.loads(run(BUILD / "tests" / "sizes", check=0).stdout)


def format_fields(fmt):
    """[(offset, size)] of each item of a struct format such as "<8sIQ"."""
    order, items = fmt[0], re.findall(r"\d*[a-zA-Z?]", fmt[1:])
    out, done = [], order
    for item in items:
        out.append((struct.calcsize(done), struct.calcsize(order + item)))
        done += item
    return out


def test_simulator_structs_match_the_c_ones():
    """ctrack's ctypes structs are the C structs the policy code takes
    (src/policy/track.h, src/policy/select.h): same size, same fields at the
    same offsets."""
    c = c_layouts()["structs"]
    for cls, name in ((ctrack.Tunables, "tdax_tunables"), (ctrack.Range, "tdax_range_track"),
                      (ctrack.Legacy, "tdax_track_legacy"), (ctrack.Profile, "tdax_profile"),
                      (ctrack.Rates, "tdax_rates"), (ctrack.SelectParams, "tdax_select_params"),
                      (ctrack.Candidate, "tdax_candidate")):
        assert ctypes.sizeof(cls) == c[name]["size"], name
        py = [(f, getattr(cls, f).offset, getattr(cls, f).size) for f, _ in cls._fields_]
        assert py == [tuple(f) for f in c[name]["fields"]], name


def test_trace_formats_match_the_c_ones():
    """trace.py reads the records src/core/trace.h writes: the header and
    record formats have the C sizes and fields at the C offsets."""
    c = c_layouts()["structs"]
    for fmt, name in ((ctrace.HEADER, "tdax_trace_header"), (ctrace.RECORD, "tdax_trace_rec")):
        assert fmt.size == c[name]["size"], name
        assert format_fields(fmt.format) == [(off, size) for _, off, size in c[name]["fields"]], name


def test_simulator_constants_match_the_c_ones():
    k = c_layouts()["consts"]
    assert (ctrack.KEEP, ctrack.UPGRADE, ctrack.DOWNGRADE) == \
        (k["TDAX_KEEP"], k["TDAX_UPGRADE"], k["TDAX_DOWNGRADE"])
    assert (ctrack.NONE, ctrack.TO_UPGRADE, ctrack.UPGRADING, ctrack.UPGRADED, ctrack.TO_DOWNGRADE,
            ctrack.DOWNGRADING) == tuple(k["TDAX_R_" + s] for s in (
                "NONE", "TO_UPGRADE", "UPGRADING", "UPGRADED", "TO_DOWNGRADE", "DOWNGRADING"))
    assert len(ctrack.Range().wr) == len(ctrack.Range().wb) == k["TDAX_WIN_BUCKETS"]
    assert len(ctrack.Window().b) == k["TDAX_WIN_BUCKETS"]
    assert (ctrack.KEEP_PCT, ctrack.APPEND_HOLD_NS, ctrack.RECORD_BYTES, ctrack.UNIT_SHIFT) == \
        (k["TDAX_SELECT_KEEP_PCT"], k["TDAX_SELECT_APPEND_HOLD_NS"], k["TDAX_REC_HEADER_BYTES"],
         k["TDAX_PROFILE_UNIT_SHIFT"])
    assert csim.REC == k["TDAX_REC_HEADER_BYTES"]
    assert (ctrace.WRITE, ctrace.SYNC, ctrace.OPEN, ctrace.META, ctrace.NAME) == tuple(
        k["TDAX_TR_" + s] for s in ("WRITE", "SYNC", "OPEN", "META", "NAME"))
    assert (ctrace.CREATE, ctrace.REAL) == (k["TDAX_TRF_CREATE"], k["TDAX_TRF_REAL"])
    assert ctrace.KERNEL_ONLY == {k["TDAX_FB_MMAP"], k["TDAX_FB_STDIO"]}
    assert ctrace.METADATA == k["TDAX_FB_METADATA"]
    assert k["TDAX_TRACE_VERSION"] == 1 and c_layouts()["trace_magic"] == "TDAXTRC1"


def test_a_demotion_that_went_well_is_no_event_of_the_trace(dev, diskdir):
    """A trace recorded in bypass mode (an append log, every write synced,
    demoted again and again -- a SEEK_DATA is the kernel's to answer): a
    demotion that wrote the file's dirty blocks in changes nothing its next
    sync depends on, so the trace has no "meta" event (which tells a replay
    the next sync is real)."""
    trace, f = diskdir / "b.bin", diskdir / "log"
    code = ("import os, sys, time\nfd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)\n"
            "for i in range(3000):\n    os.write(fd, b'x' * 200)\n    os.fdatasync(fd)\n"
            "    if i % 100 == 99:\n        os.lseek(fd, 0, os.SEEK_DATA); time.sleep(0.02)\n")
    env = dict(TDAX_ENV, TDAX_MODE="bypass")
    run(TDAX, "run", "--device", dev, "--trace", trace, "--", PY, "-c", code, f, env=env, check=0)
    c = info(dev)["counters"]
    assert c["promotions"] >= 2 and c["demoted_seen"] >= 2, c
    kinds = [e.kind for e in ctrace.Trace(trace).events]
    assert kinds.count(ctrace.SYNC) == 3000 and ctrace.META not in kinds


def test_the_selection_and_the_write_back_age_are_set_from_the_command_line(tmp_path):
    """tdax sim --selection (the runtime's TDAX_BYPASS_* settings) and
    --wb-age-ms (TDAX_WB_AGE_MS): with a share too small for the hot log's
    footprint, the log is promoted while its profile is young (a few writes
    in the window) and dropped once the window fills -- it defers next to
    nothing; a shorter write-back age demotes more often; a bad setting is
    said, with the keys there are."""
    trace = hot_and_cold(tmp_path / "hc.bin")

    def sim(*more):
        return json.loads(run(TDAX, "sim", trace, "--policy", "bypass", "--json", *more, check=0).stdout)
    base = sim()
    assert base["promotions"] >= 1 and base["deferred_writes"] > 0, base
    # 1 % of 1.2 MB: less than its append reservation once a quarter of its
    # window has been seen
    small = sim("--selection", "share_pct=1")
    assert small["demotions_unselected"] >= 1 and small["deferred_fraction"] < 0.1, small
    assert base["deferred_fraction"] > 0.9, base
    quick = sim("--wb-age-ms", "100")  # checkpoints more often, demotes no more often
    assert quick["checkpoints"] > base["checkpoints"] and quick["demotions"] == base["demotions"], (quick, base)
    assert sim("--selection", "window_ms=2000", "floor=0")["promotions"] >= 1
    bad = run(TDAX, "sim", trace, "--policy", "bypass", "--selection", "share=5", check=None)
    assert bad.returncode != 0 and "share_pct, floor, window_ms" in bad.stderr, bad.stderr
    bad = run(TDAX, "sim", trace, "--policy", "bypass", "--selection", "share_pct=0", check=None)
    assert bad.returncode != 0 and "share_pct is 1..100" in bad.stderr, bad.stderr
