#!/usr/bin/env python3
"""DDP training steps of torchvision's resnet18 on one GPU: DDP's own all-reduce against exdyna.ddp.hook.

One process, NCCL at world size 1 (a FileStore in a temporary folder), float32, synthetic ImageNet
-shaped data: batch 64 of 3x224x224 images, 1000 classes (a realistic step: about 11.7M parameters,
46 MB of gradients in DDP's 25 MB buckets; the image size sets the compute, not the gradient).
SGD (lr 0.1, momentum 0.9), cudnn.benchmark on, TF32 as PyTorch's defaults leave it. Each variant
builds the model afresh from the same seed, runs --warmup untimed steps (default 10), then --steps
timed ones (default 50): wall clock of each step to a torch.cuda.synchronize() after
optimizer.step().

  builtin         DDP with no hook (its C++ all-reduce)
  allreduce_hook  torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook
  exdyna          exdyna.ddp.hook, State(density=--density, default 0.01), the exact controller;
                  each bucket stepped on the State's communication thread while backward goes on
  exdyna_sync     the same with State(overlap=False): each bucket stepped inside the hook
  exdyna_paper    exdyna overlapped with the paper's controller and balance (Alg. 3/5: no
                  ladder to count and gather, so fewer host round trips per bucket)
  exdyna_resident exdyna with State(resident=True): each bucket's step without a host round trip
                  from its second iteration on (resident_step.hpp); exdyna_resident_sync the same
                  with overlap=False
Each hook's density, bytes and per-bucket statistics are reported, and every variant's phases
(medians, ms from the step's start): when the host got past forward, backward (DDP waits there
for every bucket's future) and the optimizer's launch; the GPU's time between those points (CUDA
events on the stream); when the hook was called for each bucket and when its future completed.
Where the host waits and the GPU idles shows there. The variants run in --rounds
rounds (default 2), one after another in each: a variant's median is over the steps of all its
rounds, and each round's own median is kept (round_medians_ms), so drift of the machine shows.

--bucket-view on runs every variant with DDP(gradient_as_bucket_view=True) (the gradients are
views into the buckets, so a hook that returns its bucket, as DDP's own and exdyna's do, needs no
copy into them afterwards), named X+view; both runs each variant in both settings.

At world size 1 the collectives move nothing, so the ratio exdyna / builtin is what the hook costs
on the GPU (accumulate, select, scatter, and the host round trips), not what it saves on a network.

    python3 bench/gpu/ddp_resnet18.py --out ddp_resnet18.json
    python3 bench/gpu/ddp_resnet18.py --quick        # batch 16, 64x64, 3 warm-up and 10 timed steps
    python3 bench/gpu/ddp_resnet18.py --model resnet50 --variants builtin,exdyna,exdyna_resident

Exit status: 0 all measured, 1 a variant failed (its error is in the JSON), 77 no CUDA device or no
torchvision (the JSON says so), 2 bad arguments.
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
import traceback

NO_DEVICE = 77
VARIANTS = ("builtin", "allreduce_hook", "exdyna", "exdyna_sync", "exdyna_paper", "exdyna_resident",
            "exdyna_resident_sync")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", metavar="FILE", help="write the results as JSON to FILE")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: batch 16 of 64x64 images, 3 warm-up and 10 timed steps")
    p.add_argument("--model", choices=("resnet18", "resnet50"), default="resnet18",
                   help="torchvision's model (default resnet18; the issue's pair: resnet50 too)")
    p.add_argument("--batch", type=int, help="images per step (default 64)")
    p.add_argument("--image", type=int, help="image side in pixels (default 224)")
    p.add_argument("--classes", type=int, default=1000, help="output classes (default 1000)")
    p.add_argument("--steps", type=int, help="timed steps (default 50)")
    p.add_argument("--warmup", type=int, help="untimed steps first (default 10)")
    p.add_argument("--density", type=float, default=0.01, help="exdyna's d (default 0.01)")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"comma-separated, from {', '.join(VARIANTS)}")
    p.add_argument("--rounds", type=int, default=2,
                   help="times each variant is measured, interleaved (default 2)")
    p.add_argument("--bucket-view", choices=("off", "on", "both"), default="off",
                   help="DDP's gradient_as_bucket_view for every variant: off (DDP's default), "
                        "on (variants named X+view), or both settings in turn")
    p.add_argument("--cpu-dry-run", action="store_true",
                   help="check this script without a GPU: CPU model, Gloo group; times mean nothing")
    a = p.parse_args(argv)
    a.batch = a.batch or (16 if a.quick else 64)
    a.image = a.image or (64 if a.quick else 224)
    a.steps = a.steps or (10 if a.quick else 50)
    a.warmup = a.warmup if a.warmup is not None else (3 if a.quick else 10)
    a.variants = [v.strip() for v in a.variants.split(",") if v.strip()]
    bad = [v for v in a.variants if v not in VARIANTS]
    if bad:
        p.error(f"--variants: unknown {bad}; expected {', '.join(VARIANTS)}")
    if a.rounds < 1:
        p.error(f"--rounds {a.rounds}: expected at least 1")
    if not 0 < a.density <= 1:
        p.error(f"--density {a.density} is not in (0, 1]")
    if a.batch < 1 or a.image < 16 or a.steps < 1 or a.warmup < 0 or a.classes < 2:
        p.error("--batch >= 1, --image >= 16, --steps >= 1, --warmup >= 0, --classes >= 2")
    return a


def write(args, result):
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(json.dumps(result, indent=2) + "\n")
        print(f"ddp_resnet18: wrote {args.out}")


def main(argv=None):
    args = parse_args(argv)
    result = {"bench": "ddp_resnet18", "model": args.model, "batch": args.batch,
              "image": args.image,
              "classes": args.classes, "steps": args.steps, "warmup": args.warmup,
              "density": args.density, "quick": args.quick, "dtype": "float32",
              "started": datetime.datetime.now().isoformat(timespec="seconds"),
              "variants": {}, "errors": []}
    try:
        import torch
        import torchvision
    except ImportError as e:
        result["skipped"] = f"needs torch and torchvision: {e}"
        print(f"ddp_resnet18: {result['skipped']}")
        write(args, result)
        return NO_DEVICE
    result["torch"] = torch.__version__
    result["torchvision"] = torchvision.__version__
    device = "cpu" if args.cpu_dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        result["skipped"] = f"torch {torch.__version__} sees no CUDA device"
        print(f"ddp_resnet18: {result['skipped']}")
        write(args, result)
        return NO_DEVICE
    if device == "cuda":
        torch.cuda.set_device(0)
        torch.backends.cudnn.benchmark = True
        result["device"] = torch.cuda.get_device_name(0)
    else:
        result["device"] = "cpu (dry run)"
        result["cpu_dry_run"] = True
    import torch.distributed as dist
    backend = "nccl" if device == "cuda" else "gloo"
    store = os.path.join(tempfile.mkdtemp(prefix="exdyna-ddp-"), "store")
    dist.init_process_group(backend, init_method=f"file://{store}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=120))
    result["group"] = f"{backend}, world size 1"
    result["rounds"] = args.rounds
    result["bucket_view"] = args.bucket_view
    views = {"off": (False,), "on": (True,), "both": (False, True)}[args.bucket_view]
    runs = {}
    for _ in range(args.rounds):
        for variant, view in ((v, view) for view in views for v in args.variants):
            v = variant + ("+view" if view else "")
            if "error" in result["variants"].get(v, {}):
                continue
            try:
                runs.setdefault(v, []).append(
                    run_variant(torch, torchvision, variant, args, device, view))
                result["variants"][v] = summarize(runs[v], args.batch)
            except Exception as e:
                msg = f"{v}: {type(e).__name__}: {e}"
                result["errors"].append(msg)
                result["variants"][v] = {"error": f"{type(e).__name__}: {e}"}
                print(f"ddp_resnet18: {msg}", file=sys.stderr)
                traceback.print_exc()
            if device == "cuda":
                torch.cuda.empty_cache()
    vs = result["variants"]

    def med(name):
        return vs.get(name, {}).get("median_ms")
    ratios = {}
    for suffix in ("+view" if view else "" for view in views):
        for mine in ("exdyna", "exdyna_sync", "exdyna_paper", "exdyna_resident",
                     "exdyna_resident_sync"):
            for ref in ("builtin", "allreduce_hook"):
                if med(mine + suffix) and med(ref + suffix):
                    ratios[f"{mine}{suffix}_over_{ref}{suffix}"] = (med(mine + suffix)
                                                                    / med(ref + suffix))
    result["ratios"] = ratios
    result["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    print_table(result)
    write(args, result)
    dist.destroy_process_group()
    return 1 if result["errors"] else 0


def run_variant(torch, torchvision, variant, args, device, view=False):
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    net = getattr(torchvision.models, args.model)(num_classes=args.classes).to(device)
    model = DDP(net, device_ids=[0] if device == "cuda" else None,
                gradient_as_bucket_view=view)
    state = None
    hook_marks = []  # [bucket index, hook called, future done] (perf_counter) of this step
    if variant == "allreduce_hook":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, timed_hook(default_hooks.allreduce_hook, hook_marks))
    elif variant.startswith("exdyna"):
        import exdyna.ddp
        extra = dict(controller="paper", balance="paper") if variant == "exdyna_paper" else {}
        if variant.startswith("exdyna_resident"):
            extra = dict(resident=True)
        state = exdyna.ddp.State(density=args.density, overlap=not variant.endswith("_sync"),
                                 **extra)
        model.register_comm_hook(state, timed_hook(exdyna.ddp.hook, hook_marks))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator(device=device).manual_seed(1)
    batches = [(torch.randn(args.batch, 3, args.image, args.image, device=device, generator=g),
                torch.randint(0, args.classes, (args.batch,), device=device, generator=g))
               for _ in range(4)]

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    cuda = device == "cuda"

    def step(i, marks):
        x, y = batches[i % len(batches)]
        mark(torch, marks, "start", cuda)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        mark(torch, marks, "forward", cuda)
        loss.backward()
        mark(torch, marks, "backward", cuda)
        opt.step()
        mark(torch, marks, "optimizer", cuda)
        return loss

    for i in range(args.warmup):
        step(i, {})
    sync()
    ms = []
    phases = []
    loss = None
    for i in range(args.steps):
        marks = {}
        hook_marks.clear()
        t0 = time.perf_counter()
        loss = step(i, marks)
        sync()
        ms.append((time.perf_counter() - t0) * 1e3)
        phases.append(step_phases(marks, hook_marks, t0, ms[-1]))
    n_params = sum(p.numel() for p in model.parameters())
    r = {"ms": ms, "parameters": n_params, "last_loss": float(loss.detach()),
         "phases": median_phases(phases)}
    if state is not None:
        r["hook"] = {
            "density": state.actual_density(), "target_density": args.density,
            "hook_calls": state.steps, "buckets": len(state.buckets()), "rebuilds": state.rebuilds,
            "bytes_per_step": state.bytes_total * 1.0 / max(1, args.warmup + args.steps),
            "dense_bytes_per_step": 4 * n_params,
            "last_step_per_bucket": {
                str(i): {k: s.get(k) for k in ("n_g", "k_total", "density", "threshold", "f_t",
                                               "times")}
                for i, s in sorted(state.stats.items())}}
    del model, net, opt, batches
    return r


def timed_hook(hook, marks):
    """hook, recording [bucket index, when it was called, when its future completed] per bucket
    (perf_counter seconds) into marks, for the step's phases."""
    def timed(state, bucket):
        rec = [bucket.index(), time.perf_counter(), None]
        fut = hook(state, bucket)
        marks.append(rec)
        fut.add_done_callback(lambda _f: rec.__setitem__(2, time.perf_counter()))
        return fut
    return timed


