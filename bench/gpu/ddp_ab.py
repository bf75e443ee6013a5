#!/usr/bin/env python3
"""The DDP hook's step time from two builds of the package on the same GPU, interleaved.

Runs bench/gpu/ddp_resnet18.py (one round of each variant per process) alternately under two
Python interpreters, each with its own build of exdyna installed (this tree's, and an earlier
revision's: scripts/gpu-ab-prepare.sh), so a change in the hook's cost is told apart from a
change of machine: both builds are timed on one machine, in alternating rounds.

    python3 bench/gpu/ddp_ab.py --new /tmp/venv/bin/python --old /tmp/venv-ab/bin/python \\
        --old-rev 5ed3039 --out ddp_ab.json

Writes one JSON: per build, per variant, each round's median (ms/step) and the median of the
rounds, and the ratio of each exdyna variant to the same build's built-in DDP. Exit status: 0 all
rounds measured, 1 a round failed (its error is in the JSON), 2 bad arguments.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = "builtin,allreduce_hook,exdyna,exdyna_sync"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--new", required=True, metavar="PYTHON", help="interpreter with this build")
    p.add_argument("--old", required=True, metavar="PYTHON", help="interpreter with the other")
    p.add_argument("--old-rev", default="?", help="the other build's revision, for the record")
    p.add_argument("--rounds", type=int, default=2, help="rounds per build (default 2)")
    p.add_argument("--quick", action="store_true", help="ddp_resnet18.py --quick")
    p.add_argument("--cpu-dry-run", action="store_true",
                   help="ddp_resnet18.py --cpu-dry-run: check this script without a GPU")
    p.add_argument("--out", required=True, metavar="FILE", help="the JSON to write")
    a = p.parse_args(argv)
    if a.rounds < 1:
        p.error(f"--rounds {a.rounds}: expected at least 1")
    for name in ("new", "old"):
        if not os.access(getattr(a, name), os.X_OK):
            p.error(f"--{name} {getattr(a, name)}: not an executable interpreter")
    return a


def one_round(python, args, workdir, tag):
    """One process of ddp_resnet18.py; its JSON, or {"error": ...}."""
    out = os.path.join(workdir, f"{tag}.json")
    cmd = [python, os.path.join(HERE, "ddp_resnet18.py"), "--rounds", "1", "--variants",
           VARIANTS, "--out", out]
    cmd += ["--quick"] if args.quick else []
    cmd += ["--cpu-dry-run"] if args.cpu_dry_run else []
    # from a folder outside the tree, so `import exdyna` finds the installed build
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=240)
    sys.stdout.write(proc.stdout[-1500:])
    if proc.returncode != 0 or not os.path.exists(out):
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-800:]}"}
    with open(out) as f:
        return json.load(f)


def merge(rounds):
    """{variant: {round_medians_ms, median_ms}} and the exdyna/builtin ratios of one build."""
    per = {}
    for r in rounds:
        for v, res in r.get("variants", {}).items():
            if "median_ms" in res:
                per.setdefault(v, []).append(res["median_ms"])
    out = {v: {"round_medians_ms": ms, "median_ms": statistics.median(ms)}
           for v, ms in per.items()}
    for r in rounds:  # the last round's phases (ddp_resnet18.py's medians of its steps)
        for v, res in r.get("variants", {}).items():
            if "phases" in res and v in out:
                out[v]["phases"] = res["phases"]
    base = out.get("builtin", {}).get("median_ms")
    ratios = {f"{v}_over_builtin": out[v]["median_ms"] / base
              for v in out if v != "builtin" and base}
    return out, ratios


def main(argv=None):
    a = parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="exdyna-ddp-ab-")
    runs = {"new": [], "old": []}
    errors = []
    for i in range(a.rounds):
        for side in ("new", "old"):
            r = one_round(getattr(a, side), a, workdir, f"{side}-{i}")
            if "error" in r:
                errors.append(f"{side} round {i}: {r['error']}")
            runs[side].append(r)
    result = {"bench": "ddp_ab", "old_rev": a.old_rev, "rounds": a.rounds, "quick": a.quick,
              "variants": VARIANTS.split(","), "errors": errors, "builds": {}}
    for side, rounds in runs.items():
        ok = [r for r in rounds if "error" not in r]
        merged, ratios = merge(ok)
        result["builds"][side] = {"variants": merged, "ratios": ratios,
                                  "device": ok[0].get("device") if ok else None}
    with open(a.out, "w") as f:
        f.write(json.dumps(result, indent=2) + "\n")
    print(f"\nddp_ab: this build against {a.old_rev}, {a.rounds} interleaved rounds (ms/step)")
    for side, b in result["builds"].items():
        cells = ", ".join(
            f"{v} {x['median_ms']:.2f} (" + ", ".join(f"{m:.2f}" for m in x["round_medians_ms"])
            + ")" for v, x in b["variants"].items())
        print(f"  {side}: {cells}")
        print("    " + ", ".join(f"{k} {v:.3f}" for k, v in b["ratios"].items()))
    for e in errors:
        print(f"  error: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
