#!/usr/bin/env python3
"""Why a DDP hook run diverges: the head-to-head's CNN (examples/ddp_hooks.py's, SGD lr 0.05,
batch 32 per rank) on 4 Gloo ranks of this machine (no emulated link), exdyna.ddp.hook with the
given State options, and per step rank 0's loss, the largest |update| the hook returned, the
largest residual norm of its buckets and the largest |parameter|; at the end the accuracy on rank
0's share (every 4th) of the first 2,000 test images.

    PYTHONPATH=build/python python3 bench/ddp/density_probe.py --density 0.001 \\
        --state '{"warmup_steps": 50}' --momentum 0.9 --out probe.log
"""
import argparse
import datetime
import json
import math
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import ddp_hooks  # noqa: E402


def rank_body(rank, world, a, out):
    import exdyna.ddp
    task = ddp_hooks.Task(ddp_hooks.parse_args(["--model", "cnn", "--hook", "allreduce",
                                                "--csv", "-", "--seed", str(a.seed)]),
                          rank, world)
    model = torch.nn.parallel.DistributedDataParallel(task.net)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    state = exdyna.ddp.State(density=a.density, optimizer=opt, **json.loads(a.state))
    largest, norms = {}, {}

    def hook(s, bucket):
        grad_norm = float(bucket.buffer().norm())

        def seen(fut):
            largest[bucket.index()] = float(fut.value().abs().max())
            norms[bucket.index()] = (float(fut.value().norm()), grad_norm)
            return fut.value()
        return exdyna.ddp.hook(s, bucket).then(seen)

    model.register_comm_hook(state, hook)
    for step in range(a.steps):
        opt.zero_grad()
        loss = task.loss(model, task.batch())
        loss.backward()
        if a.clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        state._drain()
        residual = max((float(r.norm()) for k in state.buckets()
                        if (r := state._bucket_sparsifier(k).residual()) is not None), default=0)
        pmax = max(float(p.abs().max()) for p in model.parameters())
        out.write(f"{step} loss {float(loss):.4f} update_max {max(largest.values()):.4g} "
                  f"residual_norm {residual:.4g} param_max {pmax:.4g} "
                  f"update_norm {max(u for u, _ in norms.values()):.4g} "
                  f"grad_norm {max(g for _, g in norms.values()):.4g}\n")
        out.flush()
        if not math.isfinite(float(loss)):
            out.write(f"diverged at step {step}\n")
            return
    hits, _, n = task.evaluate()
    out.write(f"accuracy {hits / n:.4f} on {int(n)} test images\n")


def enter(rank, world, store, a):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    with open(a.out if rank == 0 else os.devnull, "w") as out:
        rank_body(rank, world, a, out)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--density", type=float, default=0.001)
    p.add_argument("--state", default="{}", help="exdyna.ddp.State options as JSON")
    p.add_argument("--momentum", type=float, default=0.9, help="the optimizer's (SGD)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--clip", type=float, default=0.0,
                   help="clip the update's norm (torch.nn.utils.clip_grad_norm_) before the step")
    p.add_argument("--seed", type=int, default=0, help="examples/ddp_hooks.py's --seed")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(enter, args=(4, os.path.join(tmp, "store"), a), nprocs=4,
                           start_method="spawn")


if __name__ == "__main__":
    main()
