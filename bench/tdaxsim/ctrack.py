"""ctrack -- the runtime's policy code (src/policy/track.c, built as
build/lib/libtdaxtrack.so) through ctypes: the simulator decides exactly as
the runtime does. The tdax command names the library in TDAX_TRACK_LIB (an
installed tdax's is beside libtdax.so); else the build tree's."""
import ctypes
import os
from pathlib import Path

LIB = Path(os.environ.get("TDAX_TRACK_LIB")
           or Path(__file__).resolve().parents[2] / "build" / "lib" / "libtdaxtrack.so")
KEEP, UPGRADE, DOWNGRADE = 0, 1, 2
NONE, TO_UPGRADE, UPGRADING, UPGRADED, TO_DOWNGRADE, DOWNGRADING = range(6)
LOGGED = {UPGRADED, TO_DOWNGRADE, DOWNGRADING}


class Tunables(ctypes.Structure):
    _fields_ = [("upgrade_pct", ctypes.c_uint32), ("downgrade_pct", ctypes.c_uint32),
                ("write_threshold", ctypes.c_uint32), ("gran_order", ctypes.c_uint32),
                ("wb_window_ns", ctypes.c_uint64), ("wr_window_ns", ctypes.c_uint64)]

    @classmethod
    def from_dict(cls, d):
        return cls(d["upgrade_threshold"], d["downgrade_threshold"], d["write_threshold"],
                   d["granularity_order"], d["writeback_window_ms"] * 1000000,
                   d["write_window_ms"] * 1000000)


class Range(ctypes.Structure):
    _fields_ = [("state", ctypes.c_uint32), ("dirty", ctypes.c_uint32), ("last_page", ctypes.c_uint32),
                ("transitions", ctypes.c_uint32), ("wr", ctypes.c_uint64 * 8), ("wb", ctypes.c_uint64 * 8),
                ("sy", ctypes.c_uint64 * 8), ("stream_ns", ctypes.c_uint64), ("synced_ns", ctypes.c_uint64)]


class Legacy(ctypes.Structure):
    """struct tdax_track_legacy: what a removed file's first range leaves an heir."""
    _fields_ = [("writes", ctypes.c_uint32), ("writebacks", ctypes.c_uint32), ("syncs", ctypes.c_uint32),
                ("upgraded", ctypes.c_bool)]


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
           "tdax_track_inherit": (ctypes.c_bool, [R, L, T, u64])}
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib
