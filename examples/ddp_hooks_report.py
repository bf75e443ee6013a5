#!/usr/bin/env python3
"""The report of the DDP head-to-head (`exdyna compare --ddp`), made only from the runs' files:
runs/<run>/steps.csv (examples/ddp_hooks.py's per-step CSV of rank 0) and runs/<run>/status.txt.

    python3 examples/ddp_hooks_report.py --out DIR

Writes DIR/summary.csv (one row per run, failed runs included), DIR/report.md (the tables, the
target, the figures) and the figures (fig-*.csv, fig-*.gp, fig-*.png; gnuplot redraws each from
its CSV). Standard library and gnuplot only.

Per run: step_ms, compute_ms, hook_ms, wait_ms are medians over the steps after the first two
(DDP builds its buckets and the hooks their state there); bytes_per_step is the mean over all
steps; an evaluation's accuracy (and held-out loss) is the mean of it and the two before it (a
short run's single evaluations are noisy); final_acc and final_val_loss are those at the last
evaluation. Each model has a measure: the CNN and ResNet-18 their accuracy; the LSTM and the
transformer their held-out loss (mean
cross-entropy; its next-word accuracy stays near that of always predicting the commonest word for
hundreds of steps, so crossing an accuracy target would be chance). time_to_target_s is the
training wall time (evaluations excluded) at the first evaluation whose measure reaches the
model's target. The target is one number per model, the same for every hook and setting:
--target MODEL=VALUE, else 95 % of the best accuracy (CNN) or 105 % of the lowest held-out loss
(LSTM) that plain DDP (allreduce) reached at any of the model's settings.
"""

import argparse
import csv
import math
import os
import re
import statistics
import subprocess
import sys

FIELDS = ["model", "device", "workers", "ranks_per_host", "bandwidth", "hook", "seed", "status",
          "steps",
          "step_ms", "compute_ms",
          "hook_ms", "wait_ms", "bytes_per_step", "final_acc", "best_acc", "final_val_loss",
          "best_val_loss", "measure", "target", "time_to_target_s", "torch", "why"]
# Each model's measure: the CSV column, whether higher is better, its name in the text.
MEASURE = {"cnn": ("acc", True, "accuracy"), "resnet18": ("acc", True, "accuracy"),
           "lstm": ("val_loss", False, "held-out loss"),
           "transformer": ("val_loss", False, "held-out loss")}
RUN = re.compile(r"(cnn|resnet18|lstm|transformer)-(.+)-w([0-9]+)(?:x([0-9]+))?-b([0-9]+[kmg]?bit)"
                 r"(?:-s([0-9]+))?")
HOOK_ORDER = ["allreduce", "fp16", "bf16", "powersgd", "exdyna-d", "exdyna-sync", "hsdp",
              "hsdp-exdyna"]
# The dense baselines whose best measure sets a model's target: DDP's all-reduce, else native
# HSDP (a race of HSDP hooks alone).
BASELINES = ["allreduce", "hsdp"]
RATE = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1}


def hosts_of(r):
    """A run's hosts as the report groups them: (hosts, ranks per host)."""
    return (r["workers"], r["ranks_per_host"])


def hosts_text(hosts):
    w, p = hosts
    return f"{w} hosts" if p == 1 else f"{w} hosts x {p} ranks"


def hosts_name(hosts):
    """As in the run names: w<hosts>, w<hosts>x<ranks per host>."""
    w, p = hosts
    return f"w{w}" if p == 1 else f"w{w}x{p}"


def rate_bps(name):
    m = re.fullmatch(r"([0-9]+)([kmg]?bit)", name)
    return int(m.group(1)) * RATE[m.group(2)]


