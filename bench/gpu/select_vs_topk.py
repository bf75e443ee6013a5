#!/usr/bin/env python3
"""ExDyna's CUDA selection against PyTorch's on one GPU, with a device copy as the reference.

For each n_g (default 25M and 100M float32 values, 100M only where the GPU has room), at density d
(default 0.01), on a heavy-tailed accumulator (normal times log-normal):

  copy              dst.copy_(acc): the device-to-device reference (bytes read + written)
  torch_add         residual.add_(grad), the reference for
  accumulate        exdyna._exdyna.cuda_accumulate(residual, grad)
  select_partition  exdyna._exdyna.cuda_select_threshold over 1/8 of the bucket (one partition of 8)
  select_whole      the same over the whole bucket
  topk              torch.topk(acc.abs(), k), k = floor(d n_g)
  nonzero           torch.nonzero(acc.abs() >= t)
  step_exdyna_*     exdyna.Sparsifier("exdyna", d).step(grad) on a world-size-1 NCCL group
                    (exact: the default controller; paper: controller/balance paper, no cap)
  step_topk         the same step built on torch.topk: acc += grad; idx = topk(|acc|, k);
                    vals = acc[idx]; all-gather idx, all-reduce vals (world size 1, as the
                    sparsifier's step does); acc[idx] = 0; out = zeros; out[idx] = vals / world
  step_topk_local   the same without the two collectives

Each step gets a fresh heavy-tailed gradient (made outside the timed part), scaled so that the
paper controller's first threshold passes about d; the steps' densities are reported beside their
times (the paper controller drifts above d while its threshold catches up with the accumulator).

The threshold t is chosen from a sample of 2^20 values so that about d of the values pass; the
selection is checked once against torch.nonzero (same indices). Times are CUDA events around each
call (a call that reads a count back to the host includes that wait), after warm-up; the median of
--repeats (default 30). Ratios: topk / select_whole, nonzero / select_whole, and the selection's
bandwidth (bytes read / time) as a fraction of the copy's (bytes read + written / time).

    python3 bench/gpu/select_vs_topk.py --out select_vs_topk.json
    python3 bench/gpu/select_vs_topk.py --quick          # 2M and 4M values, 5 repeats

Exit status: 0 all measured, 1 some measurement failed (its error is in the JSON), 77 no CUDA
device (the JSON says so), 2 bad arguments.
"""

import argparse
import datetime
import json
import math
import os
import statistics
import sys
import tempfile
import time
import traceback

NO_DEVICE = 77


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", metavar="FILE", help="write the results as JSON to FILE")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: n_g 2M and 4M, 5 repeats, 3 warm-ups")
    p.add_argument("--sizes", metavar="N[,N...]",
                   help="n_g values, comma-separated; suffixes K = 10^3, M = 10^6 (default 25M,100M)")
    p.add_argument("--density", type=float, default=0.01, help="d (default 0.01)")
    p.add_argument("--repeats", type=int, help="timed calls per measurement (default 30)")
    p.add_argument("--warmup", type=int, help="untimed calls first (default 5)")
    p.add_argument("--step-warmup", type=int,
                   help="untimed sparsifier steps first, so the controller settles (default 10)")
    p.add_argument("--cpu-dry-run", action="store_true",
                   help="check this script without a GPU: the same flow on CPU tensors, exdyna's "
                        "two kernels emulated with torch, a Gloo group; its times mean nothing")
    a = p.parse_args(argv)
    if not 0 < a.density <= 1:
        p.error(f"--density {a.density} is not in (0, 1]")
    a.sizes = parse_sizes(p, a.sizes or ("2M,4M" if a.quick else "25M,100M"))
    a.repeats = a.repeats or (5 if a.quick else 30)
    a.warmup = a.warmup if a.warmup is not None else (3 if a.quick else 5)
    a.step_warmup = a.step_warmup if a.step_warmup is not None else (3 if a.quick else 10)
    if a.repeats < 1 or a.warmup < 0 or a.step_warmup < 0:
        p.error("--repeats must be >= 1, --warmup and --step-warmup >= 0")
    return a


def parse_sizes(p, text):
    out = []
    for item in text.split(","):
        item = item.strip()
        mult = 1
        if item[-1:] in ("M", "m"):
            item, mult = item[:-1], 10**6
        elif item[-1:] in ("K", "k"):
            item, mult = item[:-1], 10**3
        try:
            n = int(float(item) * mult)
        except ValueError:
            p.error(f"--sizes: {item!r} is not a number")
        if n < 1024:
            p.error(f"--sizes: {n} is under 1024 values")
        out.append(n)
    return out


