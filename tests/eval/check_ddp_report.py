#!/usr/bin/env python3
"""Checks a DDP head-to-head's output (`exdyna compare --ddp`) against its own files:

    check_ddp_report.py OUT MODELS HOOKS WORKERS BANDWIDTHS [SEEDS]   (lists comma-separated)

WORKERS: hosts, or HOSTSxRANKS for several ranks per host (--ddp-ranks-per-host).

- summary.csv has one row per (model, hook, workers, bandwidth) asked for, and report.md a table
  row for each: a failed run is a row that says why, never a missing one;
- every number of a run that finished is re-derived here from runs/<run>/steps.csv (medians after
  the first two steps, mean bytes, the 3-evaluation means of accuracy and held-out loss, the first
  crossing of the stated target by the model's measure: accuracy rising to it for the CNN,
  held-out loss falling to it for the LSTM) and must equal summary.csv's and the report's;
- the step times add up: step = compute + hook + wait wherever wait is above 0;
- with SEEDS > 1, a row per seed in summary.csv and, per setting, a row per hook giving how many
  seeds reached the target and their mean time to it.
Exit 0 when all hold, 1 with every difference listed otherwise.
"""
import csv
import math
import os
import statistics
import sys


def steps(path):
    with open(path) as f:
        lines = [l for l in f if not l.startswith("#")]
    rows = list(csv.DictReader(lines))
    return [{k: (float(v) if v != "" else None) for k, v in r.items()} for r in rows]


def means(rows, col):
    """(evaluated rows, the mean of each evaluation's col and the two before it)."""
    evals = [r for r in rows if r.get(col) is not None]
    return evals, [sum(e[col] for e in evals[max(0, i - 2):i + 1]) / len(evals[max(0, i - 2):i + 1])
                   for i in range(len(evals))]


def derive(rows, model, target):
    timed = rows[2:] if len(rows) > 2 else rows
    out = {k: statistics.median(r[k] for r in timed)
           for k in ("step_ms", "compute_ms", "hook_ms", "wait_ms")}
    out["bytes_per_step"] = sum(r["bytes"] for r in rows) / len(rows)
    for col in ("acc", "val_loss"):
        values = means(rows, col)[1]
        out[f"final_{col}"] = values[-1] if values else None
    if model in ("cnn", "resnet18"):  # accuracy rises to the target
        evals, acc = means(rows, "acc")
        hit = [e["wall_s"] for e, a in zip(evals, acc) if a >= target]
    else:
        evals, loss = means(rows, "val_loss")
        hit = [e["wall_s"] for e, v in zip(evals, loss) if v <= target]
    out["time_to_target_s"] = hit[0] if hit else None
    return out


def close(a, b, tol):
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def ranks_per_host(row):
    return int(row.get("ranks_per_host") or 1)


def hosts_text(row):
    p = ranks_per_host(row)
    return f"{row['workers']} hosts" + (f" x {p} ranks" if p > 1 else "")


def run_name(row):
    seed, p = int(row.get("seed") or 0), ranks_per_host(row)
    return (f"{row['model']}-{row['hook']}-w{row['workers']}{f'x{p}' if p > 1 else ''}"
            f"-b{row['bandwidth']}" + (f"-s{seed}" if seed else ""))


def check_run(out, row, problems):
    name = run_name(row)
    if row["status"] != "ok":
        if not row["why"].strip():
            problems.append(f"{name}: failed without a reason")
        return name
    rows = steps(os.path.join(out, "runs", name, "steps.csv"))
    if len(rows) != int(row["steps"]) or not rows:
        problems.append(f"{name}: {len(rows)} steps in its CSV, summary says {row['steps']}")
        return name
    for r in rows:
        if r["wait_ms"] > 0 and not close(r["step_ms"], r["compute_ms"] + r["hook_ms"] +
                                          r["wait_ms"], 2e-3):
            problems.append(f"{name}: step {r['step']:.0f} does not add up")
    want = derive(rows, row["model"], float(row["target"]))
    for k, v in want.items():
        got = row[k]
        if v is None:
            if got != "":
                problems.append(f"{name}: {k} is {got}, expected none")
        elif got == "" or not close(float(got), v, 1e-3):
            problems.append(f"{name}: {k} is {got!r} in summary.csv, derived {v}")
    return name


