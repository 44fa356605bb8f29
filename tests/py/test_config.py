"""The configuration file (issue #22, src/cli/config.h): `tdax config
check` points at the wrong line; the file's settings reach the commands
and the preload library below the command line and the environment; its
tunables are set on the device; [paths] rules decide which files are
managed; `tdax recover --configured` recovers every region it names."""
import json
import os

import pytest

from conftest import PY, TDAX, TDAX_ENV, run


def conf(tmp_path, text, name="tdax.conf"):
    p = tmp_path / name
    p.write_text(text)
    return p


def under(config, *args, env=None, check=None):
    """tdax ARGS with TDAX_CONFIG naming the file (the rest of the test
    environment as conftest.run makes it)."""
    return run(TDAX, *args, env={**TDAX_ENV, "TDAX_CONFIG": str(config), **(env or {})}, check=check)


GOOD = """# a comment
[device]
path = {device}
boot_recover = {other}
allow_shared = no
[run]
mode = coherent
policy = adaptive   ; inline comment
warnings = verbose
[writeback]
bytes = 16M
interval_ms = 20
age_ms = 500
high_pct = 80
[tunables]
upgrade_threshold = 50
downgrade_threshold = 20
[paths]
include = /var/lib/redis/*
include = /srv/*
exclude = /srv/tmp/*
"""


def test_check_says_what_a_good_file_sets(tmp_path):
    c = conf(tmp_path, GOOD.format(device="/dev/shm/a", other="/dev/shm/b"))
    p = run(TDAX, "config", "check", c, check=0)
    lines = p.stdout.splitlines()
    assert lines[0] == f"{c}: ok"
    assert set(lines[1:]) == {
        "  TDAX_DEVICE=/dev/shm/a", "  TDAX_MODE=coherent", "  TDAX_POLICY=adaptive", "  TDAX_VERBOSE=1",
        "  TDAX_WB_BYTES=16M", "  TDAX_WB_INTERVAL_MS=20", "  TDAX_ALLOW_SHARED=0",
        "  TDAX_WB_AGE_MS=500", "  TDAX_WB_HIGH_PCT=80",
        "  TDAX_INCLUDE=/var/lib/redis/*:/srv/*", "  TDAX_EXCLUDE=/srv/tmp/*",
        "  tunable upgrade_threshold=50   (set on the device by tdax run)",
        "  tunable downgrade_threshold=20   (set on the device by tdax run)",
        "  recovered at boot: /dev/shm/a", "  recovered at boot: /dev/shm/b"}, lines


@pytest.mark.parametrize("text,line,says", [
    ("[run]\npolicy = fast\n", 2, "[run] policy: not one of: adaptive thesis always never ('fast')"),
    ("[run]\npolicy = thesis\nmode = direct\n", 3, "[run] mode: not one of: coherent bypass ('direct')"),
    ("[run]\npolicy = thesis\npolicy = never\n", 3, "[run] policy is given twice"),
    ("[run]\nintercept = ptrace\n", 2, "[run] intercept: not one of: auto libc rewrite syscall ('ptrace')"),
    ("\n\n[run]\nno equals sign here\n", 4, "not 'KEY = VALUE'"),
    ("policy = thesis\n", 1, "'policy' is outside any [section]"),
    ("[runn]\npolicy = thesis\n", 2, "unknown setting [runn] policy"),
    ("[writeback]\nhigh_pct = 0\n", 2, "[writeback] high_pct: not a whole number in 1..100"),
    ("[writeback]\nbytes = lots\n", 2, "[writeback] bytes: not a size"),
    ("[device]\npath = relative/region\n", 2, "[device] path: not an absolute path"),
    ("[device]\nallow_shared = maybe\n", 2, "[device] allow_shared: not yes or no"),
    ("[paths]\ninclude = *.log\n", 2, "[paths] include: a pattern is an absolute path"),
    ("[tunables]\nupgrade = 5\n", 2, "unknown tunable 'upgrade'"),
    ("[tunables]\ngranularity_order = x\n", 2, "'x' is not a whole number"),
])
def test_check_points_at_the_wrong_line(tmp_path, text, line, says):
    c = conf(tmp_path, text)
    p = run(TDAX, "config", "check", c)
    assert p.returncode == 1 and p.stdout == "", p
    assert p.stderr.startswith(f"tdax: {c}:{line}: "), p.stderr
    assert says in p.stderr, p.stderr


def test_the_tunables_are_checked_as_a_set(tmp_path):
    c = conf(tmp_path, "[tunables]\nupgrade_threshold = 10\ndowngrade_threshold = 20\n")
    p = run(TDAX, "config", "check", c)
    assert p.returncode == 1
    assert "[tunables]" in p.stderr and "downgrade_threshold must not exceed" in p.stderr, p.stderr


