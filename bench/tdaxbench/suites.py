"""suites -- the workloads of `tdax bench`, one function per suite.

A suite is a list of Configs. A config with sync=True is run without tdax
('default') and under tdax with each requested policy; its `ref` names the
config with syncing switched off (run without tdax), the ceiling tdax is
compared against. Every run starts from fresh files on the disk.
"""
import base64
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from . import env
from .ycsb import YCSB_WORKLOADS, run_ycsb

PY = sys.executable
SQLITE_TX = str(env.ROOT / "bench" / "sqlite_tx.py")


@dataclass
class Config:
    name: str
    run: Callable  # run(mode, device, opts) -> float
    unit: str
    sync: bool = True           # False: a sync-off reference, run without tdax only
    ref: Optional[str] = None   # the sync-off config to compare with


def out_of(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd[:8]))} failed ({p.returncode}): {p.stderr[-800:]}")
    if "cannot be preloaded" in p.stderr:
        # The dynamic linker could not load libtdax.so (a build replacing
        # it at that moment, say) and ran the workload without tdax: its
        # figure would pass for tdax's.
        raise RuntimeError(f"{' '.join(map(str, cmd[:8]))} ran without tdax: {p.stderr[-800:]}")
    return p.stdout


# ---- redis ------------------------------------------------------------------

def redis_server_argv(d, port, fsync):
    return ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d),
            "--appendonly", "yes", "--appendfsync", fsync, "--save", "",
            "--auto-aof-rewrite-percentage", "0", "--protected-mode", "yes", "--daemonize", "no"]


def redis_run(fsync, pipeline, clients):
    def run(mode, device, o):
        with env.scratch() as d:
            port = env.free_port()
            with env.server(env.tdax_prefix(mode, device) + redis_server_argv(d, port, fsync)):
                env.wait_port(port)
                # (As many round trips at every pipeline: its requests
                # times the pipeline.)
                out = out_of(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "set",
                              "-n", str(o.requests * pipeline), "-c", str(clients), "-P", str(pipeline),
                              "-r", "100000", "--csv", "-q"])
        return float(out.strip().splitlines()[-1].split(",")[1].strip('"'))
    return run


def redis(o):
    cfgs = []
    for p in (1, 10):
        for c in (1, 50):
            ref = f"no P{p} c{c}"
            for fs in ("always", "everysec"):
                cfgs.append(Config(f"{fs} P{p} c{c}", redis_run(fs, p, c), "req/s", ref=ref))
            cfgs.append(Config(ref, redis_run("no", p, c), "req/s", sync=False))
    return cfgs


# ---- postgres ---------------------------------------------------------------