def check_report(out, summary, problems):
    with open(os.path.join(out, "report.md")) as f:
        report = f.read()
    settings = {}
    for row in summary:
        settings.setdefault((row["model"], hosts_text(row), row["bandwidth"]), []).append(row)
    for (model, hosts, bw), rows in settings.items():
        if len({r["seed"] for r in rows}) > 1:
            check_seed_rows(report, f"## {model}, {hosts}, {bw}", rows, problems)
    for row in summary:
        setting_rows = settings[(row["model"], hosts_text(row), row["bandwidth"])]
        if len({r["seed"] for r in setting_rows}) > 1:
            continue
        cell = (f"failed: {row['why']}".replace("|", "\\|") if row["status"] != "ok"
                else (f"{float(row['time_to_target_s']):.1f}" if row["time_to_target_s"]
                      else "not reached"))
        first = f"| {row['hook']} | {cell}"
        setting = f"## {row['model']}, {hosts_text(row)}, {row['bandwidth']}"
        section = report.split(setting, 1)[1].split("\n## ", 1)[0] if setting in report else ""
        if first not in section:
            problems.append(f"report.md: no row '{first}' under '{setting}'")
        elif row["status"] == "ok" and row["step_ms"]:
            line = next(l for l in section.splitlines() if l.startswith(first))
            if f"| {float(row['step_ms']):.1f} |" not in line:
                problems.append(f"report.md: {row['hook']} at {setting}: step ms not "
                                f"{float(row['step_ms']):.1f}: {line}")


def check_seed_rows(report, setting, rows, problems):
    """A setting of several seeds: one row per hook with its seed count, how many reached the
    target, and the mean (± sample deviation) time to target of those that did."""
    section = report.split(setting, 1)[1].split("\n## ", 1)[0] if setting in report else ""
    for hook in sorted({r["hook"] for r in rows}):
        runs = [r for r in rows if r["hook"] == hook]
        times = [float(r["time_to_target_s"]) for r in runs
                 if r["status"] == "ok" and r["time_to_target_s"]]
        start = f"| {hook} | {len(runs)}"
        line = next((l for l in section.splitlines() if l.startswith(start)), None)
        if line is None:
            problems.append(f"report.md: no seed row '{start}' under '{setting}'")
            continue
        if f"| {len(times)} of {len(runs)} |" not in line:
            problems.append(f"report.md: {hook} at {setting}: not '{len(times)} of {len(runs)}' "
                            f"seeds reached: {line}")
        if times:
            mean = f"{statistics.mean(times):.1f}"
            if f"| {mean}" not in line:
                problems.append(f"report.md: {hook} at {setting}: mean time {mean} missing: {line}")


def main(argv):
    out, models, hooks, workers, bws = argv[1], *(a.split(",") for a in argv[2:6])
    seeds = int(argv[6]) if len(argv) > 6 else 1
    with open(os.path.join(out, "summary.csv")) as f:
        summary = list(csv.DictReader(f))
    problems = []
    seen = {check_run(out, r, problems) for r in summary}
    for m in models:
        for h in hooks:
            for w in workers:
                for b in bws:
                    for seed in range(seeds):
                        name = f"{m}-{h}-w{w}-b{b}" + (f"-s{seed}" if seed else "")
                        if name not in seen:
                            problems.append(f"no row for {name} in summary.csv")
    check_report(out, summary, problems)
    pngs = [f for f in os.listdir(out)
            if f.startswith(("fig-acc-", "fig-loss-")) and f.endswith(".png")]
    if any(r["status"] == "ok" for r in summary) and not pngs:
        problems.append("no accuracy figure was drawn")
    for p in problems:
        print("check_ddp_report:", p)
    print(f"check_ddp_report: {len(summary)} runs, "
          f"{sum(r['status'] == 'ok' for r in summary)} finished, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