def hook_key(h):
    """The report's order: HOOK_ORDER (the longest prefix that matches), ranks and densities from
    the least compressed."""
    matches = [i for i, p in enumerate(HOOK_ORDER) if h.startswith(p)]
    rank = max(matches, key=lambda i: len(HOOK_ORDER[i])) if matches else len(HOOK_ORDER)
    m = re.search(r"-r([0-9]+)$|-d([0-9.]+)$", h)
    size = (int(m.group(1)) if m.group(1) else -float(m.group(2))) if m else 0
    return (rank, size, h)


def read_steps(path):
    """(meta dict from the '# k=v' line, rows as dicts of floats; acc None where not evaluated)."""
    meta, rows = {}, []
    if not os.path.exists(path):
        return meta, rows
    with open(path) as f:
        first = f.readline()
        if first.startswith("#"):
            meta = dict(kv.split("=", 1) for kv in first[1:].split() if "=" in kv)
        else:
            f.seek(0)
        for r in csv.DictReader(f):
            rows.append({k: (float(v) if v not in ("", None) else None) for k, v in r.items()})
    return meta, rows


def what(run_dir, status):
    """An uncaught C++ exception's message ("  what():  ...", the line after "terminate called
    after throwing an instance of"), which the status line does not hold; "" if none."""
    if "terminate called after throwing" not in status:
        return ""
    for name in sorted(os.listdir(run_dir)):
        if name.endswith(".err"):
            with open(os.path.join(run_dir, name), errors="replace") as f:
                for line in f:
                    if "what():" in line:
                        return " (" + line.split("what():", 1)[1].strip() + ")"
    return ""


def summarise(run_dir, name):
    m = RUN.fullmatch(name)
    row = dict.fromkeys(FIELDS, "")
    row.update(model=m.group(1), hook=m.group(2), workers=int(m.group(3)),
               ranks_per_host=int(m.group(4) or 1), bandwidth=m.group(5), seed=int(m.group(6) or 0))
    status = "failed: no status.txt (the run did not finish)"
    sp = os.path.join(run_dir, "status.txt")
    if os.path.exists(sp):
        with open(sp) as f:
            status = f.readline().strip()
    meta, rows = read_steps(os.path.join(run_dir, "steps.csv"))
    row["torch"] = meta.get("torch", "")
    row["device"] = meta.get("device", "cpu")  # a CSV without the field ran on the CPU
    row["steps"] = len(rows)
    if status != "ok":
        row["status"] = "failed"
        row["why"] = status.removeprefix("failed: ") + what(run_dir, status)
    else:
        row["status"] = "ok"
    if rows:
        timed = rows[2:] if len(rows) > 2 else rows
        for k in ("step_ms", "compute_ms", "hook_ms", "wait_ms"):
            row[k] = round(statistics.median(r[k] for r in timed), 3)
        row["bytes_per_step"] = round(statistics.mean(r["bytes"] for r in rows))
        for col, best in (("acc", max), ("val_loss", min)):
            smooth = smoothed(rows, col)
            if smooth:
                row[f"final_{col}"] = round(smooth[-1][1], 5)
                row[f"best_{col}"] = round(best(a for _, a in smooth), 5)
    row["measure"] = MEASURE[row["model"]][2]
    return row, rows


def smoothed(rows, col="acc"):
    """(wall_s, value of col) at each evaluation, the value the mean of it and the (up to) two
    evaluations before it: one evaluation of a short run is noisy, and a lucky one would set
    the time to the target."""
    evals = [r for r in rows if r.get(col) is not None]
    return [(e["wall_s"], statistics.mean(x[col] for x in evals[max(0, i - 2):i + 1]))
            for i, e in enumerate(evals)]


