"""trace -- read the binary trace `tdax run --trace` writes (src/core/trace.h)."""
import struct
from dataclasses import dataclass

HEADER = struct.Struct("<8sIIIIIIQQQQ")
RECORD = struct.Struct("<QIIQIHH")
WRITE, SYNC, OPEN, META, NAME = 1, 2, 3, 4, 5
KINDS = {WRITE: "write", SYNC: "sync", OPEN: "open", META: "meta", NAME: "name"}
CREATE, REAL = 1, 4
METADATA = 3  # the fallback reason of a change the kernel had to make (a create)
# fallback reasons (src/core/stats.h) that make a file kernel-only for good
KERNEL_ONLY = {5, 6}  # mmap, stdio


@dataclass
class Event:
    t: int
    pid: int
    file: int
    off: int
    length: int
    kind: int
    flags: int


class Trace:
    def __init__(self, path):
        data = open(path, "rb").read()
        if len(data) < HEADER.size:
            raise ValueError(f"{path}: too short to be a tdax trace")
        (magic, version, recsize, self.upgrade, self.downgrade, self.write_threshold, self.gran,
         self.wb_window_ns, self.wr_window_ns, self.capacity, self.start_ns) = HEADER.unpack_from(data)
        if magic != b"TDAXTRC1":
            raise ValueError(f"{path}: not a tdax trace (bad magic)")
        if version != 1 or recsize != RECORD.size:
            raise ValueError(f"{path}: trace version {version}, record size {recsize}: not readable by "
                             "this tdax")
        self.names, self.events = {}, []
        pos = HEADER.size
        while pos + RECORD.size <= len(data):
            e = Event(*RECORD.unpack_from(data, pos))
            pos += RECORD.size
            if e.kind == NAME:
                n = (e.length + 31) & ~31
                self.names[e.file] = data[pos:pos + e.length].decode(errors="replace")
                pos += n
            else:
                self.events.append(e)
        self.events.sort(key=lambda e: e.t)  # processes flush their buffers separately
        self.truncated = pos != len(data)

    def tunables(self):
        return {"upgrade_threshold": self.upgrade, "downgrade_threshold": self.downgrade,
                "write_threshold": self.write_threshold, "granularity_order": self.gran,
                "writeback_window_ms": self.wb_window_ns // 1000000,
                "write_window_ms": self.wr_window_ns // 1000000}

    def info(self):
        kinds = {k: 0 for k in KINDS.values()}
        for e in self.events:
            kinds[KINDS.get(e.kind, "?")] = kinds.get(KINDS.get(e.kind, "?"), 0) + 1
        span = (self.events[-1].t - self.events[0].t) / 1e9 if self.events else 0.0
        return {"events": len(self.events), "by_kind": kinds, "files": len(self.names),
                "processes": len({e.pid for e in self.events}), "seconds": round(span, 3),
                "bytes_written": sum(e.length for e in self.events if e.kind == WRITE),
                "tunables": self.tunables(), "log_capacity": self.capacity,
                "truncated_tail": self.truncated}
