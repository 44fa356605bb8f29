"""sim -- replay a trace through a policy with a simulated device.

The model is the runtime's (docs/design.md): a write to a range the policy
logs goes into the device; any other change makes the file "uncovered"; a
sync is lightweight unless the file is uncovered (then it is real and
releases the file's records). Records are also released by background
checkpoints (after TDAX_WB_AGE_MS), by downgrade jobs, and under pressure.
"""
import ctypes
from collections import defaultdict, deque

from . import ctrack
from .trace import CREATE, KERNEL_ONLY, META, METADATA, OPEN, REAL, SYNC, WRITE

PAGE = 12
REC = 64  # record header bytes


class File:
    def __init__(self):
        self.uncovered = True  # new to tdax: its first sync is real
        self.kernel_only = False
        self.live = 0           # bytes of live records (with headers)
        self.first_log = None
        self.last_sync = None
        self.syncs = 0
        self.first_sync_t = None
        self.upgraded_at = None  # (time, syncs) of its first upgrade
        self.downgraded_after = []  # time from its last sync to each downgrade
        self.born_logged = False  # its creation is a record (an heir born upgraded)


# ---- policies ---------------------------------------------------------------

class Always:
    name = "always"

    def __init__(self, sim):
        self.sim = sim

    def due(self, t):
        pass

    def forget(self, fid):
        pass

    def created(self, fid, f, t):
        """A new file fid was created empty at t: True if the policy logs
        its creation (the file starts upgraded)."""
        return False

    def write(self, fid, f, off, n, t):
        return True

    def sync(self, fid, f, t):
        pass

    def tick(self, t, pressure):
        pass


class Never(Always):
    name = "never"

    def write(self, fid, f, off, n, t):
        return False


class Thesis(Always):
    """src/policy/track.c through ctypes, fed as src/preload/tracking.c feeds it,
    heirs included (a file created at the name of one that had a sync stream
    takes up its first range's counts and upgrade, docs/policy.md; the trace
    has no unlinks, so a create at the name stands for the removal)."""
    name = "thesis"

    def __init__(self, sim, job_latency_ns=100_000):
        super().__init__(sim)
        self.lib = ctrack.load()
        self.latency = job_latency_ns  # decision to done: the worker is woken, not instant
        self.pending = []
        self.t = ctrack.Tunables.from_dict(sim.tunables)
        self.ranges = {}                 # (file, rno) -> Range
        self.gran = {}
        self.dirty = defaultdict(set)
        self.down_at = {}                # (file, rno) -> time of the last downgrade
        self.streams = {}                # name -> the last file of that name with a sync stream

    def forget(self, fid):
        for key in [k for k in self.ranges if k[0] == fid]:
            del self.ranges[key]
        self.gran.pop(fid, None)
        self.dirty.pop(fid, None)
        self.pending = [p for p in self.pending if p[1] != fid]

    def decided_on(self, r, t):
        """The tunables range r is decided on at t (policy/track.h)."""
        return self.t

    def stream(self, f, t):
        return f.last_sync is not None and t - f.last_sync <= self.t.wb_window_ns

    def created(self, fid, f, t):
        name = self.sim.trace.names.get(fid)
        prev = self.streams.get(name)
        pf = self.sim.files.get(prev) if prev != fid else None
        if pf is None or not self.stream(pf, t):
            return False
        legacy = ctrack.Legacy()
        if (prev, 0) in self.ranges:
            self.lib.tdax_track_bequeath(ctypes.byref(self.ranges[(prev, 0)]), ctypes.byref(self.t), t,
                                         ctypes.byref(legacy))
        del self.streams[name]  # one heir per removal
        self.forget(prev)  # removed: its ranges are gone with its entry
        f.last_sync = pf.last_sync  # its stream goes on
        self.gran.setdefault(fid, self.t.gran_order)
        return bool(self.lib.tdax_track_inherit(ctypes.byref(self.range(fid, 0)), ctypes.byref(legacy),
                                                ctypes.byref(self.t), t))

    def range(self, fid, rno):
        key = (fid, rno)
        r = self.ranges.get(key)
        if r is None:
            r = self.ranges[key] = ctrack.Range()
        return r

    def spans(self, fid, off, n):
        """(range number, first page, last page in it) of a write of n > 0
        bytes at off, as src/preload/tracking.c cuts it."""
        g = self.gran.setdefault(fid, self.t.gran_order)
        first, last = off >> PAGE, (off + n - 1) >> PAGE
        for rno in range(first >> g, (last >> g) + 1):
            base = rno << g
            yield rno, max(first, base) - base, min(last, ((rno + 1) << g) - 1) - base

    def write(self, fid, f, off, n, t):
        if n == 0:
            return True
        logged = True
        for rno, p0, p1 in self.spans(fid, off, n):
            r = self.range(fid, rno)
            self.lib.tdax_track_write(ctypes.byref(r), ctypes.byref(self.t), t, p0, p1 - p0 + 1)
            self.dirty[fid].add(rno)
            logged &= r.state in ctrack.LOGGED
        return logged

    def sync(self, fid, f, t):
        stream = self.stream(f, t)
        if stream:
            self.streams[self.sim.trace.names.get(fid)] = fid
        for rno in self.dirty.pop(fid, ()):
            r = self.range(fid, rno)
            if self.lib.tdax_track_sync(ctypes.byref(r), ctypes.byref(self.decided_on(r, t)), t, stream):
                self.pending.append((t + self.latency, fid, rno))

    def due(self, t):
        while self.pending and self.pending[0][0] <= t:
            when, fid, rno = self.pending.pop(0)
            self.job(fid, rno, self.range(fid, rno), when)

    def job(self, fid, rno, r, t):
        kind = self.lib.tdax_track_job_begin(ctypes.byref(r))
        if kind == ctrack.KEEP:
            return
        self.lib.tdax_track_job_end(ctypes.byref(r), kind, True)
        if kind == ctrack.UPGRADE:
            self.sim.upgraded(fid, rno, t, self.down_at.get((fid, rno)))
        else:
            self.down_at[(fid, rno)] = t
            self.sim.downgraded(fid, t)

    def tick(self, t, pressure):
        lowest = None
        for (fid, rno), r in list(self.ranges.items()):
            if r.state == ctrack.UPGRADED:
                self.lib.tdax_track_reevaluate(ctypes.byref(r), ctypes.byref(self.decided_on(r, t)), t)
            self.job(fid, rno, r, t)
            if pressure and r.state == ctrack.UPGRADED:
                m = max(0, self.lib.tdax_track_metric(ctypes.byref(r), ctypes.byref(self.t), t))
                lowest = m if lowest is None else min(lowest, m)
        if lowest is None:
            return
        for (fid, rno), r in list(self.ranges.items()):
            if r.state == ctrack.UPGRADED and \
                    max(0, self.lib.tdax_track_metric(ctypes.byref(r), ctypes.byref(self.t), t)) <= lowest:
                self.lib.tdax_track_force_downgrade(ctypes.byref(r))
                self.job(fid, rno, r, t)


