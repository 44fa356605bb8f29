"""ycsb -- YCSB's core workloads A-F against Redis, as YCSB's Redis binding
issues them, from one client without pipelining (YCSB's default).

Records are hashes of 10 fields x 100 bytes ("user<N>"), indexed in a
sorted set for scans. Key choice: scrambled zipfian (theta 0.99) for A, B,
C, E, F; "latest" for D; scan lengths uniform in 1..100 (E).

  A: 50 % read, 50 % update          D: 95 % read, 5 % insert (latest)
  B: 95 % read, 5 % update           E: 95 % scan, 5 % insert
  C: 100 % read                      F: 50 % read, 50 % read-modify-write
"""
import random
import socket
import time

YCSB_WORKLOADS = {
    "A": {"read": 0.5, "update": 0.5},
    "B": {"read": 0.95, "update": 0.05},
    "C": {"read": 1.0},
    "D": {"read": 0.95, "insert": 0.05},
    "E": {"scan": 0.95, "insert": 0.05},
    "F": {"read": 0.5, "rmw": 0.5},
}
FIELDS, FIELD_LEN, INDEX = 10, 100, b"_indices"


class Zipfian:
    """Gray et al.'s generator, as YCSB's ZipfianGenerator (theta 0.99)."""

    def __init__(self, n, theta=0.99, rng=random):
        self.n, self.theta, self.rng = n, theta, rng
        self.zetan = sum(1.0 / (i ** theta) for i in range(1, n + 1))
        zeta2 = 1 + 1.0 / (2 ** theta)
        self.alpha = 1.0 / (1.0 - theta)
        self.eta = (1 - (2.0 / n) ** (1 - theta)) / (1 - zeta2 / self.zetan)

    def next(self):
        u = self.rng.random()
        uz = u * self.zetan
        if uz < 1.0:
            return 0
        if uz < 1.0 + 0.5 ** self.theta:
            return 1
        return int(self.n * (self.eta * u - self.eta + 1) ** self.alpha)


def fnv64(x):
    h = 0xCBF29CE484222325
    for _ in range(8):
        h = ((h ^ (x & 0xFF)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        x >>= 8
    return h


class Redis:
    """The few RESP commands YCSB's Redis binding uses."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(parts))
        return self.reply()

    def reply(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t in (b"+", b":"):
            return rest
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if t == b"*":
            return [self.reply() for _ in range(max(int(rest), 0))]
        raise RuntimeError(f"bad reply {line!r}")


def record(rng):
    out = []
    for i in range(FIELDS):
        out += [b"field%d" % i, rng.randbytes(FIELD_LEN)]
    return out


def run_ycsb(port, workload, records, ops, seed=1):
    """Load `records`, then run `ops` operations; returns run-phase ops/s."""
    rng = random.Random(seed)
    r = Redis(port)
    for n in range(records):
        r.cmd(b"HSET", b"user%d" % n, *record(rng))
        r.cmd(b"ZADD", INDEX, n, b"user%d" % n)
    mix = YCSB_WORKLOADS[workload]
    kinds, weights = list(mix), list(mix.values())
    zipf = Zipfian(records, rng=rng)
    inserted = records
    t0 = time.perf_counter()
    for _ in range(ops):
        op = rng.choices(kinds, weights)[0]
        if workload == "D":
            key = max(0, inserted - 1 - zipf.next() % inserted)  # latest: recent keys are hot
        else:
            key = fnv64(zipf.next()) % records  # scrambled zipfian
        if op == "read":
            r.cmd(b"HGETALL", b"user%d" % key)
        elif op == "update":
            r.cmd(b"HSET", b"user%d" % key, b"field%d" % rng.randrange(FIELDS), rng.randbytes(FIELD_LEN))
        elif op == "rmw":
            r.cmd(b"HGETALL", b"user%d" % key)
            r.cmd(b"HSET", b"user%d" % key, b"field%d" % rng.randrange(FIELDS), rng.randbytes(FIELD_LEN))
        elif op == "insert":
            r.cmd(b"HSET", b"user%d" % inserted, *record(rng))
            r.cmd(b"ZADD", INDEX, inserted, b"user%d" % inserted)
            inserted += 1
        else:  # scan
            for k in r.cmd(b"ZRANGEBYSCORE", INDEX, key, b"+inf", b"LIMIT", 0, rng.randint(1, 100)):
                r.cmd(b"HGETALL", k)
    return ops / (time.perf_counter() - t0)
