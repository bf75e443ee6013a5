#!/usr/bin/env python3
"""Issue 12's density table: the exact controller (exact balance, worker cap auto) on the synthetic
source and on recorded traces, d = 0.01 and 0.001, with and without scale steps, from the
per-iteration statistics of `exdyna simulate --stats`.

usage: scripts/exact_density_table.py EXDYNA [TRACE_DIR ...]

Prints one markdown row per (source, W, d, steps): density / d from iteration 0 (min and the
iteration where it falls), iterations more than 1 % from d, mean f(t) and the Poisson floor
1 + sqrt(2 ln W / (k / W)) it is held to. A trace fixes its workers; the synthetic source runs 8
and 16 workers, 2^20 values, 300 iterations.
"""
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

EXACT = ["--controller", "exact", "--balance", "exact", "--worker-cap", "auto"]


def run(exdyna, source, density, steps):
    with tempfile.TemporaryDirectory() as tmp:
        stats = os.path.join(tmp, "stats.csv")
        cmd = [exdyna, "simulate", *source, "--density", str(density), *EXACT, *steps,
               "--stats", stats]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        with open(stats, newline="") as f:
            return list(csv.DictReader(f))


def row(name, rows, density, steps):
    ratio = [float(r["density"]) / float(r["target_density"]) for r in rows]
    f_t = [float(r["f_t"]) for r in rows]
    w = int(rows[0]["world_size"])
    k = float(rows[0]["k_target"])
    floor = 1 + math.sqrt(2 * math.log(w) / (k / w))
    worst = min(range(len(ratio)), key=lambda i: ratio[i])
    outside = sum(abs(x - 1) > 0.01 for x in ratio)
    return (f"| {name} | {w} | {density} | {' '.join(steps[1::2]) or '-'} | {ratio[0]:.4f} | "
            f"{ratio[worst]:.4f} (it {worst}) | {max(ratio):.4f} | {outside} of {len(ratio)} | "
            f"{sum(f_t) / len(f_t):.3f} | {floor:.3f} |")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    exdyna, traces = sys.argv[1], sys.argv[2:]
    sources = []
    for w in (8, 16):
        sources.append(("synthetic 2^20", ["--n-grad", "1048576", "--workers", str(w),
                                           "--iterations", "300"],
                        ["--scale-step", "100:0.1", "--scale-step", "200:10"]))
    for t in traces:
        with open(os.path.join(t, "meta.json")) as f:
            iters = int(json.load(f).get("iterations", 16))
        a, b = max(1, iters // 2), max(2, 3 * iters // 4)
        sources.append((os.path.basename(t.rstrip("/")), ["--trace", t],
                        ["--scale-step", f"{a}:0.1", "--scale-step", f"{b}:10"]))
    print("| source | W | d | scale steps | iteration 0 | min (where) | max | outside +-1 % "
          "| mean f(t) | floor |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, source, step_args in sources:
        for density in (0.01, 0.001):
            for steps in ([], step_args):
                rows = run(exdyna, source, density, steps)
                print(row(name, rows, density, steps), flush=True)


if __name__ == "__main__":
    main()
