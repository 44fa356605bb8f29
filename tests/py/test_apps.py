"""Real applications under tdax: SQLite, Redis, RocksDB, PostgreSQL. Each
checks the application's own integrity tool and, where the workload can
say what it acknowledged, that nothing acknowledged is lost after a
simulated power cut."""
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PY, TDAX, TDAX_ENV, info, run

HERE = Path(__file__).resolve().parent
SQLITE_TX = HERE.parents[1] / "bench" / "sqlite_tx.py"


def start_under_tdax(device, argv, stdout=subprocess.PIPE, user=None, env=None):
    e = dict(os.environ, **TDAX_ENV, **(env or {}))
    cmd = [str(TDAX), "run", "--device", device, "--policy", "always", "--"] + [str(a) for a in argv]
    if user:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"] + cmd
    return subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, env=e)


def cut_power(device, paths):
    """Every file tdax really synced falls back to its durable view (files it
    never synced, such as ones written to a temporary name and renamed, are
    left as they are); then recovery replays the device, as after a reboot."""
    for p in paths:
        shadow = Path(str(p) + ".tdax-durable")
        if p.exists() and shadow.exists():
            p.write_bytes(shadow.read_bytes())
    for s in list({Path(str(p) + ".tdax-durable") for p in paths}):
        s.unlink(missing_ok=True)
    return run(TDAX, "recover", "--device", device, "--power-failure", check=0)


def data_files(d):
    return [p for p in Path(d).rglob("*") if p.is_file() and not p.name.endswith(".tdax-durable")]


# ---- SQLite ----------------------------------------------------------------

@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_sqlite_crash_and_power_cut_keep_every_commit(dev, diskdir, journal):
    db, oracle = diskdir / "t.db", diskdir / "oracle"
    p = start_under_tdax(dev, [PY, SQLITE_TX, db, "--journal", journal, "--sync", "full",
                               "--seconds", "30", "--oracle", oracle])
    deadline = time.time() + 20
    while time.time() < deadline and (not oracle.exists() or oracle.stat().st_size < 2000):
        time.sleep(0.05)
    time.sleep(0.2)
    p.send_signal(signal.SIGKILL)
    p.wait()
    acked = [int(x) for x in oracle.read_text().split()]
    assert len(acked) > 300
    c = info(dev)["counters"]
    assert c["light_syncs"] > 100
    cut_power(dev, data_files(diskdir))
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    have = {r[0] for r in con.execute("SELECT id FROM tx")}
    missing = [a for a in acked if a not in have]
    assert not missing, f"{len(missing)} acknowledged transactions lost, first {missing[:5]}"


# ---- Redis -----------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resp(sock, *args):
    """Send one command, read one simple reply line."""
    msg = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
    sock.sendall(msg)
    buf = b""
    while not buf.endswith(b"\r\n"):
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("redis closed the connection")
        buf += chunk
    return buf


def connect(port, timeout=10):
    deadline = time.time() + timeout
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def redis_args(d, port):
    return ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d),
            "--appendonly", "yes", "--appendfsync", "always", "--save", "",
            "--auto-aof-rewrite-percentage", "0", "--daemonize", "no", "--protected-mode", "yes"]


def test_redis_aof_always_keeps_every_acknowledged_set(dev, diskdir):
    port = free_port()
    srv = start_under_tdax(dev, redis_args(diskdir, port), stdout=subprocess.DEVNULL)
    try:
        s = connect(port)
        acked = []
        for i in range(1500):
            assert resp(s, b"SET", b"key:%d" % i, b"value-%d" % i) == b"+OK\r\n"
            acked.append(i)
        s.close()
        time.sleep(0.1)
    finally:
        srv.send_signal(signal.SIGKILL)
        srv.wait()
    assert info(dev)["counters"]["light_syncs"] >= 1400
    cut_power(dev, data_files(diskdir))
    aofs = sorted((diskdir / "appendonlydir").glob("*.incr.aof"))
    assert aofs
    chk = subprocess.run(["redis-check-aof", str(aofs[-1])], capture_output=True, text=True)
    assert "is valid" in chk.stdout, chk.stdout + chk.stderr
    port = free_port()
    plain = subprocess.Popen(redis_args(diskdir, port), stdout=subprocess.DEVNULL)
    try:
        s = connect(port)
        for i in acked:
            assert resp(s, b"GET", b"key:%d" % i).startswith(b"$"), f"key:{i} lost"
        s.close()
    finally:
        plain.terminate()
        plain.wait()


# ---- RocksDB ---------------------------------------------------------------

def test_rocksdb_fillsync_then_ldb_reads_every_key(dev, diskdir):
    db = diskdir / "rocks"
    # fillsync writes num/1000 random keys with sync=true; fillseq with
    # --sync then writes 3000 known keys, every one synced.
    for bench in (["--benchmarks=fillsync", "--num=100000"],
                  ["--benchmarks=fillseq", "--sync=true", "--num=3000", "--use_existing_db=0"]):
        p = start_under_tdax(dev, ["db_bench", *bench, f"--db={db}", "--compression_type=none",
                                   "--threads=1"])
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert info(dev)["counters"]["light_syncs"] >= 2900
    scan = subprocess.run(["ldb", f"--db={db}", "--hex", "scan"], capture_output=True, text=True)
    assert scan.returncode == 0, scan.stderr
    assert len(scan.stdout.splitlines()) == 3000


# ---- PostgreSQL ------------------------------------------------------------

PGBIN = Path("/usr/lib/postgresql/15/bin")


def test_postgres_pgbench_under_tdax(device, diskdir):
    run(TDAX, "device", "create", "--device", device, "--size", "256M", "--owner", "postgres",
        check=0)
    data = diskdir / "pg"
    data.mkdir()
    shutil.chown(data, "postgres", "postgres")
    run(PGBIN / "initdb", "-D", data, "--data-checksums", "-A", "trust", user="postgres",
        check=0)
    port = free_port()
    srv = start_under_tdax(device, [PGBIN / "postgres", "-D", data, "-p", port, "-k", data,
                                    "-c", "listen_addresses=127.0.0.1",
                                    "-c", "wal_sync_method=fdatasync"],
                           stdout=subprocess.DEVNULL, user="postgres")
    try:
        conn = ["-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]
        for _ in range(100):
            if run(PGBIN / "pg_isready", *conn).returncode == 0:
                break
            time.sleep(0.1)
        run(PGBIN / "pgbench", *conn, "-i", "-s", "1", "postgres", check=0)
        bench = run(PGBIN / "pgbench", *conn, "-c", "2", "-t", "300", "postgres", check=0)
        assert "number of failed transactions: 0" in bench.stdout
        q = run("psql", *conn, "-tAc", "SELECT count(*) FROM pgbench_history", "postgres", check=0)
        assert int(q.stdout) == 600
        amcheck = run(PGBIN / "pg_amcheck", *conn, "--install-missing", "postgres")
        assert amcheck.returncode == 0, amcheck.stdout + amcheck.stderr
    finally:
        srv.send_signal(signal.SIGINT)  # fast shutdown of the postmaster, by its pid
        srv.wait(timeout=60)
    assert info(device)["counters"]["light_syncs"] >= 500
