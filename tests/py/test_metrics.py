"""tdax metrics (issue #22): the device's counters and gauges in the
Prometheus text format, read back with prometheus_client's own parser."""
import json
import os
import socket
import subprocess
import urllib.error
import urllib.request

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
        if name.startswith("fallback_") or "_sync_ns_" in name:  # (the histograms: below)
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


def test_sync_latency_histograms_count_one_sync_in_16_by_its_answer(dev, diskdir):
    """Lightweight syncs (policy always) and real ones (policy never), each
    thread timing every 16th: cumulative buckets, counts and sums that agree
    with the device's counters and with tdax status."""
    code = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(320):
    os.write(fd, b"x" * 128); os.fdatasync(fd)
"""
    tdax_run(dev, code, diskdir / "light", policy="always")
    tdax_run(dev, code, diskdir / "real", policy="never")
    c = info(dev)["counters"]
    assert c["light_syncs"] >= 300 and c["real_syncs"] >= 300, c
    (h,) = [f for f in text_string_to_metric_families(run(TDAX, "metrics", "--device", dev, check=0).stdout)
            if f.name == "tdax_sync_duration_seconds"]
    assert h.type == "histogram"
    for kind, timed in (("light", c["light_syncs"]), ("real", c["real_syncs"])):
        buckets = [s for s in h.samples if s.name.endswith("_bucket") and s.labels["kind"] == kind]
        values = [s.value for s in buckets]
        assert values == sorted(values) and buckets[-1].labels["le"] == "+Inf", buckets
        (count,) = [s.value for s in h.samples if s.name.endswith("_count") and s.labels["kind"] == kind]
        (total,) = [s.value for s in h.samples if s.name.endswith("_sum") and s.labels["kind"] == kind]
        # Every 16th of each process's syncs (and of its fsyncs of nothing else).
        assert count == values[-1] and timed // 16 - 2 <= count <= timed // 16 + 2, (kind, count, timed)
        assert sum(c[f"{kind}_sync_ns_le_{b}"] for b in (256, 1024, 4096, 16384, 65536, 262144, 1048576,
                                                         4194304, 16777216, "inf")) == count
        assert total > 0 and abs(total * 1e9 - c[f"{kind}_sync_ns_sum"]) < 1000
    # A real sync waits for the disk; a lightweight one does not.
    assert c["real_sync_ns_sum"] / (c["real_syncs"] // 16) > c["light_sync_ns_sum"] / (c["light_syncs"] // 16)
    text = run(TDAX, "status", "--device", dev, check=0).stdout
    assert "sync latency (one sync in 16 timed): lightweight median <=" in text and "real median <=" in text


def test_metrics_of_a_missing_device_fail_with_a_message(device):
    p = run(TDAX, "metrics", "--device", device)
    assert p.returncode == 1 and device in p.stderr and p.stdout == ""


def test_the_exporter_serves_the_metrics_over_http_on_loopback(dev, diskdir):
    """tdax exporter: a scrape gets what tdax metrics prints (live: a scrape
    after more syncs sees them), on loopback by default; other paths and
    methods are refused; a client that stalls holds the next scrape up for
    at most its timeout (5 s). Stopped by its PID."""
    p = subprocess.Popen([str(TDAX), "exporter", "--device", dev, "--listen", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = p.stdout.readline()
        assert first.startswith("tdax exporter: serving http://127.0.0.1:"), first
        url = first.split()[3]

        def scrape():
            with urllib.request.urlopen(url, timeout=15) as r:
                assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                return {f.name: f for f in text_string_to_metric_families(r.read().decode())}

        before = scrape()
        assert set(before) == set(families(dev))
        tdax_run(dev, SYNCED, diskdir, policy="thesis")
        after = scrape()
        assert after["tdax_light_syncs"].samples[0].value == info(dev)["counters"]["light_syncs"] >= 350
        assert after["tdax_light_syncs"].samples[0].value > before["tdax_light_syncs"].samples[0].value
        for path, code in (("/", 404), ("/metricsx", 404)):
            try:
                urllib.request.urlopen(url.replace("/metrics", path), timeout=15)
                raise AssertionError(f"{path} answered")
            except urllib.error.HTTPError as e:
                assert e.code == code
        try:
            urllib.request.urlopen(urllib.request.Request(url, data=b"x", method="POST"), timeout=15)
            raise AssertionError("POST answered")
        except urllib.error.HTTPError as e:
            assert e.code == 405
        host, port = url.split("/")[2].split(":")
        with socket.create_connection((host, int(port))):  # says nothing
            assert scrape()["tdax_light_syncs"].samples[0].value >= 350
    finally:
        p.terminate()
        p.wait(timeout=10)
    usage = run(TDAX, "exporter", "--device", dev, "--listen", "localhost")
    assert usage.returncode == 2 and "is not IPV4ADDR:PORT" in usage.stderr


def test_counters_stay_exact_across_threads_that_come_and_go_and_a_fork(device, diskdir):
    """The process counts per thread (state.h: a slot each, 32, summed when
    flushed, taken over from a thread that is gone; a thread that finds
    none counts in the process's shared counters). 3 waves of 40 threads
    (more than there are slots: some count shared, and later waves take
    over the slots of earlier ones), then a fork whose parent and child
    sync on: every light sync is counted once, none lost or counted
    twice -- a slot given to two live threads, or a child that added its
    parent's counts again, would show."""
    code = r"""
import os, sys, threading
d = sys.argv[1]
barrier = threading.Barrier(40)
def worker(w, t):
    fd = os.open(os.path.join(d, "w%d-%d" % (w, t)), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    os.fdatasync(fd)  # (policy always registers a file at its first sync: every write counts)
    barrier.wait()  # all 40 alive at once
    for i in range(25):
        os.write(fd, b"x" * 64); os.fdatasync(fd)
    os.close(fd)
for w in range(3):
    ts = [threading.Thread(target=worker, args=(w, t)) for t in range(40)]
    for t in ts: t.start()
    for t in ts: t.join()
fd = os.open(os.path.join(d, "forked"), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
os.fdatasync(fd)
pid = os.fork()
for i in range(100):
    os.write(fd, b"y" * 64); os.fdatasync(fd)
if pid == 0:
    sys.exit(0)  # (not os._exit: a process counts into the device at its exit)
os.waitpid(pid, 0)
"""
    # Room for every file (on 64 MiB, with the file table full, one write in
    # a run or two of five was counted both logged and not: not the slots').
    run(TDAX, "device", "create", "--device", device, "--size", "512M", check=0)
    tdax_run(device, code, diskdir, policy="always")
    c = info(device)["counters"]
    assert c["light_syncs"] + c["real_syncs"] == 3 * 40 * 26 + 1 + 2 * 100, (c["light_syncs"], c["real_syncs"], c["logged_writes"], c["unlogged_writes"])
    assert c["logged_writes"] + c["unlogged_writes"] == 3 * 40 * 25 + 2 * 100, (c["light_syncs"], c["real_syncs"], c["logged_writes"], c["unlogged_writes"])


def test_status_json_is_unicode_whatever_the_file_names(dev, diskdir):
    """A file name is bytes: those that are not UTF-8 come out of `tdax
    status --json` as Python's surrogateescape (U+DC80..U+DCFF), so the
    output is valid JSON in UTF-8 and os.fsencode gives the name back; a
    name in UTF-8 comes out as it is."""
    names = [b"caf\xc3\xa9", b"bad-\xff\xfe", b"half-\xe2\x82", b"ctl\x01\"q\\"]
    code = r"""
import os, sys
for name in sys.argv[2:]:
    fd = os.open(os.path.join(os.fsencode(sys.argv[1]), os.fsencode(name)), os.O_RDWR | os.O_CREAT, 0o644)
    for i in range(3):
        os.write(fd, b"x"); os.fdatasync(fd)
"""
    tdax_run(dev, code, diskdir, *[os.fsdecode(n) for n in names])
    out = subprocess.run([str(TDAX), "status", "--device", dev, "--json"], capture_output=True, check=True).stdout
    paths = {os.fsencode(f["path"]) for f in json.loads(out.decode("utf-8"))["files"]}
    assert paths == {os.fsencode(diskdir) + b"/" + n for n in names}, paths
    assert "café" in out.decode("utf-8")
