#!/usr/bin/env python3
"""exdyna's DDP communication hook against plain DDP on the main job: the small CNN of
`exdyna train` (two 5x5 conv + max-pool stages, two dense layers) on Fashion-MNIST, SGD lr 0.05
momentum 0.9, batch 32 per rank, lr x0.1 for the last epoch, Gloo.

Under torchrun (env://: one process per rank, on one host or across hosts with --nnodes):

    torchrun --standalone --nproc_per_node 4 examples/ddp_fashion_mnist.py --mode hook
    torchrun --nnodes 2 --node_rank 0 --master_addr HOST0 --nproc_per_node 4 \
        examples/ddp_fashion_mnist.py --mode hook           # and --node_rank 1 on the other host

Without torchrun it spawns --workers ranks on this machine itself:

    python3 examples/ddp_fashion_mnist.py                    # hook, then plain DDP
    python3 examples/ddp_fashion_mnist.py --mode hook --density 0.01
    python3 examples/ddp_fashion_mnist.py --mode all         # + fp16, PowerSGD

Prints, per epoch and run: the hook's State.compression_stats(), test accuracy, the hook's actual density (values selected / gradients
seen, over all buckets), the bytes each rank moved per step (as exdyna's communicator counts
them: the gathered buffers and the all-reduced values; plain DDP all-reduces the whole gradient,
4 bytes per parameter, fp16_compress_hook 2; PowerSGD's are computed from its rules) and the
training step time.
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
    """A spawned rank: joins the group over TCP on this machine, trains one mode."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    train(rank, world, args, mode, results)
    dist.destroy_process_group()


def train(rank, world, args, mode, results):
    import exdyna
    from torch.nn.parallel import DistributedDataParallel as DDP

    xtr, ytr = load(args.data_dir, "train")
    xte, yte = load(args.data_dir, "t10k")
    torch.manual_seed(args.seed)
    model = DDP(SmallCnn())
    n_params = sum(p.numel() for p in model.parameters())
    state = None
    bytes_per_step = 4.0 * n_params  # plain DDP: all-reduce of the whole float32 gradient
    if mode == "hook":
        state = exdyna.ddp.State(args.sparsifier, args.density, start_iter=args.start_iter)
        model.register_comm_hook(state, exdyna.ddp.hook)
    elif mode == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        bytes_per_step = 2.0 * n_params
    elif mode == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        ps = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=args.powersgd_rank,
                                start_powerSGD_iter=2)
        model.register_comm_hook(ps, psgd.powerSGD_hook)
        bytes_per_step = powersgd_bytes(model, args.powersgd_rank)
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
        density = 1.0
        if state:
            density = (state.k_total - k0) / max(1, state.n_g_total - n0)
            bytes_per_step = (state.bytes_total - b0) / steps_per_epoch
        if rank == 0:
            acc = accuracy(model.module, xte, yte)
            ms = 1000 * seconds / steps_per_epoch
            line = (f"{mode:8s} epoch {epoch + 1}/{args.epochs}: test accuracy {100 * acc:.2f} %  "
                    f"density {density:.5f}  bytes/step/rank {bytes_per_step:,.0f}  "
                    f"{ms:.1f} ms/step ({steps_per_epoch} steps)")
            print(line, flush=True)
            if state:
                print("         " + state.compression_stats(), flush=True)
            results[mode] = (acc, density, bytes_per_step, ms)


def powersgd_bytes(model, rank):
    """Per step and rank, what powerSGD_hook all-reduces after its warm-up (torch 1.13's rules:
    vectors and matrices that do not compress by 2x or more travel whole; an n x m matrix
    travels as P (n x r) and Q (m x r))."""
    total = 0
    for p in model.parameters():
        if p.dim() <= 1:
            total += 4 * p.numel()
            continue
        n = p.shape[0]
        m = p.numel() // n
        r = min(n, m, rank)
        total += 4 * ((n + m) * r if n * m > 2 * (n + m) * r else n * m)
    return float(total)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["both", "all", "hook", "ddp", "fp16", "powersgd"],
                   default="both", help="both: hook and ddp; all: also PyTorch's fp16 and "
                   "PowerSGD hooks")
    p.add_argument("--powersgd-rank", type=int, default=1)
    p.add_argument("--sparsifier", default="exdyna")
    p.add_argument("--density", type=float, default=0.01)
    p.add_argument("--start-iter", type=int, default=0,
                   help="the hook's warm-up: steps of plain all-reduce before sparsifying")
    p.add_argument("--workers", type=int, default=4,
                   help="ranks to spawn without torchrun (torchrun sets them itself)")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--max-steps", type=int, default=0, help="steps per epoch at most (0: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data-dir", default=DATA)
    args = p.parse_args()
    modes = {"both": ["hook", "ddp"], "all": ["hook", "ddp", "fp16", "powersgd"]}.get(
        args.mode, [args.mode])
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        # torchrun (or any env:// launcher): this process is one rank; the modes run in turn.
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
        rank, world = dist.get_rank(), dist.get_world_size()
        results = {}
        for mode in modes:
            train(rank, world, args, mode, results)
        if rank == 0:
            summary(args, world, modes, results)
        dist.destroy_process_group()
        return
    with mp.Manager() as manager:
        results = manager.dict()
        for mode in modes:
            mp.spawn(run, args=(args.workers, args, mode, free_port(), results),
                     nprocs=args.workers)
        summary(args, args.workers, modes, results)


def summary(args, world, modes, results):
    print(f"\n{world} Gloo ranks, {args.epochs} epochs, batch {args.batch_size}/rank, "
          f"sparsifier {args.sparsifier} at d = {args.density}:")
    labels = {"hook": f"exdyna hook ({args.sparsifier})", "ddp": "plain DDP",
              "fp16": "fp16_compress_hook", "powersgd": f"powerSGD_hook (rank {args.powersgd_rank})"}
    for mode in modes:
        acc, density, bps, ms = results[mode]
        print(f"  {labels[mode]:26s} test accuracy {100 * acc:.2f} %  density {density:.5f}  "
              f"bytes/step/rank {bps:,.0f}  {ms:.1f} ms/step (last epoch)")
    if "hook" in modes and "ddp" in modes:
        print(f"  bytes ratio DDP / hook: {results['ddp'][2] / results['hook'][2]:.1f}x")


if __name__ == "__main__":
    main()
