#!/usr/bin/env python3
"""Issue 12's per-worker cost model of the selection: from the CSV of `exdyna bench select
--per-step FILE`, a least-squares fit per mode of each worker's select CPU time against what it
grows with, over the steps after iteration 0 (the cold start is a step of its own):

    paper:  time = fixed + per_value * partition + per_kept * kept
    exact:  time = fixed + per_value * partition + per_candidate * candidates

usage: scripts/select_cost_model.py STEPS_CSV [--series solo|group]

Prints one markdown row per mode: the coefficients, and the mean time split into its three terms
(fixed, values, candidates or kept), which add up to the mean of the fitted steps. The solo series
(each worker alone, the least of its runs) is the default; the group series has the noise of W
threads on the machine's cores in it.
"""
import argparse
import csv
import sys


def solve(a, b):
    """Least squares: the x minimising |a x - b| (normal equations, Gauss-Jordan with pivoting)."""
    n = len(a[0])
    m = [[sum(r[i] * r[j] for r in a) for j in range(n)] + [sum(r[i] * y for r, y in zip(a, b))]
         for i in range(n)]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(m[r][i]))
        if abs(m[p][i]) < 1e-12:
            raise ValueError("the fit is singular: a feature is constant or a copy of another "
                             "over these steps (e.g. every partition the same length)")
        m[i], m[p] = m[p], m[i]
        for r in range(n):
            if r != i:
                f = m[r][i] / m[i][i]
                m[r] = [x - f * y for x, y in zip(m[r], m[i])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(rows, third):
    """rows: dicts with partition, `third` (candidates or kept) and select_cpu_us. Returns the
    coefficients (fixed us, us per value, us per `third`) and the mean of each term."""
    a = [[1.0, float(r["partition"]), float(r[third])] for r in rows]
    b = [float(r["select_cpu_us"]) for r in rows]
    c = solve(a, b)
    means = [sum(c[j] * x[j] for x in a) / len(a) for j in range(3)]
    return c, means


def load(path, series):
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["series"] == series and int(r["iteration"]) > 0]
    if not rows:
        raise ValueError(f"{path}: no {series} steps after iteration 0")
    return rows


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("steps_csv")
    ap.add_argument("--series", choices=["solo", "group"], default="solo")
    args = ap.parse_args(argv)
    try:
        rows = load(args.steps_csv, args.series)
    except (OSError, KeyError, ValueError) as e:
        print(f"select_cost_model: {e}", file=sys.stderr)
        return 2
    print("| mode | steps | fixed (us) | per value (ns) | per candidate or kept (ns) "
          "| mean: fixed + values + candidates or kept (us) |")
    print("|---|---|---|---|---|---|")
    for mode, third in (("paper", "kept"), ("exact", "candidates")):
        mine = [r for r in rows if r["mode"] == mode]
        if not mine:
            continue
        try:
            c, means = fit(mine, third)
        except ValueError as e:
            print(f"select_cost_model: {mode}: {e}", file=sys.stderr)
            return 2
        print(f"| {mode} | {len(mine)} | {c[0]:.2f} | {c[1] * 1e3:.3f} | {third} {c[2] * 1e3:.2f} "
              f"| {means[0]:.2f} + {means[1]:.2f} + {means[2]:.2f} = {sum(means):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