def write(args, result):
    text = json.dumps(result, indent=2, sort_keys=False)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text + "\n")
        print(f"select_vs_topk: wrote {args.out}")


def summary(ms):
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms),
            "repeats": len(ms)}


def main(argv=None):
    args = parse_args(argv)
    result = {"bench": "select_vs_topk", "density": args.density, "repeats": args.repeats,
              "quick": args.quick, "started": datetime.datetime.now().isoformat(timespec="seconds"),
              "sizes": [], "errors": []}
    try:
        import torch
    except ImportError as e:
        result["skipped"] = f"torch cannot be imported: {e}"
        print(f"select_vs_topk: {result['skipped']}")
        write(args, result)
        return NO_DEVICE
    result["torch"] = torch.__version__
    global DEVICE
    DEVICE = "cpu" if args.cpu_dry_run else "cuda"
    if args.cpu_dry_run:
        result["cpu_dry_run"] = True
    elif not torch.cuda.is_available():
        result["skipped"] = f"torch {torch.__version__} sees no CUDA device"
        print(f"select_vs_topk: {result['skipped']}")
        write(args, result)
        return NO_DEVICE
    if DEVICE == "cuda":
        torch.cuda.set_device(0)
        result["device"] = torch.cuda.get_device_name(0)
    else:
        result["device"] = "cpu (dry run)"
    try:
        import exdyna
        from exdyna import _exdyna
        result["cuda_built"] = bool(getattr(exdyna, "cuda_built", lambda: False)())
    except Exception as e:  # measure what torch alone can; say why the rest is missing
        exdyna = _exdyna = None
        result["errors"].append(f"import exdyna: {type(e).__name__}: {e}")
    if DEVICE == "cpu":
        _exdyna = CpuKernels(torch)
    group = init_group(torch, result)
    for n in args.sizes:
        free, total = torch.cuda.mem_get_info() if DEVICE == "cuda" else (1 << 62, 1 << 62)
        need = 24 * 4 * n  # acc, grads, residual, masks, topk's |acc|, the sparsifiers' buffers
        if need > free:
            result["sizes"].append({"n_g": n, "skipped": f"needs ~{need / 2**30:.1f} GiB, "
                                                         f"{free / 2**30:.1f} GiB free"})
            print(f"select_vs_topk: n_g {n}: skipped (needs ~{need / 2**30:.1f} GiB)")
            continue
        row = measure_size(torch, exdyna, _exdyna, group, n, args, result["errors"])
        result["sizes"].append(row)
        empty_cache(torch)
    result["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    print_table(result)
    write(args, result)
    if group is not None:
        import torch.distributed as dist
        dist.destroy_process_group()
    return 1 if result["errors"] else 0


def init_group(torch, result):
    import torch.distributed as dist
    try:
        store = os.path.join(tempfile.mkdtemp(prefix="exdyna-bench-"), "store")
        backend = "nccl" if DEVICE == "cuda" and dist.is_nccl_available() else "gloo"
        dist.init_process_group(backend, init_method=f"file://{store}", rank=0, world_size=1,
                                timeout=datetime.timedelta(seconds=120))
        result["group"] = f"{backend}, world size 1"
        return dist.group.WORLD
    except Exception as e:
        result["errors"].append(f"init_process_group: {type(e).__name__}: {e}")
        return None


DEVICE = "cuda"


class CpuKernels:
    """--cpu-dry-run: exdyna._exdyna's two kernels, emulated with torch on CPU tensors."""

    def __init__(self, torch):
        self.torch = torch

    def cuda_select_threshold(self, acc, threshold, out):
        idx = self.torch.nonzero(acc.abs() >= threshold).flatten()
        out[: idx.numel()] = idx.to(out.dtype)
        return int(idx.numel())

    def cuda_accumulate(self, residual, grad):
        residual.add_(grad)


def empty_cache(torch):
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


def time_calls(torch, fn, repeats, warmup):
    for _ in range(warmup):
        fn()
    if DEVICE == "cpu":
        ms = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            ms.append((time.perf_counter() - t0) * 1e3)
        return summary(ms)
    torch.cuda.synchronize()
    ms = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        ms.append(start.elapsed_time(end))
    return summary(ms)


def heavy(torch, n, seed):
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn(n, device=DEVICE, generator=g)
    x *= torch.exp(torch.randn(n, device=DEVICE, generator=g))
    return x


def measure(name, row, errors, fn):
    """row[name] = fn(), or the error, recorded, so one failure leaves the others measured."""
    try:
        row[name] = fn()
    except Exception as e:
        msg = f"n_g {row['n_g']}: {name}: {type(e).__name__}: {e}"
        errors.append(msg)
        row[name] = {"error": f"{type(e).__name__}: {e}"}
        print(f"select_vs_topk: {msg}", file=sys.stderr)
        traceback.print_exc()


def measure_size(torch, exdyna, ext, group, n, args, errors):
    d, reps, warm = args.density, args.repeats, args.warmup
    k = max(1, math.floor(d * n))
    row = {"n_g": n, "k": k, "bytes": 4 * n}
    acc = heavy(torch, n, 1)
    g = torch.Generator(device=DEVICE).manual_seed(2)
    sample = acc[torch.randint(0, n, (1 << 20,), device=DEVICE, generator=g)].abs()
    thr = float(torch.quantile(sample, 1.0 - d))
    thr = float(torch.tensor(thr, dtype=torch.float32))  # exactly what a float compare sees
    row["threshold"] = thr
    out = torch.empty(n, dtype=torch.int32, device=DEVICE)
    part = acc[: n // 8]

    dst = torch.empty_like(acc)
    measure("copy", row, errors, lambda: time_calls(torch, lambda: dst.copy_(acc), reps, warm))
    if "median_ms" in row["copy"]:
        row["copy"]["GBps"] = 8 * n / row["copy"]["median_ms"] / 1e6
    del dst
    grad = heavy(torch, n, 3) * 1e-3
    residual = torch.zeros_like(acc)
    measure("torch_add", row, errors,
            lambda: time_calls(torch, lambda: residual.add_(grad), reps, warm))
    if ext is not None:
        measure("accumulate", row, errors, lambda: time_calls(
            torch, lambda: ext.cuda_accumulate(residual, grad), reps, warm))

        def check():
            cnt = ext.cuda_select_threshold(acc, thr, out)
            want = torch.nonzero(acc.abs() >= thr).flatten()
            same = cnt == want.numel() and torch.equal(out[:cnt].long(), want)
            return {"count": int(cnt), "nonzero_count": int(want.numel()),
                    "actual_density": cnt / n, "matches_nonzero": bool(same)}
        measure("select_check", row, errors, check)
        if row["select_check"].get("matches_nonzero") is False:
            errors.append(f"n_g {n}: cuda_select_threshold's indices differ from torch.nonzero's")
        measure("select_partition", row, errors, lambda: time_calls(
            torch, lambda: ext.cuda_select_threshold(part, thr, out), reps, warm))
        measure("select_whole", row, errors, lambda: time_calls(
            torch, lambda: ext.cuda_select_threshold(acc, thr, out), reps, warm))
    measure("topk", row, errors,
            lambda: time_calls(torch, lambda: torch.topk(acc.abs(), k), reps, warm))
    measure("nonzero", row, errors,
            lambda: time_calls(torch, lambda: torch.nonzero(acc.abs() >= thr), reps, warm))
    del residual, out, part
    empty_cache(torch)

    # Scaled so that the paper controller's first threshold, 1 / (2 sqrt(k)), passes about d of
    # the values (per-element magnitudes shrinking like 1 / sqrt(n_g), as real gradients' do): both
    # modes then step near their target density from the start.
    scale = 0.5 / math.sqrt(k) / thr

    def grads(i):  # a fresh gradient per step, made outside the timed part
        return heavy(torch, n, 10 + i).mul_(scale)
    if exdyna is not None and group is not None:
        for mode, opts in (("exact", {}),
                           ("paper", dict(controller="paper", balance="paper", worker_cap="none"))):
            measure(f"step_exdyna_{mode}", row, errors,
                    lambda: sparsifier_step(torch, exdyna, grads, d, opts, args))
    if group is not None:
        measure("step_topk", row, errors,
                lambda: topk_step(torch, grads, k, args, collectives=True))
    measure("step_topk_local", row, errors,
            lambda: topk_step(torch, grads, k, args, collectives=False))
    del acc
    ratios(row)
    return row


def time_steps(torch, step, grads, args):
    """step(grad) on a fresh gradient each call: --step-warmup untimed, then --repeats timed."""
    for i in range(args.step_warmup):
        step(grads(i))
    ms = []
    for i in range(args.step_warmup, args.step_warmup + args.repeats):
        g = grads(i)
        if DEVICE == "cpu":
            t0 = time.perf_counter()
            step(g)
            ms.append((time.perf_counter() - t0) * 1e3)
            continue
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        step(g)
        end.record()
        end.synchronize()
        ms.append(start.elapsed_time(end))
    return summary(ms)


def sparsifier_step(torch, exdyna, grads, d, opts, args):
    sp = exdyna.Sparsifier("exdyna", d, **opts)
    r = time_steps(torch, sp.step, grads, args)
    s = sp.stats
    r.update({"density": s["density"], "k_total": s["k_total"], "f_t": s["f_t"],
              "threshold": s["threshold"], "bytes_total": s["bytes"]["total"],
              "times_last_step_s": dict(s["times"]), "options": opts or "defaults"})
    del sp
    empty_cache(torch)
    return r


def topk_step(torch, grads, k, args, collectives):
    import torch.distributed as dist
    n = grads(0).numel()
    acc = torch.zeros(n, device=DEVICE)
    world = dist.get_world_size() if collectives else 1
    gathered = torch.empty(world * k, dtype=torch.int64, device=DEVICE)
    def step(grad):
        acc.add_(grad)
        idx = torch.topk(acc.abs(), k).indices
        vals = acc[idx]
        if collectives:
            if DEVICE == "cuda":
                dist.all_gather_into_tensor(gathered, idx)
            else:  # Gloo (the dry run) has no all_gather_into_tensor
                dist.all_gather(list(gathered.chunk(world)), idx)
            dist.all_reduce(vals)
        acc[idx] = 0
        out = torch.zeros_like(acc)
        out[idx] = vals / world
        return out
    r = time_steps(torch, step, grads, args)
    del acc, gathered
    empty_cache(torch)
    return r


def ratios(row):
    def med(name):
        v = row.get(name)
        return v.get("median_ms") if isinstance(v, dict) else None
    r = {}
    sel, copy = med("select_whole"), med("copy")
    for other in ("topk", "nonzero"):
        if sel and med(other):
            r[f"{other}_over_select"] = med(other) / sel
    if sel and copy:
        # select reads 4 n bytes; the copy moves 8 n (read + write)
        r["select_copy_bw_fraction"] = (4 * row["n_g"] / sel) / (8 * row["n_g"] / copy)
        r["select_over_copy_time"] = sel / copy
    part = med("select_partition")
    if part and copy:
        r["select_partition_copy_bw_fraction"] = (4 * (row["n_g"] // 8) / part) / (
            8 * row["n_g"] / copy)
    if med("accumulate") and med("torch_add"):
        r["accumulate_over_torch_add"] = med("accumulate") / med("torch_add")
    for mode in ("exact", "paper"):
        ex = med(f"step_exdyna_{mode}")
        if ex and med("step_topk"):
            r[f"step_topk_over_exdyna_{mode}"] = med("step_topk") / ex
    row["ratios"] = r


def print_table(result):
    print(f"\nselect_vs_topk on {result.get('device')} (torch {result.get('torch')}, "
          f"{result.get('group')}), d = {result['density']}, median of {result['repeats']}")
    names = ("copy", "torch_add", "accumulate", "select_partition", "select_whole", "topk",
             "nonzero", "step_exdyna_exact", "step_exdyna_paper", "step_topk", "step_topk_local")
    for row in result["sizes"]:
        if "skipped" in row:
            print(f"  n_g {row['n_g']:>11,}: skipped: {row['skipped']}")
            continue
        print(f"  n_g {row['n_g']:>11,}  k {row['k']:,}  threshold {row['threshold']:.4g}")
        for name in names:
            v = row.get(name)
            if not isinstance(v, dict):
                continue
            if "error" in v:
                print(f"    {name:<18} ERROR {v['error']}")
                continue
            extra = ""
            if name == "copy":
                extra = f"  {v['GBps']:.0f} GB/s (read + write)"
            if name.startswith("step_exdyna"):
                extra = f"  density {v['density']:.5f}"
            print(f"    {name:<18} {v['median_ms']:9.3f} ms  (min {v['min_ms']:.3f}){extra}")
        chk = row.get("select_check", {})
        if "matches_nonzero" in chk:
            print(f"    select check: {chk['count']:,} selected, "
                  f"{'same indices as' if chk['matches_nonzero'] else 'DIFFERS FROM'} torch.nonzero")
        for key, val in row.get("ratios", {}).items():
            print(f"    {key:<34} {val:8.3f}")
    for e in result["errors"]:
        print(f"  error: {e}")


if __name__ == "__main__":
    t0 = time.monotonic()
    rc = main()
    print(f"select_vs_topk: {time.monotonic() - t0:.1f} s, exit {rc}")
    sys.exit(rc)
