"""workloads -- what the crash suite runs under tdax, each writing an oracle
of what it had acknowledged (a line per acknowledgement, written only after
the sync or commit returned) to a file outside the crash domain.

usage: workloads.py raw|sqlite-wal|sqlite-delete|redis|postgres DIR ORACLE [PORT]
"""
import base64
import http.client
import json
import os
import socket
import sqlite3
import struct
import sys
import time
import zlib

MAGIC = b"TDXO"
HDR = struct.Struct("<4sIQI")  # magic, payload length, sequence, crc32 of payload


def record(seq, rng_len):
    payload = (b"%08d" % seq) * (1 + rng_len)
    return HDR.pack(MAGIC, len(payload), seq, zlib.crc32(payload)) + payload


def open_oracle(path):
    """The oracle, made empty by crashtest.py, opened without O_CREAT: under
    tdax it is then a file found, not one created (no create record), so the
    replay after a cut -- which spares the oracle's disk and its page cache
    -- never empties it of lines the log did not hold (a full log)."""
    return os.open(path, os.O_WRONLY | os.O_APPEND)


def raw(d, oracle):
    """Several files, each with one writer path: O_APPEND write + fdatasync,
    pwrite + fsync, writev + fdatasync (every other record written
    through a duplicate of the descriptor made before the file's first
    stream of syncs; the original syncs), O_DSYNC writes, pwritev RWF_DSYNC;
    every 300 records the append log is rotated by rename, and every 200 the
    pwrite file is truncated to nothing and written again from its start
    (by ftruncate, truncate by name, or an open with O_TRUNC, in turn); and
    every 10 a scratch file is created, written and synced twice, and
    removed: if a power cut brings it back, it holds what was acknowledged."""
    o = open_oracle(oracle)
    files, dups = {}, {}

    def fd_of(name, flags):
        if name not in files:
            files[name] = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | flags, 0o644)
            os.fsync(files[name])
            dfd = os.open(d, os.O_RDONLY)
            os.fsync(dfd)  # the new name is durable before anything is acknowledged in it
            os.close(dfd)
            if name == "writev":
                dups[name] = os.dup(files[name])
        return files[name]
    offs = {}
    seq, gen = 0, 0
    while True:
        seq += 1
        rec = record(seq, seq % 7)
        kind = seq % 5
        name = ["append.%d" % gen, "pwrite", "writev", "dsync", "rwf"][kind]
        if kind == 0:
            fd = fd_of(name, os.O_APPEND)
            os.write(fd, rec)
            os.fdatasync(fd)
        elif kind == 1:
            fd = fd_of(name, 0)
            os.pwrite(fd, rec, offs.get(name, 0))
            os.fsync(fd)
        elif kind == 2:
            fd = fd_of(name, os.O_APPEND)
            os.writev(dups[name] if seq // 5 % 2 else fd, [rec[:10], rec[10:]])
            os.fdatasync(fd)  # the file's: what the duplicate wrote too
        elif kind == 3:
            fd = fd_of(name, os.O_APPEND | os.O_DSYNC)
            os.write(fd, rec)
        else:
            fd = fd_of(name, 0)
            os.pwritev(fd, [rec], offs.get(name, 0), os.RWF_DSYNC)
        offs[name] = offs.get(name, 0) + len(rec)
        os.write(o, b"%s %d\n" % (name.encode(), seq))
        if kind == 1 and seq % 200 == 1:  # intent first: what was acknowledged in it may go
            os.write(o, b"truncate %s\n" % name.encode())
            path = os.path.join(d, name)
            how = seq // 200 % 3
            if how == 0:
                os.ftruncate(fd, 0)
            elif how == 1:
                os.truncate(path, 0)
            else:
                os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))
            offs[name] = 0
        if seq % 10 == 0:  # a file that lives for two syncs (SQLite's rollback journal,
            path = os.path.join(d, "scratch")  # read-write as SQLite opens it)
            s_fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(s_fd, rec)
            os.fdatasync(s_fd)
            os.write(s_fd, rec)
            os.fdatasync(s_fd)
            os.close(s_fd)
            os.write(o, b"scratch %d\n" % seq)  # acknowledged, then removed
            os.unlink(path)
        if kind == 0 and seq % 300 == 0:  # rotate the append log (intent first: a kill may
            os.write(o, b"rename %s %s.old\n" % (name.encode(), name.encode()))  # come in between)
            os.rename(os.path.join(d, name), os.path.join(d, name + ".old"))
            dfd = os.open(d, os.O_RDONLY)
            os.fsync(dfd)
            os.close(dfd)
            os.close(files.pop(name))
            gen += 1


