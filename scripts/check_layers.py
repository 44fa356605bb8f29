#!/usr/bin/env python3
"""check_layers -- the rules of src/ (docs/design.md, "Layers"), checked on
the sources and on the objects the build made:

1. Every dependency points down. The layers, lowest first: core (src/core),
   policy (src/policy), then preload (src/preload) and cli (src/cli), which
   never depend on each other. An #include "layer/file.h" or a call of a
   function another file defines is a dependency.
2. No circle: no two files depend on each other, directly or through others
   (a file and its own header are one file).
3. Policy is pure: its objects call nothing outside policy but the C
   library's memory functions (no I/O, no clock: time is passed in).
4. No object of libtdax.so but the hooks (src/preload/interpose*.c) calls a
   name libtdax.so hooks: such a call would come back into tdax (use
   core/sys.h or tdax_real).

Usage: check_layers.py --lib build/lib/libtdax.so build/obj
Exit status 0 when every rule holds; otherwise each breach on stderr."""
import argparse
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
RANK = {"core": 0, "policy": 1, "preload": 2, "cli": 2}
PURE_OK = {"memset", "memcpy", "memmove", "memcmp", "__stack_chk_fail"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+/[a-z_0-9]+)\.h"', re.M)


def may_depend(a, b):
    """May module a ("layer/name") depend on module b?"""
    la, lb = a.split("/")[0], b.split("/")[0]
    return la == lb or RANK[lb] < RANK[la]


def nm(path, *args):
    out = subprocess.run(["nm", *args, str(path)], capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def include_edges():
    edges = defaultdict(set)
    for f in sorted(SRC.glob("*/*.[ch]")):
        mod = f"{f.parent.name}/{f.stem}"
        for target in INCLUDE.findall(f.read_text()):
            if target != mod:
                edges[mod].add((target, "#include"))
    return edges


def call_edges(objdir):
    defined, wanted = {}, defaultdict(set)
    for o in sorted(Path(objdir).glob("*/*.o")):
        mod = f"{o.parent.name}/{o.stem}"
        if not (SRC / f"{mod}.c").exists():
            continue  # left by an older build of a file since removed
        for row in nm(o):
            if len(row) == 2 and row[0] == "U":
                wanted[mod].add(row[1])
            elif len(row) == 3 and row[1] in "TDBRVW":
                defined.setdefault(row[2], mod)
    edges = defaultdict(set)
    for mod, names in wanted.items():
        for name in names:
            if name in defined and defined[name] != mod:
                edges[mod].add((defined[name], name))
    return edges, wanted, defined


def circles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    nodes = set(edges) | {b for v in edges.values() for b, _ in v}

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w, _ in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="libtdax.so, for the names it hooks")
    ap.add_argument("objdir", help="the build's object folder (OBJDIR/LAYER/FILE.o)")
    a = ap.parse_args()

    hooks = {row[2] for row in nm(a.lib, "-D", "--defined-only")
             if len(row) == 3 and row[1] in "TW" and not row[2].startswith("tdax_")}
    calls, wanted, _ = call_edges(a.objdir)
    edges = include_edges()
    for mod, deps in calls.items():  # a hooked name is the C library's (rule 4)
        edges[mod] |= {(d, name) for d, name in deps if name not in hooks}
    bad = []
    for mod in sorted(edges):
        for dep, why in sorted(edges[mod]):
            if dep.split("/")[0] not in RANK:
                bad.append(f"{mod} depends on {dep}, a folder of no layer")
            elif not may_depend(mod, dep):
                bad.append(f"{mod} -> {dep} ({why}) points up or across: "
                           f"{mod.split('/')[0]} may not depend on {dep.split('/')[0]}")
    for comp in circles(edges):
        ties = [f"{m} -> {d} ({w})" for m in comp for d, w in sorted(edges[m]) if d in comp]
        bad.append("circle: " + ", ".join(comp) + "\n    " + "\n    ".join(ties))
    for mod in sorted(wanted):
        if mod.startswith("policy/"):
            outside = sorted(n for n in wanted[mod] if n not in PURE_OK and
                             not (calls.get(mod) and any(n == w and d.startswith("policy/")
                                                         for d, w in calls[mod])))
            if outside:
                bad.append(f"{mod} is policy and must stay pure, but calls {' '.join(outside)}")
    for mod in sorted(wanted):
        if mod.startswith("cli/") or mod.startswith("preload/interpose"):
            continue
        hit = sorted(wanted[mod] & hooks)
        if hit:
            bad.append(f"{mod} calls names libtdax.so hooks: {' '.join(hit)} "
                       "(use core/sys.h or tdax_real)")
    for b in bad:
        print("check_layers: " + b, file=sys.stderr)
    if bad:
        return 1
    print(f"check_layers: {a.objdir}: {len(edges)} files, every dependency points down, "
          "no circle, policy pure, no hooked name called")
    return 0


if __name__ == "__main__":
    sys.exit(main())