def test_a_broken_file_stops_every_command_and_a_missing_named_one_too(tmp_path, device):
    c = conf(tmp_path, "[run]\npolicy = fast\n")
    p = under(c, "run", "--device", device, "--", "true")
    assert p.returncode == 1 and f"{c}:2:" in p.stderr, p.stderr
    p = under(tmp_path / "absent.conf", "status", "--device", device)
    assert p.returncode == 1 and "absent.conf: cannot read the configuration file" in p.stderr
    # No file named and none at the default place: nothing is read.
    assert run(TDAX, "config", "show", check=0).stdout.startswith("no configuration file")


def test_command_line_beats_environment_beats_file(tmp_path, dev):
    """What `tdax run` hands the program: the file's device, policy and
    write-back tunables where nothing else says; TDAX_POLICY over the
    file; --policy over both."""
    c = conf(tmp_path, GOOD.format(device=dev, other="/dev/shm/unused"))
    show = [PY, "-c", "import os, json; print(json.dumps({k: v for k, v in os.environ.items() "
                      "if k.startswith('TDAX_')}))"]

    def seen(*opts, env=None):
        p = under(c, "run", *opts, "--", *show, env=env, check=0)
        return json.loads(p.stdout.splitlines()[-1])

    got = seen()
    assert got["TDAX_DEVICE"] == dev and got["TDAX_POLICY"] == "adaptive", got
    assert got["TDAX_WB_BYTES"] == "16M" and got["TDAX_INCLUDE"] == "/var/lib/redis/*:/srv/*", got
    assert "TDAX_VERBOSE" not in got  # TDAX_ENV is quiet: the environment's word wins
    assert seen(env={"TDAX_POLICY": "never"})["TDAX_POLICY"] == "never"
    assert seen("--policy", "thesis", env={"TDAX_POLICY": "never"})["TDAX_POLICY"] == "thesis"
    # The file's device is the device of every command, below --device.
    s = json.loads(under(c, "status", "--json", check=0).stdout)
    assert s["device"] == dev, s


def test_tdax_run_sets_the_files_tunables_on_the_device(tmp_path, dev):
    c = conf(tmp_path, "[tunables]\nupgrade_threshold = 45\nwriteback_window_ms = 700\n")
    assert run(TDAX, "get", "upgrade_threshold", "--device", dev, check=0).stdout.strip() == "60"
    under(c, "run", "--device", dev, "--", "true", check=0)
    assert run(TDAX, "get", "upgrade_threshold", "--device", dev, check=0).stdout.strip() == "45"
    assert run(TDAX, "get", "writeback_window_ms", "--device", dev, check=0).stdout.strip() == "700"


# Appends 30 x 100 B with a sync after each to every file named.
SYNCS = r"""
import os, sys
for path in sys.argv[1:]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for i in range(30):
        os.write(fd, b"r" * 100)
        os.fdatasync(fd)
    os.close(fd)
"""


def test_path_rules_decide_which_files_are_managed(tmp_path, dev, diskdir):
    """Under policy always every managed file's syncs are light: a file the
    rules leave out has only real syncs, which tdax does not even see."""
    (diskdir / "db").mkdir()
    (diskdir / "db" / "tmp").mkdir()
    (diskdir / "other").mkdir()
    c = conf(tmp_path, f"[run]\npolicy = always\n[paths]\ninclude = {diskdir}/db/*\n"
                       f"exclude = {diskdir}/db/tmp/*\n")

    def light_syncs(path):
        before = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
        under(c, "run", "--device", dev, "--", PY, "-c", SYNCS, path, check=0)
        after = json.loads(run(TDAX, "status", "--device", dev, "--json", check=0).stdout)
        return after["counters"]["light_syncs"] - before["counters"]["light_syncs"]

    assert light_syncs(diskdir / "db" / "wal") == 30
    assert light_syncs(diskdir / "db" / "tmp" / "scratch") == 0
    assert light_syncs(diskdir / "other" / "log") == 0
    for f in ("db/wal", "db/tmp/scratch", "other/log"):
        assert (diskdir / f).read_bytes() == b"r" * 3000


def test_recover_configured_recovers_every_region_and_reports_the_worst(tmp_path, device):
    other = device + "-second"
    try:
        for d in (device, other):
            run(TDAX, "device", "create", "--device", d, "--size", "16M", check=0)
        c = conf(tmp_path, f"[device]\npath = {device}\nboot_recover = {other}\n")
        p = under(c, "recover", "--configured", "--json", check=0)
        reports = [json.loads(line) for line in p.stdout.splitlines()]
        assert [r["device"] for r in reports] == [device, other], p.stdout
        # A region that is not there fails the unit, after the others were done.
        c = conf(tmp_path, f"[device]\npath = {device}\nboot_recover = /dev/shm/tdax-absent-region\n"
                           f"boot_recover = {other}\n")
        p = under(c, "recover", "--configured", "--json")
        assert p.returncode == 1, p
        assert "tdax-absent-region" in p.stderr
        assert [json.loads(line)["device"] for line in p.stdout.splitlines()] == [device, other]
        # Nothing configured: nothing to do, said so.
        c = conf(tmp_path, "[run]\npolicy = thesis\n")
        p = under(c, "recover", "--configured", check=0)
        assert "names no region" in p.stderr
    finally:
        if os.path.exists(other):
            os.unlink(other)