def mark(torch, marks, name, cuda):
    """A host time and (cuda) an event on the current stream, named, into marks."""
    ev = None
    if cuda:
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
    marks[name] = (time.perf_counter(), ev)


def step_phases(marks, hook_marks, t0, step_ms):
    """One step's phases in ms. host_*: when the host got past forward, backward (DDP waited for
    every bucket's future in it) and the optimizer's launch, from the step's start; gpu_*: the
    GPU's time between the same points of its stream (gpu_backward takes in what the stream
    waited for: the hooks' updates); bucket<i>_called / _done: when the hook was called for
    bucket i and when its future completed, from the step's start."""
    out = {"step": step_ms}
    for name in ("forward", "backward", "optimizer"):
        out[f"host_{name}"] = (marks[name][0] - t0) * 1e3
    names = ("start", "forward", "backward", "optimizer")
    for a, b in zip(names, names[1:]):
        if marks[a][1] is not None:
            out[f"gpu_{b}"] = marks[a][1].elapsed_time(marks[b][1])
    for index, called, done in hook_marks:
        out[f"bucket{index}_called"] = (called - t0) * 1e3
        if done is not None:
            out[f"bucket{index}_done"] = (done - t0) * 1e3
    return out


def median_phases(phases):
    """Each phase's median over the steps that have it, in ms."""
    keys = sorted({k for p in phases for k in p})
    return {k: round(statistics.median(p[k] for p in phases if k in p), 3) for k in keys}


