"""Traces and the policy simulator: the simulator, fed a trace of a real run,
must reproduce that run's own counters."""
import ctypes
import json
import re
import struct
import sys

from conftest import BUILD, PY, ROOT, TDAX, TDAX_ENV, info, run

sys.path.insert(0, str(ROOT / "bench"))
from tdaxsim import ctrack, trace as ctrace  # noqa: E402

SQLITE_TX = str(TDAX.parents[2] / "bench" / "sqlite_tx.py")


def traced_sqlite(dev, diskdir, tx=3000):
    trace = diskdir / "t.bin"
    env = dict(TDAX_ENV)
    del env["TDAX_WB_AGE_MS"]  # the default background write-back, as in production
    run(TDAX, "run", "--device", dev, "--trace", trace, "--", PY, SQLITE_TX, diskdir / "d.db",
        "--tx", tx, env=env, check=0)
    return trace


def close(a, b, pct=5, slack=2):
    return abs(a - b) <= max(slack, pct / 100 * max(a, b))


def test_simulator_reproduces_the_runs_counters(dev, diskdir):
    trace = traced_sqlite(dev, diskdir)
    c = info(dev)["counters"]
    r = json.loads(run(TDAX, "sim", trace, "--policy", "thesis", "--json", check=0).stdout)
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
    bad = diskdir / "bad.bin"
    bad.write_bytes(b"x" * 100)
    p = run(TDAX, "trace", "info", bad)
    assert p.returncode != 0 and "not a tdax trace" in p.stderr


def test_all_policies_and_a_sweep(dev, diskdir):
    trace = traced_sqlite(dev, diskdir, tx=1000)
    rs = json.loads(run(TDAX, "sim", trace, "--policy", "all", "--json", check=0).stdout)
    by = {r["policy"]: r for r in rs}
    assert set(by) == {"thesis", "always", "never", "fsync-streak", "bandwidth", "adaptive"}
    # never: only syncs with nothing new since the last real sync are light
    assert by["never"]["light_fraction"] < 0.01 and by["never"]["upgrades"] == 0
    assert by["always"]["light_fraction"] >= by["thesis"]["light_fraction"] > 0.9
    assert by["thesis"]["est_speedup"] > 5 and by["never"]["est_speedup"] == 1.0
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
    run(TDAX, "run", "--device", dev, "--trace", trace, "--", PY, SQLITE_TX, diskdir / "d.db", "--journal",
        "delete", "--tx", 500, env=TDAX_ENV, check=0)
    c = info(dev)["counters"]
    rs = {r["policy"]: r for r in json.loads(run(TDAX, "sim", trace, "--policy", "all", "--json",
                                                     check=0).stdout)}
    th, ad = rs["thesis"], rs["adaptive"]
    assert close(th["real_syncs"], c["real_syncs"]) and th["light_fraction"] < 0.5, (th, c)
    assert ad["light_fraction"] > 0.9 and ad["light_fraction"] >= th["light_fraction"] + 0.4, ad
    assert ad["upgrades"] >= 1 and ad["downgrade_after_ms"] is None, ad


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
    (src/policy/track.h): same size, same fields at the same offsets."""
    c = c_layouts()["structs"]
    for cls, name in ((ctrack.Tunables, "tdax_tunables"), (ctrack.Range, "tdax_range_track"),
                      (ctrack.Legacy, "tdax_track_legacy")):
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
    assert (ctrace.WRITE, ctrace.SYNC, ctrace.OPEN, ctrace.META, ctrace.NAME) == tuple(
        k["TDAX_TR_" + s] for s in ("WRITE", "SYNC", "OPEN", "META", "NAME"))
    assert (ctrace.CREATE, ctrace.REAL) == (k["TDAX_TRF_CREATE"], k["TDAX_TRF_REAL"])
    assert ctrace.KERNEL_ONLY == {k["TDAX_FB_MMAP"], k["TDAX_FB_STDIO"]}
    assert ctrace.METADATA == k["TDAX_FB_METADATA"]
    assert k["TDAX_TRACE_VERSION"] == 1 and c_layouts()["trace_magic"] == "TDAXTRC1"
