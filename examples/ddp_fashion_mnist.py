#!/usr/bin/env python3
"""exdyna's DDP communication hook against plain DDP on the main job: the small CNN of
`exdyna train` (two 5x5 conv + max-pool stages, two dense layers) on Fashion-MNIST, 4 Gloo ranks
spawned with torch.multiprocessing on this machine, SGD lr 0.05 momentum 0.9, batch 32 per rank,
lr x0.1 for the last epoch.

    PYTHONPATH=build/python python3 examples/ddp_fashion_mnist.py            # hook, then plain DDP
    PYTHONPATH=build/python python3 examples/ddp_fashion_mnist.py --mode hook --density 0.01

Prints, per epoch and run: test accuracy, the hook's actual density (values selected / gradients
seen, over all buckets) and the bytes each rank moved per step (as exdyna's communicator counts
them: the gathered buffers and the all-reduced values; plain DDP all-reduces the whole gradient,
4 bytes per parameter).
"""

import argparse
import gzip
import os
import socket
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's, as exdyna train normalises


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, padding=2)
        self.conv2 = nn.Conv2d(16, 32, 5, padding=2)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, split):
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    x = (torch.from_numpy(images.astype(np.float32) / 255.0) - MEAN) / STD
    return x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


def accuracy(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            correct += int((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum())
    model.train()
    return correct / len(x)


def run(rank, world, args, mode, port, results):
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    xtr, ytr = load(args.data_dir, "train")
    xte, yte = load(args.data_dir, "t10k")
    torch.manual_seed(args.seed)
    model = DDP(SmallCnn())
    n_params = sum(p.numel() for p in model.parameters())
    state = None
    if mode == "hook":
        state = exdyna.ddp.State(sparsifier=args.sparsifier, density=args.density)
        model.register_comm_hook(state, exdyna.ddp.hook)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    steps_per_epoch = len(xtr) // (world * args.batch_size)
    if args.max_steps:
        steps_per_epoch = min(steps_per_epoch, args.max_steps)
    for epoch in range(args.epochs):
        if epoch == args.epochs - 1 and args.epochs > 1:
            for g in opt.param_groups:
                g["lr"] = args.lr * 0.1
        order = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(epoch))
        mine = order[rank::world]
        k0, n0, b0 = (state.k_total, state.n_g_total, state.bytes_total) if state else (0, 0, 0)
        t0 = time.monotonic()
        for step in range(steps_per_epoch):
            idx = mine[step * args.batch_size:(step + 1) * args.batch_size]
            opt.zero_grad()
            F.cross_entropy(model(xtr[idx]), ytr[idx]).backward()
            opt.step()
        seconds = time.monotonic() - t0
        if state:
            density = (state.k_total - k0) / max(1, state.n_g_total - n0)
            bytes_per_step = (state.bytes_total - b0) / steps_per_epoch
        else:
            density, bytes_per_step = 1.0, 4.0 * n_params
        if rank == 0:
            acc = accuracy(model.module, xte, yte)
            line = (f"{mode:5s} epoch {epoch + 1}/{args.epochs}: test accuracy {100 * acc:.2f} %  "
                    f"density {density:.5f}  bytes/step/rank {bytes_per_step:,.0f}  "
                    f"({seconds:.0f} s, {steps_per_epoch} steps)")
            print(line, flush=True)
            results[mode] = (acc, density, bytes_per_step)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["both", "hook", "ddp"], default="both")
    p.add_argument("--sparsifier", default="exdyna")
    p.add_argument("--density", type=float, default=0.01)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--max-steps", type=int, default=0, help="steps per epoch at most (0: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data-dir", default=DATA)
    args = p.parse_args()
    modes = ["hook", "ddp"] if args.mode == "both" else [args.mode]
    with mp.Manager() as manager:
        results = manager.dict()
        for mode in modes:
            mp.spawn(run, args=(args.workers, args, mode, free_port(), results),
                     nprocs=args.workers)
        print(f"\n{args.workers} Gloo ranks, {args.epochs} epochs, batch {args.batch_size}/rank, "
              f"sparsifier {args.sparsifier} at d = {args.density}:")
        for mode in modes:
            acc, density, bps = results[mode]
            label = f"exdyna hook ({args.sparsifier})" if mode == "hook" else "plain DDP"
            print(f"  {label:22s} test accuracy {100 * acc:.2f} %  density {density:.5f}  "
                  f"bytes/step/rank {bps:,.0f}")
        if len(modes) == 2:
            print(f"  bytes ratio DDP / hook: {results['ddp'][2] / results['hook'][2]:.1f}x")


if __name__ == "__main__":
    main()