def targets(summary, given):
    out = {}
    for model in sorted({r["model"] for r in summary}):
        if model in given:
            out[model] = (given[model], "given with --target")
            continue
        col, higher, name = MEASURE[model]
        factor, pick = (0.95, max) if higher else (1.05, min)
        for baseline in BASELINES:
            best = [r[f"best_{col}"] for r in summary
                    if r["model"] == model and r["hook"] == baseline and r[f"best_{col}"] != ""]
            if best:
                break
        how = (f"{round(100 * factor)} % of plain DDP's (allreduce) best {name}"
               if baseline == "allreduce" else
               f"{round(100 * factor)} % of native HSDP's (hsdp) best {name}")
        if not best:
            seen = [r[f"best_{col}"] for r in summary
                    if r["model"] == model and r[f"best_{col}"] != ""]
            best = [statistics.median(seen)] if seen else [1.0]
            how = f"{round(100 * factor)} % of the median best {name} (no allreduce run finished)"
        out[model] = (round(factor * pick(best), 4), how)
    return out


def time_to(rows, model, target):
    col, higher, _ = MEASURE[model]
    for wall, v in smoothed(rows, col):
        if (v >= target) if higher else (v <= target):
            return round(wall, 3)
    return ""


def gnuplot(out, name, data_rows, header, plot, gp_bin):
    """fig-<name>.csv and .gp into out, and the PNG; returns the PNG's name or the reason."""
    with open(os.path.join(out, f"fig-{name}.csv"), "w") as f:
        f.write(",".join(header) + "\n")
        for r in data_rows:
            f.write(",".join(str(x) for x in r) + "\n")
    script = (f"set terminal pngcairo size 900,560 noenhanced\nset output 'fig-{name}.png'\n"
              f"set datafile separator ','\nset key outside right\nset grid\n{plot}\n")
    with open(os.path.join(out, f"fig-{name}.gp"), "w") as f:
        f.write(script)
    try:
        subprocess.run([gp_bin, f"fig-{name}.gp"], cwd=out, check=True, capture_output=True,
                       timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"fig-{name}.png not drawn: {e}"
    return f"fig-{name}.png", None


def series_plot(title, xlabel, ylabel, hooks, xcol, ycol, logx=False):
    """One line per hook, from a long CSV whose first column is the hook."""
    parts = [f"'DATA' using {xcol}:(strcol(1) eq '{h}' ? ${ycol} : NaN) with linespoints "
             f"title '{h}'" for h in hooks]
    return (f"set title '{title}'\nset xlabel '{xlabel}'\nset ylabel '{ylabel}'\n"
            + ("set logscale x\n" if logx else "") + "plot " + ", \\\n     ".join(parts))


def figures(out, summary, steps_by_run, gp_bin):
    """(markdown of the figures, notes)."""
    md, notes = [], []
    for model in sorted({r["model"] for r in summary}):
        for w in sorted({hosts_of(r) for r in summary if r["model"] == model}):
            mine = [r for r in summary if r["model"] == model and hosts_of(r) == w]
            for bw in sorted({r["bandwidth"] for r in mine}, key=rate_bps):
                runs = sorted((r for r in mine if r["bandwidth"] == bw and r["status"] == "ok"),
                              key=lambda r: hook_key(r["hook"]))
                col, _, measure = MEASURE[model]
                data = [(r["hook"], round(t, 4), round(v, 5)) for r in runs
                        for t, v in smoothed(steps_by_run[(model, r["hook"], w, bw)], col)]
                if not data:
                    continue
                name = f"{'acc' if col == 'acc' else 'loss'}-{model}-{hosts_name(w)}-{bw}"
                # A title wider than the plot area is cut off on the left: the smoothing goes
                # into the axis label.
                plot = series_plot(f"{model}, {hosts_text(w)}, {bw}", "training wall time (s)",
                                   f"{measure} (mean of 3 evaluations)",
                                   [r["hook"] for r in runs], 2, 3)
                plot += f", \\\n     {runs[0]['target']} with lines dt 2 lc 'black' title 'target'"
                png, why = gnuplot(out, name, data, ["hook", "wall_s", col],
                                   plot.replace("DATA", f"fig-{name}.csv"), gp_bin)
                md.append(f"![{name}]({png})" if png else f"({why})")
                notes += [why] if why else []
            runs = sorted((r for r in mine if r["status"] == "ok"),
                          key=lambda r: (hook_key(r["hook"]), rate_bps(r["bandwidth"])))
            if len({r["bandwidth"] for r in runs}) < 2:
                continue
            name = f"step-{model}-{hosts_name(w)}"
            hooks = sorted({r["hook"] for r in runs}, key=hook_key)
            data = [(r["hook"], rate_bps(r["bandwidth"]) / 1e6, r["step_ms"]) for r in runs]
            plot = series_plot(f"{model}: median step time against bandwidth, {hosts_text(w)}",
                               "link rate (Mbit/s)", "step time (ms)", hooks, 2, 3, logx=True)
            png, why = gnuplot(out, name, data, ["hook", "mbit_s", "step_ms"],
                               plot.replace("DATA", f"fig-{name}.csv"), gp_bin)
            md.append(f"![{name}]({png})" if png else f"({why})")
            notes += [why] if why else []
    return md, notes


def fmt(v, spec):
    return "" if v == "" else format(v, spec)


def table(rows):
    """The setting's rows; final accuracy also as points against plain DDP's (allreduce)."""
    dense = next((r["final_acc"] for r in rows if r["hook"] == "allreduce" and r["final_acc"] != ""),
                 None)
    lines = ["| hook | time to target (s) | final acc | vs allreduce (points) | held-out loss "
             "| step ms | compute | hook | wait | bytes/step |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if r["status"] != "ok":
            why = r["why"].replace("|", "\\|")
            lines.append(f"| {r['hook']} | failed: {why} | | | | | | | | |")
            continue
        ttt = fmt(r["time_to_target_s"], ".1f") or f"not reached ({r['steps']} steps)"
        points = "" if dense is None or r["final_acc"] == "" else \
            f"{100 * (r['final_acc'] - dense):+.2f}"
        lines.append(f"| {r['hook']} | {ttt} | {fmt(r['final_acc'], '.4f')} | {points} | "
                     f"{fmt(r['final_val_loss'], '.3f')} | {fmt(r['step_ms'], '.1f')} | "
                     f"{fmt(r['compute_ms'], '.1f')} | "
                     f"{fmt(r['hook_ms'], '.1f')} | {fmt(r['wait_ms'], '.1f')} | "
                     f"{fmt(r['bytes_per_step'], ',d')} |")
    return lines


def spread(values, spec):
    """mean ± standard deviation of the values ("" when none), and the count when some are
    missing of `of`."""
    if not values:
        return ""
    if len(values) == 1:
        return format(values[0], spec)
    return f"{format(statistics.mean(values), spec)} ± {format(statistics.stdev(values), spec)}"


def seed_table(rows):
    """One line per hook over its seeds: each measure's mean ± standard deviation (sample), and
    how many seeds reached the target."""
    lines = ["| hook | seeds | reached target | time to target (s) | final acc | held-out loss "
             "| step ms | bytes/step |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for hook in sorted({r["hook"] for r in rows}, key=hook_key):
        runs = [r for r in rows if r["hook"] == hook]
        ok = [r for r in runs if r["status"] == "ok"]
        got = lambda k: [r[k] for r in ok if r[k] != ""]  # noqa: E731
        failed = len(runs) - len(ok)
        lines.append(f"| {hook} | {len(runs)}{f' ({failed} failed)' if failed else ''} | "
                     f"{len(got('time_to_target_s'))} of {len(runs)} | "
                     f"{spread(got('time_to_target_s'), '.1f')} | "
                     f"{spread(got('final_acc'), '.4f')} | {spread(got('final_val_loss'), '.3f')} | "
                     f"{spread(got('step_ms'), '.1f')} | "
                     f"{fmt(round(statistics.mean(got('bytes_per_step'))), ',d') if got('bytes_per_step') else ''} |")
    return lines


def seed_headline(rows):
    """The fastest hook by mean time to target among those whose every seed reached it, and
    whether its lead over the runner-up is inside the spread (means closer than the sum of the
    standard deviations)."""
    times = {}
    for hook in {r["hook"] for r in rows}:
        runs = [r for r in rows if r["hook"] == hook]
        t = [r["time_to_target_s"] for r in runs if r["time_to_target_s"] != ""]
        if t and len(t) == len(runs):
            times[hook] = (statistics.mean(t), statistics.stdev(t) if len(t) > 1 else 0.0)
    if not times:
        return "no hook reached the target with every seed"
    order = sorted(times, key=lambda h: times[h][0])
    best = order[0]
    text = f"fastest to the target (mean over seeds): **{best}** ({times[best][0]:.1f} s)"
    if len(order) > 1:
        second = order[1]
        gap = times[second][0] - times[best][0]
        inside = gap < times[best][1] + times[second][1]
        text += (f"; runner-up {second} {times[second][0]:.1f} s, a lead "
                 f"{'inside' if inside else 'outside'} the spread")
    return text


def headline(rows):
    """Who reached the target first at one setting, and by how much."""
    reached = sorted((r for r in rows if r["time_to_target_s"] != ""),
                     key=lambda r: r["time_to_target_s"])
    if not reached:
        return "no hook reached the target"
    best = reached[0]
    text = f"fastest to the target: **{best['hook']}** ({best['time_to_target_s']:.1f} s)"
    ex = [r for r in reached if "exdyna" in r["hook"]]  # exdyna-dX and hsdp-exdyna-dX
    if ex and ex[0] is not best:
        text += (f"; best exdyna hook {ex[0]['hook']} {ex[0]['time_to_target_s']:.1f} s, "
                 f"{ex[0]['time_to_target_s'] / best['time_to_target_s']:.2f}x its time")
    elif ex and len(reached) > 1:
        text += f", {reached[1]['time_to_target_s'] / best['time_to_target_s']:.2f}x faster " \
                f"than the runner-up {reached[1]['hook']}"
    return text


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the head-to-head's output directory")
    p.add_argument("--gnuplot", default="gnuplot")
    p.add_argument("--command", default="", help="the command that made the runs (for the text)")
    p.add_argument("--target", action="append", default=[], metavar="MODEL=VALUE",
                   help="a model's target: cnn=ACCURACY or resnet18=ACCURACY in (0, 1], "
                   "lstm=LOSS or transformer=LOSS (held-out, > 0)")
    a = p.parse_args(argv)
    a.targets = {}
    for t in a.target:
        m = re.fullmatch(r"(cnn|resnet18|lstm|transformer)=([0-9]+\.?[0-9]*)", t)
        if not m or not 0 < float(m.group(2)) <= (1 if MEASURE[m.group(1)][1] else math.inf):
            p.error(f"--target '{t}' is not valid; expected cnn=ACCURACY or resnet18=ACCURACY "
                    "with 0 < ACCURACY <= 1, or lstm=LOSS / transformer=LOSS with LOSS > 0")
        a.targets[m.group(1)] = float(m.group(2))
    if not os.path.isdir(os.path.join(a.out, "runs")):
        p.error(f"--out '{a.out}' has no runs/ directory")
    return a


def write_report(a, summary, tgt, figs, notes):
    lines = ["# DDP head-to-head: exdyna's hook against PyTorch's", ""]
    if a.command:
        lines += ["```sh", a.command, "```", ""]
    versions = sorted({r["torch"] for r in summary if r["torch"]})
    lines += [f"torch {', '.join(versions) or '(unknown)'}; every number below is computed from "
              "`runs/*/steps.csv` and `runs/*/status.txt` (summary.csv holds them all). Step "
              "times are medians over the steps after the first two; compute is forward + "
              "backward without communication (DDP's no_sync, measured before training) plus the "
              "optimizer step; hook is the time the autograd thread spent inside the hook's "
              "calls; wait is the rest of the step (waiting for communication). Bytes: what a "
              "rank hands to collectives per step, the mean over the run. Accuracy at an "
              "evaluation (and its held-out loss, the mean cross-entropy on the same data): the "
              "mean of it and the two evaluations before it; final: that at the last "
              "evaluation; time to target: the training wall time (evaluations excluded) at the "
              "first evaluation whose measure reaches the target. The LSTM's measure is its "
              "held-out loss: its next-word accuracy stays near that of always predicting the "
              "commonest word for hundreds of steps. The hosts share this machine's cores (and "
              f"its one GPU where the device is cuda), so compute is slower than on W machines. "
              f"Device: {', '.join(sorted({r['device'] for r in summary})) or '(unknown)'}.", ""]
    for model, (value, how) in sorted(tgt.items()):
        lines.append(f"- target of **{model}**: {MEASURE[model][2]} "
                     f"{'at least' if MEASURE[model][1] else 'at most'} {value:.4f} ({how}), "
                     "the same for every hook and setting")
    lines.append("")
    for model in sorted({r["model"] for r in summary}):
        for w in sorted({hosts_of(r) for r in summary if r["model"] == model}):
            bws = sorted({r["bandwidth"] for r in summary
                          if r["model"] == model and hosts_of(r) == w}, key=rate_bps)
            for bw in bws:
                rows = sorted((r for r in summary if (r["model"], hosts_of(r), r["bandwidth"])
                               == (model, w, bw)), key=lambda r: hook_key(r["hook"]))
                lines += [f"## {model}, {hosts_text(w)}, {bw}", ""]
                if len({r["seed"] for r in rows}) > 1:
                    lines += [seed_headline(rows) + ".", ""] + seed_table(rows) + [""]
                else:
                    lines += [headline(rows) + ".", ""] + table(rows) + [""]
    if figs:
        lines += ["## Figures", ""] + [f + "\n" for f in figs]
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write("\n".join(lines))


def main(argv=None):
    a = parse_args(argv)
    summary, steps_by_seed = [], {}
    for name in sorted(os.listdir(os.path.join(a.out, "runs"))):
        if not RUN.fullmatch(name):
            continue
        row, rows = summarise(os.path.join(a.out, "runs", name), name)
        summary.append(row)
        steps_by_seed[(row["model"], row["hook"], hosts_of(row), row["bandwidth"],
                       row["seed"])] = rows
    # The figures draw the first seed's runs.
    steps_by_run = {k[:4]: rows for k, rows in steps_by_seed.items() if k[4] == 0}
    tgt = targets(summary, a.targets)
    for r in summary:
        r["target"] = tgt[r["model"]][0]
        if r["status"] == "ok":
            key = (r["model"], r["hook"], hosts_of(r), r["bandwidth"], r["seed"])
            r["time_to_target_s"] = time_to(steps_by_seed[key], r["model"], r["target"])
    with open(os.path.join(a.out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(summary)
    figs, notes = figures(a.out, [r for r in summary if r["seed"] == 0], steps_by_run, a.gnuplot)
    seeds = len({r["seed"] for r in summary})
    if seeds > 1:
        notes.insert(0, f"{seeds} seeds per setting (the script's --seed): the tables give mean ± "
                     "sample standard deviation over them, and say whether the fastest hook's "
                     "lead is inside the spread (means closer than the sum of the deviations); "
                     "the figures draw seed 0")
    write_report(a, summary, tgt, figs, notes)
    failed = [r for r in summary if r["status"] != "ok"]
    print(f"report: {os.path.join(a.out, 'report.md')} ({len(summary)} runs, "
          f"{len(failed)} failed, {len(figs)} figures)")
    for r in failed:
        print(f"  failed: {r['model']} {r['hook']} {hosts_text(hosts_of(r))} {r['bandwidth']}: "
              f"{r['why']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