def summarize(rounds, batch):
    """One variant's figures over its rounds (run_variant's results): the step times of all
    rounds together, each round's median, and the last round's loss and hook statistics."""
    ms = [m for r in rounds for m in r["ms"]]
    last = rounds[-1]
    out = {"median_ms": statistics.median(ms), "mean_ms": statistics.fmean(ms), "min_ms": min(ms),
           "max_ms": max(ms), "p90_ms": sorted(ms)[int(0.9 * (len(ms) - 1))],
           "round_medians_ms": [statistics.median(r["ms"]) for r in rounds],
           "images_per_s": batch * 1e3 / statistics.median(ms), "parameters": last["parameters"],
           "last_loss": last["last_loss"]}
    if "hook" in last:
        out["hook"] = last["hook"]
    if "phases" in last:
        out["phases"] = last["phases"]
    return out


def print_table(result):
    print(f"\nddp_resnet18 on {result.get('device')} (torch {result.get('torch')}, "
          f"{result.get('group')}): batch {result['batch']} x 3x{result['image']}x"
          f"{result['image']}, {result['classes']} classes, median of {result['rounds']} x "
          f"{result['steps']} steps after {result['warmup']} each")
    for name, v in result["variants"].items():
        if "error" in v:
            print(f"  {name:<15} ERROR {v['error']}")
            continue
        rounds = ", ".join(f"{m:.2f}" for m in v["round_medians_ms"])
        print(f"  {name:<15} {v['median_ms']:8.2f} ms/step  (rounds {rounds}; min "
              f"{v['min_ms']:.2f}, p90 {v['p90_ms']:.2f}; {v['images_per_s']:.0f} images/s; "
              f"loss {v['last_loss']:.3f})")
        if "phases" in v:
            print(f"  {'':<15} phases (ms, medians): " + ", ".join(
                f"{k} {x:.2f}" for k, x in v["phases"].items() if k != "step"))
        if "hook" in v:
            h = v["hook"]
            print(f"  {'':<15} density {h['density']:.5f} (target {h['target_density']}), "
                  f"{h['buckets']} buckets, {h['bytes_per_step'] / 1e6:.2f} MB/step "
                  f"(dense {h['dense_bytes_per_step'] / 1e6:.1f} MB)")
    for k, val in result.get("ratios", {}).items():
        print(f"  {k:<28} {val:.3f}")
    for e in result["errors"]:
        print(f"  error: {e}")


if __name__ == "__main__":
    t0 = time.monotonic()
    rc = main()
    print(f"ddp_resnet18: {time.monotonic() - t0:.1f} s, exit {rc}")
    sys.exit(rc)
