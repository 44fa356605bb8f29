"""sim -- replay a trace through a policy with a simulated device.

The model is the runtime's (docs/design.md): a write to a range the policy
logs goes into the device, unless it is big (big_write bytes or more, the
runtime's TDAX_BIG_WRITE: the size-aware dual path) and the file is not
promoted; any other change makes the file "uncovered"; a sync is
lightweight unless the file is uncovered (then it is real and releases the
file's records). Records are also released by background
checkpoints (after TDAX_WB_AGE_MS), by downgrade jobs, and under pressure.
"""
import ctypes
from collections import defaultdict

from . import ctrack
from .trace import CREATE, KERNEL_ONLY, META, METADATA, OPEN, REAL, SYNC, WRITE

PAGE = 12
REC = ctrack.RECORD_BYTES  # record header bytes (log.h)


class File:
    def __init__(self):
        self.uncovered = True  # new to tdax: its first sync is real
        self.kernel_only = False
        self.live = 0           # bytes of live records (with headers)
        self.first_log = None
        self.last_sync = None
        self.syncs = 0
        self.real_syncs = 0
        self.first_sync_t = None
        self.upgraded_at = None  # (time, syncs) of its first upgrade
        self.downgraded_after = []  # time from its last sync to each downgrade
        self.born_logged = False  # its creation is a record (an heir born upgraded)


# ---- policies ---------------------------------------------------------------

class Policy:
    """What a policy is asked, and the answers of one that logs every write
    and no creation."""

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
        """A write of n bytes at off (no flags, file not kernel-only): True
        if the policy logs it."""
        return True

    def wrote(self, fid, f, off, n, t, stored):
        """After every write: stored, whether it went into the device."""

    def promoted(self, fid):
        """Whether the file is promoted (bypass mode: every write logged,
        big or not)."""
        return False

    def uncovered(self, fid, f, t, why="kernel"):
        """The file's next sync is real now (a change no record covers).
        why: "full" (the log had no room for a write the policy logs),
        "unlogged" (a write the policy does not log), "kernel" (a change
        only the kernel makes: a create, metadata, a write with flags)."""

    def sync(self, fid, f, t):
        pass

    def tick(self, t, pressure):
        pass


class Always(Policy):
    """Every write logged, and every file created empty under tdax is a
    record from its start: its first sync is lightweight. (The runtime's
    always registers a file at its first sync and copies a new one of at
    most 256 KiB into the log then, docs/durability.md: the same syncs
    light but a large or old file's first, fewer bytes logged.)"""
    name = "always"

    def created(self, fid, f, t):
        return True


class Never(Policy):
    name = "never"

    def write(self, fid, f, off, n, t):
        return False