class Adaptive(Thesis):
    """The runtime's policy "adaptive" (src/policy/track.h): the thesis
    policy with thresholds of its own per range (tdax_track_adapt: lower for
    a steady sync stream, higher as the device fills), and upgrade-ahead
    (tdax_track_carry): an append (a write at the file's end) that reaches
    the carry page of an upgraded range carries the range's state, its
    counts and an upgrade, into the next range, so an append stream does
    not start every range on the kernel path (the weakness of small G,
    thesis section 6.3)."""
    name = "adaptive"

    def __init__(self, sim):
        super().__init__(sim)
        self.end = {}

    def forget(self, fid):
        super().forget(fid)
        self.end.pop(fid, None)

    def decided_on(self, r, t):
        own = ctrack.Tunables()
        fill = min(100, 100 * self.sim.live // self.sim.capacity) if self.sim.capacity else 100
        self.lib.tdax_track_adapt(ctypes.byref(r), ctypes.byref(self.t), t, fill, ctypes.byref(own))
        return own

    def write(self, fid, f, off, n, t):
        appends = off >= self.end.get(fid, 0)
        logged = super().write(fid, f, off, n, t)
        if not n:
            return logged
        self.end[fid] = max(self.end.get(fid, 0), off + n)
        at = ctrack.carry_page(self.gran[fid])
        for rno, p0, p1 in self.spans(fid, off, n) if appends else ():
            r = self.range(fid, rno)
            if p0 <= at <= p1 and r.state == ctrack.UPGRADED and self.lib.tdax_track_carry(
                    ctypes.byref(r), ctypes.byref(self.range(fid, rno + 1)), ctypes.byref(self.t), t):
                self.pending.append((t + self.latency, fid, rno + 1))
        return logged


class FsyncStreak(Always):
    """SPFS-like: a file is upgraded after N consecutive syncs each within T
    of the previous one, and downgraded when its syncs stop for longer than
    the idle time."""
    name = "fsync-streak"

    def __init__(self, sim, n=8, within_ns=10_000_000, idle_ns=1_000_000_000):
        super().__init__(sim)
        self.n, self.within, self.idle = n, within_ns, idle_ns
        self.streak = defaultdict(int)
        self.up = set()
        self.down_at = {}

    def write(self, fid, f, off, n, t):
        return fid in self.up

    def sync(self, fid, f, t):
        close = f.last_sync is not None and t - f.last_sync <= self.within
        self.streak[fid] = self.streak[fid] + 1 if close else 1
        if fid not in self.up and self.streak[fid] >= self.n:
            self.up.add(fid)
            self.sim.upgraded(fid, 0, t, self.down_at.get(fid))

    def tick(self, t, pressure):
        for fid in list(self.up):
            f = self.sim.files[fid]
            if f.last_sync is None or t - f.last_sync > self.idle or (pressure and len(self.up) > 0):
                self.up.discard(fid)
                self.down_at[fid] = t
                self.sim.downgraded(fid, t)
                if pressure:
                    break


class Bandwidth(Always):
    """The Transparent DAX Mappings selection (§4): per-file write bandwidth
    over a sliding window; every interval the files with the highest
    bandwidth are selected greedily while their footprint (bytes written in
    the window) fits the device; a new selection is applied only when it
    differs and some bandwidth changed by more than 20 %."""
    name = "bandwidth"

    def __init__(self, sim, window_ns=1_000_000_000, every_ns=100_000_000):
        super().__init__(sim)
        self.window, self.every = window_ns, every_ns
        self.hist = defaultdict(deque)
        self.bytes = defaultdict(int)
        self.up, self.last_bw, self.next = set(), {}, 0
        self.down_at = {}

    def write(self, fid, f, off, n, t):
        self.hist[fid].append((t, n))
        self.bytes[fid] += n
        return fid in self.up

    def tick(self, t, pressure):
        if t < self.next:
            return
        self.next = t + self.every
        bw = {}
        for fid, h in self.hist.items():
            while h and h[0][0] < t - self.window:
                self.bytes[fid] -= h.popleft()[1]
            if self.bytes[fid]:
                bw[fid] = self.bytes[fid]
        changed = set(bw) != set(self.last_bw) or any(
            abs(bw[k] - self.last_bw.get(k, 0)) > 0.2 * max(bw[k], 1) for k in bw)
        if not changed and not pressure:
            return
        self.last_bw = bw
        budget, chosen = 0.9 * self.sim.capacity * (0.5 if pressure else 1), set()
        for fid in sorted(bw, key=bw.get, reverse=True):
            if bw[fid] <= budget:
                chosen.add(fid)
                budget -= bw[fid]
        for fid in chosen - self.up:
            self.sim.upgraded(fid, 0, t, self.down_at.get(fid))
        for fid in self.up - chosen:
            self.down_at[fid] = t
            self.sim.downgraded(fid, t)
        self.up = chosen


POLICIES = {p.name: p for p in (Thesis, Always, Never, FsyncStreak, Bandwidth, Adaptive)}

# ---- the simulator ----------------------------------------------------------

DEFAULT_COSTS = {"real_sync_us": 250.0, "light_sync_us": 0.6, "write_us": 1.0,
                 "log_record_us": 0.25, "log_ns_per_byte": 0.13}


class Sim:
    def __init__(self, trace, policy="thesis", tunables=None, capacity=None, costs=None,
                 wb_age_ms=1000, wb_interval_ms=10, high_pct=90, oscillation_ms=1000):
        self.trace, self.tunables = trace, {**trace.tunables(), **(tunables or {})}
        self.capacity = capacity or trace.capacity
        self.costs = {**DEFAULT_COSTS, **(costs or {})}
        self.age, self.interval = wb_age_ms * 1000000, wb_interval_ms * 1000000
        self.high, self.osc_window = high_pct / 100.0, oscillation_ms * 1000000
        self.files = defaultdict(File)
        self.gens = {}
        self.c = defaultdict(int)
        self.live = self.peak = 0
        self.policy = POLICIES[policy](self)

    # callbacks from policies
    def upgraded(self, fid, rno, t, last_down):
        self.c["upgrades"] += 1
        if last_down is not None and t - last_down <= self.osc_window:
            self.c["oscillations"] += 1
        f = self.files[fid]
        if f.upgraded_at is None and f.first_sync_t is not None:
            f.upgraded_at = (t - f.first_sync_t, f.syncs)

    def downgraded(self, fid, t):
        self.c["downgrades"] += 1
        f = self.files[fid]
        if f.last_sync is not None:
            f.downgraded_after.append(t - f.last_sync)
        self.checkpoint(fid)

    def checkpoint(self, fid):
        f = self.files[fid]
        if f.live or f.first_log is not None:
            self.c["checkpoints"] += 1
        self.release(f)
        f.uncovered = False

    def forget(self, fid):
        self.release(self.files.pop(fid))
        self.policy.forget(fid)

    def release(self, f):
        self.live -= f.live
        f.live, f.first_log = 0, None

    def background(self, t):
        pressure = self.live > self.high * self.capacity
        for fid, f in self.files.items():
            if f.first_log is not None and (t - f.first_log >= self.age or pressure):
                self.checkpoint(fid)
        self.policy.tick(t, pressure)

    def run(self):
        evs = self.trace.events
        next_tick = evs[0].t + self.interval if evs else 0
        for e in evs:
            while e.t >= next_tick:
                self.background(next_tick)
                next_tick += self.interval
            self.policy.due(e.t)
            if e.kind == OPEN and self.gens.get(e.file, e.off) != e.off:
                self.forget(e.file)  # the table entry now names another file
            f = self.files[e.file]
            if e.kind == OPEN:
                self.gens[e.file] = e.off
                if e.flags & CREATE:
                    f.born_logged = self.policy.created(e.file, f, e.t)
                    f.uncovered = not f.born_logged
            elif e.kind == META and f.born_logged and e.flags == METADATA:
                pass  # the creation the traced run made on the kernel path is a record here
            elif e.kind == META:
                f.uncovered = True
                if e.flags in KERNEL_ONLY:
                    f.kernel_only = True
            elif e.kind == WRITE:
                f.born_logged = False
                self.c["writes"] += 1
                self.c["bytes_written"] += e.length
                logged = not e.flags and not f.kernel_only and self.policy.write(e.file, f, e.off, e.length, e.t)
                room = self.live + e.length + REC <= self.capacity
                if logged and room and e.length:
                    size = e.length + REC
                    f.live += size
                    self.live += size
                    self.peak = max(self.peak, self.live)
                    f.first_log = f.first_log if f.first_log is not None else e.t
                    self.c["logged_writes"] += 1
                    self.c["logged_bytes"] += e.length
                elif e.length or e.flags:
                    f.uncovered = True
                    self.c["log_full"] += logged and not room
            elif e.kind == SYNC:
                f.born_logged = False
                if f.first_sync_t is None:
                    f.first_sync_t = e.t
                f.syncs += 1
                self.policy.sync(e.file, f, e.t)
                f.last_sync = e.t
                real = f.uncovered or f.kernel_only
                if real:
                    self.c["real_syncs"] += 1
                    self.release(f)
                    f.uncovered = False
                else:
                    self.c["light_syncs"] += 1
                # how the traced run answered this sync (for validation)
                self.c["runtime_real_syncs"] += bool(e.flags & REAL)
                self.c["disagreements"] += real != bool(e.flags & REAL)
        return self.report()

    def report(self):
        c, k = self.c, self.costs
        syncs = c["light_syncs"] + c["real_syncs"]
        base = c["writes"] * k["write_us"] + syncs * k["real_sync_us"]
        est = (c["writes"] * k["write_us"] + c["light_syncs"] * k["light_sync_us"]
               + c["real_syncs"] * k["real_sync_us"] + c["logged_writes"] * k["log_record_us"]
               + c["logged_bytes"] * k["log_ns_per_byte"] / 1000)
        reacts = sorted(f.upgraded_at for f in self.files.values() if f.upgraded_at)
        downs = sorted(d for f in self.files.values() for d in f.downgraded_after)
        return {"policy": self.policy.name, "tunables": self.tunables, "light_syncs": c["light_syncs"],
                "real_syncs": c["real_syncs"],
                "light_fraction": round(c["light_syncs"] / syncs, 4) if syncs else 0.0,
                "writes": c["writes"], "logged_writes": c["logged_writes"],
                "logged_bytes": c["logged_bytes"], "peak_device_bytes": self.peak,
                "log_full": c["log_full"], "upgrades": c["upgrades"], "downgrades": c["downgrades"],
                "checkpoints": c["checkpoints"], "oscillations": c["oscillations"],
                "reactivity_ms": round(reacts[len(reacts) // 2][0] / 1e6, 3) if reacts else None,
                "reactivity_syncs": reacts[len(reacts) // 2][1] if reacts else None,
                "downgrade_after_ms": round(downs[len(downs) // 2] / 1e6, 3) if downs else None,
                "runtime_real_syncs": c["runtime_real_syncs"], "disagreements": c["disagreements"],
                "est_seconds": round(est / 1e6, 4), "est_seconds_without_tdax": round(base / 1e6, 4),
                "est_speedup": round(base / est, 2) if est else None}
