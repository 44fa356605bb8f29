"""pmreorder -- crash images from a persist-order trace, recovered and checked (issue #5).

A small pmreorder of our own, for ADR machines, where a store reaches the
media only if a cache flush wrote it back, and is sure to have done so only
after the next fence. tdax-pmorder (tests/crash/pmorder.c) writes records
the way the runtime does, with the device's primitives traced
(TDAX_TEST_PERSIST_TRACE, src/core/pmtrace.h; a test aid, so tdax-pmorder is
linked with the test build): every flush with the bytes it persists, every
fence, every acknowledgement; it fails if the trace could not be written in
full. The recoveries run the product (build/bin/tdax). For every fence k this builds
the device image a power cut could leave: every flush before fence k, plus
none, all, or random subsets of the cache lines flushed between fence k and
fence k+1. The file gets the contents of its last real sync (the page cache
is gone); `tdax recover --power-failure` runs on the image, and every record
acknowledged before fence k+1 must be in the file.

Positive control (--control): the same with the fences left out of the trace
(a tdax that never fences, TDAX_TEST_PERSIST_TRACE_NOFENCE=1), cut at every
acknowledgement: some image must lose an acknowledged record, or the check
cannot see a loss.

usage: pmreorder.py [--count N] [--subsets K] [--seed S] [--control]
exit status: 0 if no image lost an acknowledged record (and the control did)
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TDAX = str(ROOT / "build" / "bin" / "tdax")
PMORDER = str(ROOT / "build" / "tests" / "tdax-pmorder")
EVENT = struct.Struct("<B3xIQ")
LINE = 64
MARK_ACKED, MARK_SYNCED = 1, 2


def rec_len(i):
    return 1 + (i * 37) % 700


def pattern(i, n):
    return bytes((i * 7 + k) % 251 for k in range(n))


def layout(count):
    """(offset, length, range-owner) of each record, as tdax-pmorder writes them."""
    out, end = [], 0
    for i in range(count):
        src = i - 5 if i % 10 == 9 else i
        n = rec_len(src)
        off = end if src == i else out[src][0]
        end += n if src == i else 0
        out.append((off, n, src))
    return out


def read_trace(path):
    """The region size and a list of events: ('F', off, bytes), ('B',), ('M', tag, value)."""
    data = Path(path).read_bytes()
    if data[:8] != b"TDXPMTR1":
        sys.exit(f"pmreorder: {path} is not a persist-order trace")
    size, = struct.unpack_from("<Q", data, 8)
    pos, events = 16, []
    while pos < len(data):
        kind, n, off = EVENT.unpack_from(data, pos)
        pos += EVENT.size
        if kind == ord("F"):
            events.append(("F", off, data[pos:pos + n]))
            pos += n
        elif kind == ord("B"):
            events.append(("B",))
        else:
            events.append(("M", n, off))
    return size, events


def durable_file(recs, synced):
    """The file as its last real sync left it: records 0..synced, in order."""
    buf = bytearray()
    for i in range(synced + 1):
        off, n, _ = recs[i]
        if len(buf) < off + n:
            buf.extend(b"\0" * (off + n - len(buf)))
        buf[off:off + n] = pattern(i, n)
    return bytes(buf)


def lost_records(data, recs, acked):
    """Acknowledged records whose bytes are not in the file. A range holds
    its last acknowledged writer, or the one in flight after it."""
    lost = []
    for a in range(acked + 1):
        off, n, src = recs[a]
        if src != a:
            continue  # a rewrite: checked through the range it rewrote
        writer = a + 5 if a % 10 == 4 and a + 5 <= acked else a
        ok = {pattern(writer, n)}
        if a % 10 == 4 and a + 5 == acked + 1:
            ok.add(pattern(a + 5, n))
        if data[off:off + n] not in ok:
            lost.append(a)
    return lost


def images(size, base, events, subsets, rng, control=False):
    """Yield (image, acked, synced, what) for every fenced prefix and subsets
    of the epoch after it. The control (a trace without fences) is cut at
    every acknowledgement instead: the image without the lines flushed since
    the last cut must lose the record just acknowledged, so a check that
    can see a loss always sees one (cut only at fences, a control with few
    acknowledgements between real syncs could lose nothing by chance)."""
    img = bytearray(base)
    img.extend(b"\0" * (size - len(img)))
    acked = synced = -1
    epochs, cur = [], []
    for ev in events:  # split the trace at fences (the control: at acknowledgements)
        cur.append(ev)
        if ev[0] == "B" or (control and ev[0] == "M" and ev[1] == MARK_ACKED):
            epochs.append(cur)
            cur = []
    epochs.append(cur)
    for k, epoch in enumerate(epochs):
        lines = []  # the epoch's flushed cache lines, in order
        e_acked, e_synced = acked, synced
        for ev in epoch:
            if ev[0] == "F":
                lines += [(ev[1] + i, ev[2][i:i + LINE]) for i in range(0, len(ev[2]), LINE)]
            elif ev[0] == "M":
                e_acked = ev[2] if ev[1] == MARK_ACKED else e_acked
                e_synced = ev[2] if ev[1] == MARK_SYNCED else e_synced
        choices = [("none", []), ("all", lines)]
        choices += [(f"subset{j}", [ln for ln in lines if rng.random() < 0.5]) for j in range(subsets)]
        for what, chosen in choices:
            if what != "none" and not lines:
                continue
            out = bytearray(img)
            for off, b in chosen:
                out[off:off + len(b)] = b
            yield out, e_acked, e_synced, f"fence {k}, {what} of {len(lines)} lines"
        for off, b in lines:  # the fence: all of the epoch is persistent
            img[off:off + len(b)] = b
        acked, synced = e_acked, e_synced


def run(count, subsets, seed, control):
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="tdax-pmorder-", dir="/var/tmp") as tmp:
        dev = f"/dev/shm/tdax-pmorder-{os.getpid()}"
        file, trace = Path(tmp) / "log", Path(tmp) / "trace"
        try:
            subprocess.run([TDAX, "device", "create", "--device", dev, "--size", "8M", "--segment-size", "4K",
                            "--force"], check=True, capture_output=True)
            base = Path(dev).read_bytes()
            env = dict(os.environ, TDAX_TEST_PERSIST_TRACE=str(trace))
            if control:
                env["TDAX_TEST_PERSIST_TRACE_NOFENCE"] = "1"
            subprocess.run([PMORDER, dev, str(file), str(count)], check=True, env=env)
            size, events = read_trace(trace)
            recs = layout(count)
            checked = bad = 0
            first = ""
            for img, acked, synced, what in images(size, base, events, subsets, rng, control):
                Path(dev).write_bytes(img)
                with open(file, "r+b") as f:  # the same inode: its identity is registered
                    f.truncate(0)
                    f.write(durable_file(recs, synced))
                rec = subprocess.run([TDAX, "recover", "--device", dev, "--power-failure", "--json"],
                                     capture_output=True, text=True)
                lost = lost_records(file.read_bytes(), recs, acked)
                checked += 1
                if lost or rec.returncode != 0:
                    bad += 1
                    first = first or (f"{what}: acked up to {acked}, lost {lost[:5]}, recover exit "
                                      f"{rec.returncode} {rec.stderr.strip()[:200]}")
            return {"images": checked, "fences": sum(1 for e in events if e[0] == "B"), "bad": bad,
                    "first": first}
        finally:
            if os.path.exists(dev):
                os.unlink(dev)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=170, help="records written (default 170)")
    ap.add_argument("--subsets", type=int, default=2, help="random subsets per epoch (default 2)")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--control", action="store_true", help="also run the positive control")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    t0 = time.time()
    res = run(a.count, a.subsets, a.seed, False)
    print(f"pmreorder: seed {a.seed}, {a.count} records, {res['fences']} fences, {res['images']} crash images "
          f"recovered and checked in {time.time() - t0:.0f} s: {res['bad']} lost acknowledged records")
    if res["bad"]:
        print(f"  first: {res['first']}  (reproduce: --count {a.count} --seed {a.seed})")
    failed = bool(res["bad"])
    ctl = None
    if a.control:
        ctl = run(a.count, 0, a.seed, True)  # cut at every acknowledgement: "none" must lose
        caught = ctl["bad"] > 0
        print(f"pmreorder: control (no fences): {ctl['bad']} of {ctl['images']} images lost acknowledged "
              f"records: {'caught' if caught else 'NOT CAUGHT: the check cannot see a loss'}")
        failed |= not caught
    if a.json:
        Path(a.json).write_text(json.dumps({"run": res, "control": ctl}, indent=1))
    checks = [not res["bad"]] + ([bool(ctl["bad"])] if ctl else [])
    print(f"{sum(checks)} passed, {len(checks) - sum(checks)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