class Thesis(Policy):
    """src/policy/track.c through ctypes, fed as src/preload/tracking.c feeds it,
    heirs included (a file created at the name of one that had a sync within
    the window takes up its first range's counts and upgrade, docs/policy.md; the trace
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
        self.streams = {}                # name -> the last file of that name with a sync

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
        self.streams[self.sim.trace.names.get(fid)] = fid  # a synced file leaves an heir
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


class FsyncStreak(Policy):
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


class Selection:
    """Bypass mode's selection as the runtime runs it (src/preload/selection.c
    over src/policy/select.c, through ctypes), over the simulated files.

    Per file a profile: bytes written in place and appended (a write at or
    past the highest end offset seen of the file), writes, and the syncs, over
    a sliding window (the trace has no reads). The candidates of a selection
    are the files profiled within the window; tdax_select ranks those that
    synced in it by bandwidth and takes them while their footprints -- the
    blocks their writes in place hold for hold_ns (the write-back age or the
    window if shorter) and their appends for APPEND_HOLD_NS -- fit `share` of
    the device. `promoted` (the caller's) is the selection's
    input: those files rank with KEEP_PCT more.

    select(t, always) is selection.c's select_now: it applies the ranking
    (the set `selected`) only if always, if the candidates changed,
    or if tdax_select_due finds their total bandwidth (tdax_select_total)
    moved by more than a quarter since the last applied one, or if
    tdax_select_over finds the promoted ones overfill the share by more
    than KEEP_PCT; a file profiled
    last more than a window ago is dropped either way. due(t): the
    write-back's every EVERY_NS. takes(fid, t) is tdax_selection_takes, asked
    at a sync: a file not selected asks for a selection at once if its
    bandwidth doubled since it was last refused, or RETRY_NS after the last
    selection."""
    EVERY_NS = 100_000_000  # TDAX_SELECTION_EVERY_NS
    RETRY_NS = 10_000_000   # TDAX_SELECTION_RETRY_NS

    def __init__(self, sim, share=0.5, floor=0, window_ns=1_000_000_000):
        self.sim, self.lib = sim, ctrack.load()
        self.share_pct, self.floor, self.window = round(share * 100), floor, window_ns
        self.hold = min(sim.age, window_ns)
        self.profiles, self.profiled, self.end = {}, {}, {}  # file -> Profile, its last call, highest end
        self.promoted, self.selected, self.refused = set(), set(), {}
        self.selected_ns = None       # the last selection, applied or not
        self.last_total, self.last_set = 0, frozenset()  # of the last applied one

    def forget(self, fid):
        for d in (self.profiles, self.profiled, self.end, self.refused):
            d.pop(fid, None)
        self.promoted.discard(fid)
        self.selected.discard(fid)

    def profile(self, fid, t):
        self.profiled[fid] = t
        p = self.profiles.get(fid)
        if p is None:
            p = self.profiles[fid] = ctrack.Profile()
        return ctypes.byref(p)

    def wrote(self, fid, off, n, t):
        if n:
            end = self.end.get(fid, 0)
            self.lib.tdax_profile_write(self.profile(fid, t), self.window, t, n, off >= end)
            self.end[fid] = max(end, off + n)

    def synced(self, fid, t):
        self.lib.tdax_profile_sync(self.profile(fid, t), self.window, t)

    def rates(self, fid, t, into):
        self.lib.tdax_profile_rates(ctypes.byref(self.profiles[fid]), self.window, t, ctypes.byref(into))

    def bandwidth(self, fid, t):
        r = ctrack.Rates()
        self.rates(fid, t, r)
        return self.lib.tdax_select_bandwidth(ctypes.byref(r))

    def capacity(self):
        return self.sim.capacity // 100 * self.share_pct

    def due(self, t):
        return self.selected_ns is None or t - self.selected_ns >= self.EVERY_NS

    def select(self, t, always, capacity=None):
        """True if a new selection was applied."""
        fids = [fid for fid, when in self.profiled.items() if t - when <= self.window]
        self.selected &= set(fids)
        self.selected_ns = t
        c = (ctrack.Candidate * max(1, len(fids)))()
        for i, fid in enumerate(fids):
            self.rates(fid, t, c[i].rates)
            c[i].promoted = fid in self.promoted
        params = ctypes.byref(ctrack.SelectParams(self.capacity() if capacity is None else capacity,
                                                  self.floor, self.hold, ctrack.APPEND_HOLD_NS,
                                                  ctrack.KEEP_PCT))
        total = self.lib.tdax_select_total(c, len(fids), params)
        if not (always or frozenset(fids) != self.last_set or self.lib.tdax_select_due(self.last_total, total)
                or self.lib.tdax_select_over(c, len(fids), params)):
            return False
        self.lib.tdax_select(c, (ctypes.c_uint32 * max(1, len(fids)))(), len(fids), params)
        self.last_total, self.last_set = total, frozenset(fids)
        self.selected = {fid for i, fid in enumerate(fids) if c[i].selected}
        return True

    def takes(self, fid, t):
        if fid in self.selected:
            return True
        bw = self.bandwidth(fid, t)
        recent = self.selected_ns is not None and t - self.selected_ns < self.RETRY_NS
        if bw < self.floor or not bw or (bw < 2 * self.refused.get(fid, 0) and recent):
            return False
        self.select(t, True)
        taken = fid in self.selected
        self.refused[fid] = 0 if taken else bw
        return taken


class Bandwidth(Policy):
    """The Transparent DAX Mappings selection (§4.3, §4.4) as the upgrade
    policy itself: bypass mode's Selection (src/policy/select.c) with `share`
    of the device, every 100 ms (the write-back's), its files logged whole
    from then on (upgraded), the others not at all. Under pressure the
    selection is applied at once with half the share."""
    name = "bandwidth"

    def __init__(self, sim, share=0.9, floor=0, **selection):
        super().__init__(sim)
        self.selection = Selection(sim, share, floor, **selection)
        self.down_at = {}

    def forget(self, fid):
        self.selection.forget(fid)

    def write(self, fid, f, off, n, t):
        return fid in self.selection.promoted

    def wrote(self, fid, f, off, n, t, stored):
        self.selection.wrote(fid, off, n, t)

    def sync(self, fid, f, t):
        self.selection.synced(fid, t)

    def tick(self, t, pressure):
        sel = self.selection
        if not sel.due(t):
            return
        sel.select(t, pressure, sel.capacity() // 2 if pressure else None)
        for fid in sel.selected - sel.promoted:
            self.sim.upgraded(fid, 0, t, self.down_at.get(fid))
        for fid in sel.promoted - sel.selected:
            self.down_at[fid] = t
            self.sim.downgraded(fid, t)
        sel.promoted = set(sel.selected)


class Bypass(Thesis):
    """Bypass mode (`tdax run --mode bypass`, src/preload/bypass.c) over the
    thesis policy. After any sync that went well (light, or real: then
    everything is on flash and the file covered either way) of a file not
    promoted and not kernel-only that holds a write lease -- the runtime
    takes one at a file's first lightweight sync (coherent.c) -- the
    Selection is asked (takes, tdax_selection_takes); a file it takes is
    promoted. While promoted,
    every write of the file goes into the device (deferred) whatever the
    thesis policy says of its ranges, so its syncs are light (a fence);
    the thesis bookkeeping (tdax_track_write, tdax_track_sync) runs for
    every write and sync all the same, as the runtime's deferred() and
    light() call tracking. The write-back releases a promoted file's
    records (at their age, or for a downgrade job) without demoting it: its
    dirty blocks go into the file first (src/preload/cache.h). A promoted
    file is demoted when a selection (every 100 ms) drops it
    (demotions_unselected), when the log has no
    room for its write (that write is not stored and the file is uncovered,
    demotions_full), when only the kernel can make a change of it (a write
    with flags, a truncate or other metadata change: demotions_kernel), and
    when its entry names another file (it was closed and removed,
    demotions_gone). Files not promoted follow the thesis
    policy. Breaks of leases, other descriptors, reads and processes are
    not modelled (the selection is one for all processes of the trace; the
    runtime's is per process)."""
    name = "bypass"

    def __init__(self, sim, share=0.5, floor=0, **selection):
        super().__init__(sim)
        self.selection = Selection(sim, share, floor, **selection)
        self.deferred = defaultdict(int)  # file -> its deferred writes
        self.promoted_at = {}  # file -> the time of its first promotion
        self.leased = set()  # files that had a lightweight sync

    def demote(self, fid, why):
        if fid in self.selection.promoted:
            self.selection.promoted.discard(fid)
            self.sim.c["demotions"] += 1
            self.sim.c["demotions_" + why] += 1

    def forget(self, fid):
        super().forget(fid)
        self.demote(fid, "gone")
        self.selection.forget(fid)
        self.leased.discard(fid)

    def write(self, fid, f, off, n, t):
        logged = super().write(fid, f, off, n, t)  # tracking, promoted or not
        return fid in self.selection.promoted or logged

    def promoted(self, fid):
        return fid in self.selection.promoted

    def wrote(self, fid, f, off, n, t, stored):
        self.selection.wrote(fid, off, n, t)
        if stored and fid in self.selection.promoted:
            self.deferred[fid] += 1
            self.sim.c["deferred_writes"] += 1
            self.sim.c["deferred_bytes"] += n

    def uncovered(self, fid, f, t, why="kernel"):
        self.demote(fid, why)

    def sync(self, fid, f, t):
        self.selection.synced(fid, t)
        super().sync(fid, f, t)
        # (f.uncovered here: this sync is real, and leaves the file covered)
        if not f.uncovered and not f.kernel_only:
            self.leased.add(fid)
        if fid in self.selection.promoted or f.kernel_only or fid not in self.leased:
            return
        if self.selection.takes(fid, t):
            self.selection.promoted.add(fid)
            self.promoted_at.setdefault(fid, t)
            self.sim.c["promotions"] += 1

    def tick(self, t, pressure):
        super().tick(t, pressure)
        if self.selection.due(t):
            self.selection.select(t, False)
            for fid in self.selection.promoted - self.selection.selected:
                self.demote(fid, "unselected")


POLICIES = {p.name: p for p in (Thesis, Always, Never, FsyncStreak, Bandwidth, Adaptive, Bypass)}

# ---- the simulator ----------------------------------------------------------

DEFAULT_COSTS = {"real_sync_us": 250.0, "light_sync_us": 0.6, "write_us": 1.0,
                 "log_record_us": 0.25, "log_ns_per_byte": 0.13}


# The selection's settings `tdax sim --selection` takes, as the runtime's
# TDAX_BYPASS_* variables name them: the arguments of Bandwidth and Bypass.
SELECTION = {"share_pct": lambda v: {"share": int(v) / 100},
             "floor": lambda v: {"floor": int(v)},
             "window_ms": lambda v: {"window_ns": int(v) * 1000000}}
SELECTING = {Bandwidth.name, Bypass.name}


class Sim:
    def __init__(self, trace, policy="thesis", tunables=None, capacity=None, costs=None,
                 wb_age_ms=1000, wb_interval_ms=10, high_pct=90, oscillation_ms=1000, selection=None,
                 big_write=0):
        self.trace, self.tunables = trace, {**trace.tunables(), **(tunables or {})}
        self.big_write = big_write
        self.capacity = capacity or trace.capacity
        self.costs = {**DEFAULT_COSTS, **(costs or {})}
        self.age, self.interval = wb_age_ms * 1000000, wb_interval_ms * 1000000
        self.high, self.osc_window = high_pct / 100.0, oscillation_ms * 1000000
        self.files = defaultdict(File)
        self.gens = {}
        self.c = defaultdict(int)
        self.live = self.peak = 0
        self.policy = POLICIES[policy](self, **(selection if policy in SELECTING and selection else {}))

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
                    if f.uncovered:
                        self.policy.uncovered(e.file, f, e.t)
            elif e.kind == META and f.born_logged and e.flags == METADATA:
                pass  # the creation the traced run made on the kernel path is a record here
            elif e.kind == META:
                f.uncovered = True
                if e.flags in KERNEL_ONLY:
                    f.kernel_only = True
                self.policy.uncovered(e.file, f, e.t)
            elif e.kind == WRITE:
                f.born_logged = False
                self.c["writes"] += 1
                self.c["bytes_written"] += e.length
                logged = not e.flags and not f.kernel_only and self.policy.write(e.file, f, e.off, e.length, e.t)
                if logged and self.big_write and e.length >= self.big_write and not self.policy.promoted(e.file):
                    logged = False  # the block path's (the dual path): the file is uncovered
                    self.c["big_writes"] += 1
                    self.c["big_bytes"] += e.length
                room = self.live + e.length + REC <= self.capacity
                stored = bool(logged and room and e.length)
                if stored:
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
                    self.policy.uncovered(e.file, f, e.t, "full" if logged else "unlogged" if not e.flags
                                          and not f.kernel_only else "kernel")
                self.policy.wrote(e.file, f, e.off, e.length, e.t, stored)
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
                    f.real_syncs += 1
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
                "big_writes": c["big_writes"], "big_bytes": c["big_bytes"],
                "device_bytes_per_byte": round(c["logged_bytes"] / c["bytes_written"], 4)
                if c["bytes_written"] else 0.0,
                "log_full": c["log_full"], "upgrades": c["upgrades"], "downgrades": c["downgrades"],
                "checkpoints": c["checkpoints"], "oscillations": c["oscillations"],
                "reactivity_ms": round(reacts[len(reacts) // 2][0] / 1e6, 3) if reacts else None,
                "reactivity_syncs": reacts[len(reacts) // 2][1] if reacts else None,
                "downgrade_after_ms": round(downs[len(downs) // 2] / 1e6, 3) if downs else None,
                "promotions": c["promotions"], "demotions": c["demotions"],
                "demotions_unselected": c["demotions_unselected"],
                "demotions_full": c["demotions_full"], "demotions_kernel": c["demotions_kernel"],
                "demotions_gone": c["demotions_gone"],
                "deferred_writes": c["deferred_writes"],
                "deferred_bytes": c["deferred_bytes"],
                "deferred_fraction": round(c["deferred_writes"] / c["writes"], 4) if c["writes"] else 0.0,
                "runtime_real_syncs": c["runtime_real_syncs"], "disagreements": c["disagreements"],
                "est_seconds": round(est / 1e6, 4), "est_seconds_without_tdax": round(base / 1e6, 4),
                "est_speedup": round(base / est, 2) if est else None}
