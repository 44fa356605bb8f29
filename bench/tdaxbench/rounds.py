"""rounds -- the interleaved rounds of a `tdax bench` suite and their control.

A round runs every configuration once, side by side: without tdax, under
each tdax configuration, then the next configuration (A B C, D E F, ...);
every other round runs each configuration's modes the other way round
(C B A, F E D, ...), so that what a run leaves the next one (a disk still
busy, caches another mode filled) does not fall on the same mode in every
round. The first configuration without tdax runs again as the round's last
run (A'): the control pair. A'/A is 1.0 on a quiet machine; a round whose
control is off by more than the noise threshold runs again, up to `retries`
more times, and the attempt whose control is nearest 1.0 is kept (marked
noisy if it is still off). Ratios are taken within a round, then their
median and spread across rounds reported (report.py).
"""
import statistics


def plan(cfgs, policies, combos=()):
    """An even round, in the order it runs (in_order: an odd one):
    (config, mode, sweep, control); the control run is the first
    configuration's without tdax once more, at its end."""
    runs = [(c, m, None, False) for c in cfgs for m in ["default"] + list(policies)]
    runs += [(c, "thesis", combo, False) for combo in combos for c in cfgs if c.sync]
    return runs + [(cfgs[0], "default", None, True)]


def in_order(runs, rnd):
    """Round rnd's runs: plan()'s, each configuration's modes the other way
    round in odd rounds (the sweep's and the control run stay where they
    are)."""
    if rnd % 2 == 0:
        return runs
    out, group = [], []
    for run in runs:
        c, _, combo, ctl = run
        if combo is None and not ctl and (not group or group[0][0] is c):
            group.append(run)
            continue
        out += group[::-1]
        group = [run] if combo is None and not ctl else []
        if not group:
            out.append(run)
    return out + group[::-1]


def control_ratio(rows):
    """A'/A of one attempt of a round: its control run over the first run
    of the same configuration without tdax (None without a control run)."""
    last = next((r for r in rows if r.get("control")), None)
    if last is None:
        return None
    first = next((r for r in rows if r["config"] == last["config"] and r["mode"] == "default"
                  and not r.get("control") and not r.get("sweep")), None)
    return last["value"] / first["value"] if first and first["value"] else float("inf")


def noisy(ratio, noise):
    """Whether a control ratio is off 1.0 by more than noise (a fraction)."""
    return ratio is not None and abs(ratio - 1) > noise + 1e-9


def run(runs, measure, repeat, noise=0.10, retries=2, note=None):
    """The rows of `repeat` rounds of runs (plan()); measure(config, mode,
    sweep) -> value. Every attempt's rows are returned, the kept attempt's
    with kept=True; note(round, attempt, control ratio, again) after each
    attempt (again: the round runs once more)."""
    rows = []
    for rnd in range(repeat):
        attempts = []
        for attempt in range(retries + 1):
            rs = [{"config": c.name, "mode": m, "rep": rnd, "attempt": attempt, "control": ctl,
                   "value": measure(c, m, combo), "unit": c.unit, "sweep": combo}
                  for c, m, combo, ctl in in_order(runs, rnd)]
            attempts.append(rs)
            ratio = control_ratio(rs)
            again = noisy(ratio, noise) and attempt < retries
            if note:
                note(rnd, attempt, ratio, again)
            if not again:
                break
        best = min(attempts, key=lambda rs: abs((control_ratio(rs) or 1) - 1))
        for rs in attempts:
            for r in rs:
                r["kept"] = rs is best
                rows.append(r)
    return rows


def spread(values):
    """(median, min, max, n) of a list of numbers; None if it is empty."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values), len(values)


def control(rows, noise):
    """The control pair across a suite's rounds: the config, the kept
    rounds' control ratios, their spread, how many attempts ran again and
    which kept rounds are still noisy. None for rows without control runs."""
    by = {}
    for r in rows:
        by.setdefault((r["rep"], r.get("attempt", 0)), []).append(r)
    kept = {rep: control_ratio(rs) for (rep, _), rs in by.items() if rs[0].get("kept", True)}
    ctl = next((r["config"] for r in rows if r.get("control")), None)
    if ctl is None:
        return None
    ratios = [kept[rep] for rep in sorted(kept)]
    med, lo, hi, n = spread(ratios)
    return {"config": ctl, "noise": noise, "rounds": n, "ratios": ratios, "median": med, "min": lo,
            "max": hi, "repeated": len(by) - len(kept),
            "noisy": [rep for rep in sorted(kept) if noisy(kept[rep], noise)]}
