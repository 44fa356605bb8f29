"""ctrack -- the runtime's policy code (src/policy/track.c, and bypass mode's
selection, src/policy/select.c; built as build/lib/libtdaxtrack.so) through
ctypes: the simulator decides exactly as the runtime does. The tdax command
names the library in TDAX_TRACK_LIB (an installed tdax's is beside
libtdax.so); else the build tree's."""
import ctypes
import os
from pathlib import Path

LIB = Path(os.environ.get("TDAX_TRACK_LIB")
           or Path(__file__).resolve().parents[2] / "build" / "lib" / "libtdaxtrack.so")
KEEP, UPGRADE, DOWNGRADE = 0, 1, 2
NONE, TO_UPGRADE, UPGRADING, UPGRADED, TO_DOWNGRADE, DOWNGRADING = range(6)
LOGGED = {UPGRADED, TO_DOWNGRADE, DOWNGRADING}
# src/policy/select.h
KEEP_PCT = 25       # TDAX_SELECT_KEEP_PCT: a promoted file's bonus in the ranking
RECORD_BYTES = 64   # sizeof(struct tdax_rec), log.h: device bytes per record beyond its data
APPEND_HOLD_NS = 100_000_000  # TDAX_SELECT_APPEND_HOLD_NS: the append reservation
UNIT_SHIFT = 6      # TDAX_PROFILE_UNIT_SHIFT: profiles count bytes in units of 64


class Tunables(ctypes.Structure):
    _fields_ = [("upgrade_pct", ctypes.c_uint32), ("downgrade_pct", ctypes.c_uint32),
                ("write_threshold", ctypes.c_uint32), ("gran_order", ctypes.c_uint32),
                ("wb_window_ns", ctypes.c_uint64), ("wr_window_ns", ctypes.c_uint64),
                ("bypass_share_pct", ctypes.c_uint32), ("bypass_block", ctypes.c_uint32),
                ("bypass_floor", ctypes.c_uint64), ("bypass_window_ns", ctypes.c_uint64)]

    @classmethod
    def from_dict(cls, d):
        """From tunables by name (tdax get --json); bypass mode's default
        where they are missing (a trace recorded before them)."""
        return cls(d["upgrade_threshold"], d["downgrade_threshold"], d["write_threshold"],
                   d["granularity_order"], d["writeback_window_ms"] * 1000000,
                   d["write_window_ms"] * 1000000, d.get("bypass_share_pct", 50),
                   d.get("bypass_block", 4096), d.get("bypass_floor", 0),
                   d.get("bypass_window_ms", 1000) * 1000000)


class Range(ctypes.Structure):
    _fields_ = [("state", ctypes.c_uint32), ("dirty", ctypes.c_uint32), ("last_page", ctypes.c_uint32),
                ("transitions", ctypes.c_uint32), ("wr", ctypes.c_uint64 * 8), ("wb", ctypes.c_uint64 * 8),
                ("sy", ctypes.c_uint64 * 8), ("stream_ns", ctypes.c_uint64), ("synced_ns", ctypes.c_uint64)]


class Legacy(ctypes.Structure):
    """struct tdax_track_legacy: what a removed file's first range leaves an heir."""
    _fields_ = [("writes", ctypes.c_uint32), ("writebacks", ctypes.c_uint32), ("syncs", ctypes.c_uint32),
                ("upgraded", ctypes.c_bool)]


class Window(ctypes.Structure):
    """struct tdax_window (src/core/ranges.h): TDAX_WIN_BUCKETS buckets."""
    _fields_ = [("b", ctypes.c_uint64 * 8)]


class Profile(ctypes.Structure):
    """struct tdax_profile (src/policy/select.h): units of 64 bytes read, written
    in place, appended; writes; syncs."""
    _fields_ = [("rd", Window), ("wr", Window), ("ap", Window), ("ops", Window), ("sy", Window)]


class Rates(ctypes.Structure):
    """struct tdax_rates: bytes and writes per second; syncs: how many in
    the window (a count)."""
    _fields_ = [("read", ctypes.c_uint64), ("write", ctypes.c_uint64), ("append", ctypes.c_uint64),
                ("ops", ctypes.c_uint64), ("syncs", ctypes.c_uint64)]


class SelectParams(ctypes.Structure):
    """struct tdax_select_params."""
    _fields_ = [("capacity", ctypes.c_uint64), ("floor", ctypes.c_uint64), ("hold_ns", ctypes.c_uint64),
                ("append_hold_ns", ctypes.c_uint64), ("keep_pct", ctypes.c_uint32)]


class Candidate(ctypes.Structure):
    """struct tdax_candidate: rates and promoted in; score, footprint and
    selected out."""
    _fields_ = [("rates", Rates), ("score", ctypes.c_uint64), ("footprint", ctypes.c_uint64),
                ("promoted", ctypes.c_bool), ("selected", ctypes.c_bool)]


def carry_page(gran_order):
    """src/policy/track.h, tdax_track_carry_page."""
    pages = 1 << gran_order
    return pages - max(pages // 4, 1)


def load():
    if not LIB.exists():
        raise SystemExit(f"tdax sim: {LIB} is missing; run 'make'")
    lib = ctypes.CDLL(str(LIB))
    R, T, L = ctypes.POINTER(Range), ctypes.POINTER(Tunables), ctypes.POINTER(Legacy)
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    P, Ra = ctypes.POINTER(Profile), ctypes.POINTER(Rates)
    C, SP = ctypes.POINTER(Candidate), ctypes.POINTER(SelectParams)
    sig = {"tdax_track_write": (None, [R, T, u64, u64, u64]),
           "tdax_track_sync": (ctypes.c_int, [R, T, u64, ctypes.c_bool]),
           "tdax_track_reevaluate": (ctypes.c_int, [R, T, u64]),
           "tdax_track_metric": (ctypes.c_int, [R, T, u64]),
           "tdax_track_force_downgrade": (ctypes.c_bool, [R]),
           "tdax_track_job_begin": (ctypes.c_int, [R]),
           "tdax_track_job_end": (None, [R, ctypes.c_int, ctypes.c_bool]),
           "tdax_track_carry": (ctypes.c_bool, [R, R, T, u64]),
           "tdax_track_adapt": (None, [R, T, u64, u32, T]),
           "tdax_track_reaction": (u64, [R, ctypes.c_int, u64]),
           "tdax_track_bequeath": (None, [R, T, u64, L]),
           "tdax_track_inherit": (ctypes.c_bool, [R, L, T, u64]),
           "tdax_profile_read": (None, [P, u64, u64, u64]),
           "tdax_profile_write": (None, [P, u64, u64, u64, ctypes.c_bool]),
           "tdax_profile_sync": (None, [P, u64, u64]),
           "tdax_profile_rates": (None, [P, u64, u64, Ra]),
           "tdax_select_bandwidth": (u64, [Ra]),
           "tdax_select_total": (u64, [C, ctypes.c_size_t, SP]),
           "tdax_select": (u64, [C, ctypes.POINTER(u32), ctypes.c_size_t, SP]),
           "tdax_select_due": (ctypes.c_bool, [u64, u64]),
           "tdax_select_over": (ctypes.c_bool, [C, ctypes.c_size_t, SP])}
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib
