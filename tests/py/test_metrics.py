"""tdax metrics (issue #22): the device's counters and gauges in the
Prometheus text format, read back with prometheus_client's own parser."""
from prometheus_client.parser import text_string_to_metric_families

from conftest import info, run, tdax_run, TDAX

# Two files synced in a stream, one with a name that needs escaping.
SYNCED = r"""
import os, sys
for name in ("wal", 'we"ird\\name\x01'):
    fd = os.open(os.path.join(sys.argv[1], name), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    for i in range(200):
        os.write(fd, b"x" * 128); os.fdatasync(fd)
"""


def families(dev):
    p = run(TDAX, "metrics", "--device", dev, check=0)
    return {f.name: f for f in text_string_to_metric_families(p.stdout)}


def test_metrics_parse_and_match_the_devices_counters(dev, diskdir):
    tdax_run(dev, SYNCED, diskdir, policy="thesis")
    counters = info(dev)["counters"]
    fams = families(dev)
    # Every counter of tdax status, under its own name (the parser drops _total).
    for name, value in counters.items():
        if name.startswith("fallback_"):
            continue
        (s,) = fams[f"tdax_{name}"].samples
        assert s.labels == {"device": dev} and s.value == value, (name, s)
    reasons = {s.labels["reason"]: s.value for s in fams["tdax_fallbacks"].samples}
    assert reasons == {k[len("fallback_"):]: v for k, v in counters.items() if k.startswith("fallback_")}
    assert fams["tdax_light_syncs"].type == "counter" and counters["light_syncs"] >= 350
    used = fams["tdax_log_used_bytes"].samples[0].value
    assert fams["tdax_log_used_bytes"].type == "gauge" and 0 < used <= fams["tdax_log_capacity_bytes"].samples[0].value
    assert fams["tdax_files_registered"].samples[0].value == info(dev)["files_registered"] == 2
    files = {s.labels["path"]: s.value for s in fams["tdax_file_upgraded_ranges"].samples}
    assert files == {str(diskdir / "wal"): 1, str(diskdir / 'we"ird\\name') + "\\x01": 1}, files
    assert fams["tdax_ranges_upgraded"].samples[0].value == 2


def test_metrics_of_a_missing_device_fail_with_a_message(device):
    p = run(TDAX, "metrics", "--device", device)
    assert p.returncode == 1 and device in p.stderr and p.stdout == ""