def sqlite(d, oracle, journal):
    con = sqlite3.connect(os.path.join(d, "db"), isolation_level=None)
    con.execute(f"PRAGMA journal_mode={journal}")
    # In rollback-journal mode the commit is the journal's deletion, which
    # SQLite makes durable (a directory sync) only with synchronous=EXTRA;
    # with FULL the last transaction may roll back after a power cut, with
    # or without tdax.
    con.execute("PRAGMA synchronous=" + ("EXTRA" if journal == "delete" else "FULL"))
    if os.environ.get("TDAX_TEST_LIE") == "1":
        # The positive control: no checkpoints. One that grows the database
        # file (fallocate) makes its sync a real one, which made every
        # transaction before it durable: a cut during it lost nothing.
        con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)")
    o = open_oracle(oracle)
    i = 0
    while True:
        i += 1
        con.execute("BEGIN")
        con.execute("INSERT INTO t VALUES (?, ?)", (i, os.urandom(50 + i % 300)))
        con.execute("COMMIT")
        os.write(o, b"%d\n" % i)


def redis(port, oracle):
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rb")
    o = open_oracle(oracle)
    i = 0
    while True:
        i += 1
        k, v = b"k%d" % i, b"v%d" % i * (1 + i % 20)
        s.sendall(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
        if f.readline() != b"+OK\r\n":
            raise SystemExit("redis did not say OK")
        os.write(o, b"%d\n" % i)


def etcd_ready(port, timeout=30):
    """Wait until etcd at port answers its health check; False if it never does."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if b"true" in c.getresponse().read():
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def etcd(port, oracle):
    """Sequential puts through etcd's JSON gateway on one keep-alive
    connection; a put is acknowledged when etcd answers 200 (its WAL was
    synced)."""
    etcd_ready(port)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    o = open_oracle(oracle)
    i = 0
    while True:
        i += 1
        body = json.dumps({"key": base64.b64encode(b"k%d" % i).decode(),
                           "value": base64.b64encode(b"v%d" % i * (1 + i % 20)).decode()})
        c.request("POST", "/v3/kv/put", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit(f"etcd answered {r.status}")
        os.write(o, b"%d\n" % i)


def postgres(sockdir, port, oracle):
    """Autocommitted INSERTs through one psql session; a row is acknowledged
    when psql prints the SELECT that follows its INSERT (after the commit)."""
    import subprocess
    psql = subprocess.Popen(["psql", "-h", sockdir, "-p", str(port), "-U", "postgres", "-X", "-q",
                             "-t", "-A", "-v", "ON_ERROR_STOP=1", "postgres"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    psql.stdin.write("CREATE TABLE IF NOT EXISTS t(id int PRIMARY KEY, v text);\n")
    o = open_oracle(oracle)
    i = 0
    while True:
        i += 1
        psql.stdin.write(f"INSERT INTO t VALUES ({i}, repeat('x', {i % 200})); SELECT 'ack {i}';\n")
        line = psql.stdout.readline()
        if line.strip() != f"ack {i}":
            raise SystemExit(f"psql said {line!r}")
        os.write(o, b"%d\n" % i)


if __name__ == "__main__":
    what, d, oracle = sys.argv[1], sys.argv[2], sys.argv[3]
    if what == "raw":
        raw(d, oracle)
    elif what.startswith("sqlite"):
        sqlite(d, oracle, what.split("-")[1])
    elif what == "postgres":
        postgres(d, int(sys.argv[4]), oracle)
    elif what == "etcd":
        etcd(int(sys.argv[4]), oracle)
    else:
        redis(int(sys.argv[4]), oracle)