def pg_run(settings):
    def run(mode, device, o):
        with env.scratch(owner="postgres") as d:
            data = d / "data"
            out_of(["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups",
                    str(env.PGBIN / "initdb"), "-D", str(data), "-A", "trust", "--no-sync"])
            port = env.free_port()
            argv = [str(env.PGBIN / "postgres"), "-D", str(data), "-p", str(port), "-k", str(d),
                    "-c", "listen_addresses=127.0.0.1"]
            for k, v in settings.items():
                argv += ["-c", f"{k}={v}"]
            conn = ["-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]
            with env.server(env.tdax_prefix(mode, device, user="postgres") + argv,
                            stop_signal=signal.SIGINT):
                for _ in range(300):  # the port opens before recovery is done
                    if subprocess.run([str(env.PGBIN / "pg_isready"), *conn],
                                      capture_output=True).returncode == 0:
                        break
                    time.sleep(0.1)
                out_of([str(env.PGBIN / "pgbench"), *conn, "-i", "-q", "-s", str(o.pg_scale), "postgres"])
                out = out_of([str(env.PGBIN / "pgbench"), *conn, "-c", str(o.pg_clients), "-j", "1",
                              "-T", str(o.pg_seconds), "postgres"])
        return float(re.search(r"tps = ([0-9.]+)", out).group(1))
    return run


def postgres(o):
    return [Config("wal_sync_method=fdatasync", pg_run({"wal_sync_method": "fdatasync"}), "tps",
                   ref="fsync=off"),
            Config("wal_sync_method=fsync", pg_run({"wal_sync_method": "fsync"}), "tps",
                   ref="fsync=off"),
            Config("fsync=off", pg_run({"fsync": "off"}), "tps", sync=False)]


# ---- rocksdb ----------------------------------------------------------------

def db_bench_run(*flags):
    def run(mode, device, o):
        with env.scratch() as d:
            out = out_of(env.tdax_prefix(mode, device) + [
                "db_bench", "--benchmarks=fillseq", f"--db={d}/db", f"--num={o.rocks_num}",
                "--compression_type=none", "--threads=1", "--disable_wal=false", *flags])
        return float(re.search(r"fillseq\s*:\s*[0-9.]+ micros/op ([0-9]+) ops/sec", out).group(1))
    return run


def rocksdb(o):
    # db_bench's own fillsync writes num/1000 keys; fillseq with sync=true
    # syncs every one of num writes, which is what "fillsync" measures.
    return [Config("fillsync (fdatasync)", db_bench_run("--sync=true"), "ops/s", ref="fillseq (async)"),
            Config("fillsync (use_fsync)", db_bench_run("--sync=true", "--use_fsync=true"), "ops/s",
                   ref="fillseq (async)"),
            Config("fillseq (async)", db_bench_run("--sync=false"), "ops/s", sync=False)]


# ---- sqlite -----------------------------------------------------------------

def sqlite_run(journal, sync):
    def run(mode, device, o):
        with env.scratch() as d:
            out = out_of(env.tdax_prefix(mode, device) + [
                PY, SQLITE_TX, str(d / "b.db"), "--journal", journal, "--sync", sync,
                "--seconds", str(o.seconds)])
        return json.loads(out)["tx_per_s"]
    return run


def sqlite(o):
    cfgs = []
    for j in ("wal", "delete"):
        for s in ("full", "normal"):
            cfgs.append(Config(f"{j} {s}", sqlite_run(j, s), "tx/s", ref=f"{j} off"))
        cfgs.append(Config(f"{j} off", sqlite_run(j, "off"), "tx/s", sync=False))
    return cfgs


# ---- lmdb -------------------------------------------------------------------

LMDB_TX = str(env.ROOT / "bench" / "lmdb_tx.py")


def lmdb_run(nosync):
    def run(mode, device, o):
        with env.scratch() as d:
            out = out_of(env.tdax_prefix(mode, device) + [
                "/usr/bin/python3", LMDB_TX, str(d), "--seconds", str(o.seconds)] +
                (["--nosync"] if nosync else []))
        return json.loads(out)["tx_per_s"]
    return run


def lmdb(o):
    return [Config("commit (sync)", lmdb_run(False), "tx/s", ref="commit (nosync)"),
            Config("commit (nosync)", lmdb_run(True), "tx/s", sync=False)]


# ---- fio --------------------------------------------------------------------

def fio_run(bs, append, fdatasync):
    def run(mode, device, o):
        with env.scratch() as d:
            args = ["fio", "--name=tdax", f"--filename={d}/f", "--ioengine=psync", f"--bs={bs}",
                    f"--fdatasync={1 if fdatasync else 0}", "--output-format=json",
                    f"--runtime={o.seconds}", "--time_based"]
            if append:
                args += ["--rw=write", "--file_append=1", "--size=1g"]
            else:
                args += ["--rw=randwrite", "--size=4m"]
            out = out_of(env.tdax_prefix(mode, device) + args)
        return json.loads(out[out.index("{"):])["jobs"][0]["write"]["iops"]
    return run


def fio(o):
    cfgs = []
    for bs in ("128", "4k"):
        for append in (True, False):
            kind = "append" if append else "overwrite"
            ref = f"{bs} B {kind}, no sync".replace("4k B", "4 KiB")
            name = f"{bs} B {kind} + fdatasync".replace("4k B", "4 KiB")
            cfgs.append(Config(name, fio_run(bs, append, True), "IOPS", ref=ref))
            cfgs.append(Config(ref, fio_run(bs, append, False), "IOPS", sync=False))
    return cfgs


# ---- ycsb -------------------------------------------------------------------

def ycsb_run(workload, fsync):
    def run(mode, device, o):
        with env.scratch() as d:
            port = env.free_port()
            with env.server(env.tdax_prefix(mode, device) + redis_server_argv(d, port, fsync)):
                env.wait_port(port)
                return run_ycsb(port, workload, o.ycsb_records, o.ycsb_ops, seed=o.seed)
    return run


def ycsb(o):
    cfgs = []
    for w in YCSB_WORKLOADS:
        cfgs.append(Config(f"{w} always", ycsb_run(w, "always"), "ops/s", ref=f"{w} no"))
        cfgs.append(Config(f"{w} no", ycsb_run(w, "no"), "ops/s", sync=False))
    return cfgs


# ---- start-up -----------------------------------------------------------------

def startup_run(n):
    """A shell starting /bin/true n times: what every exec'd helper, script
    and build step pays for tdax (start.h: a process attaches only when it
    first writes a file, so these should pay nothing)."""
    def run(mode, device, o):
        t0 = time.perf_counter()
        out_of(env.tdax_prefix(mode, device) + ["sh", "-c", f"for i in $(seq {n}); do /bin/true; done"])
        return n / (time.perf_counter() - t0)
    return run


def startup(o):
    return [Config("exec /bin/true from sh", startup_run(100 if o.quick else 500), "execs/s")]


# ---- many files -----------------------------------------------------------------

SMALLFILES = str(env.ROOT / "build" / "bin" / "tdax-smallfiles")


def files_run(n, fsync):
    """Create, write 4 KiB, close and rename n files (bench/smallfiles.c);
    with fsync, dpkg's way, a sync before each close."""
    def run(mode, device, o):
        with env.scratch() as d:
            out = out_of(env.tdax_prefix(mode, device) + [SMALLFILES, str(d), "--count", str(n)] +
                         (["--fsync"] if fsync else []))
        return json.loads(out)["files_per_s"]
    return run


def files(o):
    n = 1000 if o.quick else 10000
    return [Config("create+write+rename + fsync", files_run(n // 4, True), "files/s",
                   ref="create+write+rename"),
            Config("create+write+rename", files_run(n, False), "files/s", sync=False)]


# ---- etcd -----------------------------------------------------------------------

def etcd_run(tmpfs):
    """etcd (a Go program: under tdax through --intercept auto, which rewrites its runtime's system-call
    function) taking sequential puts from one client over one
    keep-alive connection to its JSON gateway; each put waits for a WAL
    fdatasync. With tmpfs the data directory is in memory, where a sync
    costs nothing: the ceiling (etcd 3.4 cannot switch its syncs off)."""
    def run(mode, device, o):
        with env.scratch() as d:
            data = Path(tempfile.mkdtemp(prefix="tdax-etcd-", dir="/dev/shm")) if tmpfs else d / "etcd"
            cport, pport = env.free_port(), env.free_port()
            peer = f"http://127.0.0.1:{pport}"
            argv = ["etcd", "--name", "bench", "--data-dir", str(data),
                    "--listen-client-urls", f"http://127.0.0.1:{cport}",
                    "--advertise-client-urls", f"http://127.0.0.1:{cport}",
                    "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                    "--initial-cluster", f"bench={peer}", "--log-level", "error"]
            try:
                with env.server(env.tdax_prefix(mode, device) + argv):
                    env.wait_port(cport)
                    c = http.client.HTTPConnection("127.0.0.1", cport, timeout=30)
                    n = 200 if o.quick else 2000

                    def put(i):
                        body = json.dumps({"key": base64.b64encode(b"k%d" % (i % 1000)).decode(),
                                           "value": base64.b64encode(b"v" * 100).decode()})
                        c.request("POST", "/v3/kv/put", body, {"Content-Type": "application/json"})
                        r = c.getresponse()
                        if r.status != 200:
                            raise RuntimeError(f"etcd put: HTTP {r.status}: {r.read()[:200]!r}")
                        r.read()
                    for i in range(50):  # warm up (the leader, the gateway)
                        put(i)
                    t0 = time.perf_counter()
                    for i in range(n):
                        put(i)
                    return n / (time.perf_counter() - t0)
            finally:
                if tmpfs:
                    shutil.rmtree(data, ignore_errors=True)
    return run


def etcd(o):
    return [Config("put, 1 client", etcd_run(False), "puts/s", ref="put, 1 client, data on tmpfs"),
            Config("put, 1 client, data on tmpfs", etcd_run(True), "puts/s", sync=False)]


SUITES = {"redis": redis, "postgres": postgres, "rocksdb": rocksdb, "sqlite": sqlite, "lmdb": lmdb, "fio": fio,
          "ycsb": ycsb, "startup": startup, "files": files, "etcd": etcd}

# The reference results of shared/SPEC.md §4: (config, speedup over default,
# fraction of sync-off) as the thesis / Transparent DAX Mappings paper report.
REFERENCE = {
    "redis": [("always P1 c1", "7.29x", "~55 %"), ("always P10 c1", "4.62x", "~60 %")],
    "postgres": [("wal_sync_method=fdatasync", "2.53x", "67 %")],
    "rocksdb": [("fillsync (fdatasync)", "24.47x", "2.7 % of async fillseq")],
    "ycsb": [("A..F always (TDMs)", "geomean = fsync no (+0.6 %)", "~100 %")],
}
