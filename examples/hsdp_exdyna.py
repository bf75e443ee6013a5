#!/usr/bin/env python3
"""ExDyna on the slow link of hybrid sharding (HSDP) with FSDP2: a small decoder-only language
model on R replicas x S shards, the shard dimension reduce-scattered densely by FSDP2, the
replicate dimension all-reduced sparsely by exdyna.fsdp.

    torchrun --standalone --nproc-per-node 4 examples/hsdp_exdyna.py --steps 50 --density 0.01
    torchrun --standalone --nproc-per-node 4 examples/hsdp_exdyna.py --steps 50 --dense

Needs torch >= 2.7 (FSDP2 with set_all_reduce_hook); runs on CPU over Gloo (one thread a rank).
The mesh is (replicas, world / replicas) with names ("replicate", "shard"): rank r is replica
r // S, shard r % S. Data: sequences of a fixed random Markov chain over --vocab tokens (4 likely
successors per token, so the loss can fall from ln V towards about ln 4), each rank its own
batches; the held-out loss is on one fixed set of sequences. --dense trains native HSDP instead
(fully_shard on the 2-D mesh: FSDP2's own dense all-reduce over "replicate").

Each rank prints its training loss every --print-every steps; rank 0 prints the bytes its
replicate-dimension exchanges sent (the communicator's count) against a dense all-reduce of the
same buffers, and the final held-out loss. --json FILE: rank 0 writes the run's numbers there.
"""

import argparse
import datetime
import json
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--density", type=float, default=0.01)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--dense", action="store_true", help="native HSDP (the baseline)")
    p.add_argument("--replicas", type=int, default=2, help="R; the shards are world / R")
    p.add_argument("--sparsifier", default="exdyna")
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--batch", type=int, default=8, help="sequences per rank and step")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--print-every", type=int, default=10)
    p.add_argument("--json", help="rank 0 writes the run's numbers to this file")
    args = p.parse_args(argv)
    if not 0 < args.density <= 1:
        p.error(f"--density {args.density} is not valid; expected a number in (0, 1]")
    if args.steps < 1 or args.replicas < 1:
        p.error("--steps and --replicas must be >= 1")
    return args


class Block(nn.Module):
    """Pre-norm causal self-attention and MLP."""

    def __init__(self, width, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class TinyLm(nn.Module):
    """Token and position embeddings, `layers` blocks, a final norm and the output layer."""

    def __init__(self, vocab, width, layers, seq):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def markov_chain(vocab, seed):
    """Transition probabilities: each token has 4 likely successors (the same on every rank)."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.full((vocab, vocab), -4.0)
    for t in range(vocab):
        logits[t, torch.randperm(vocab, generator=g)[:4]] = 2.0
    return logits.softmax(-1)


def sequences(chain, n, length, seed):
    g = torch.Generator().manual_seed(seed)
    out = torch.empty(n, length + 1, dtype=torch.long)
    out[:, 0] = torch.randint(0, chain.shape[0], (n,), generator=g)
    for t in range(length):
        out[:, t + 1] = torch.multinomial(chain[out[:, t]], 1, generator=g).squeeze(1)
    return out[:, :-1], out[:, 1:]


def lm_loss(model, x, y):
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def build(args, mesh):
    """The model, sharded over mesh["shard"] (exdyna) or the 2-D mesh (--dense), and its
    ReplicaState (None for --dense). The same seed on every rank: FSDP2 does not broadcast."""
    from torch.distributed.fsdp import fully_shard

    import exdyna.fsdp
    torch.manual_seed(args.seed)
    model = TinyLm(args.vocab, args.width, args.layers, args.seq)
    on = mesh if args.dense else mesh["shard"]
    for block in model.blocks:
        fully_shard(block, mesh=on)
    fully_shard(model, mesh=on)
    if args.dense:
        return model, None
    state = exdyna.fsdp.ReplicaState(args.sparsifier, args.density,
                                     warmup_steps=max(2, args.steps // 10))
    exdyna.fsdp.register(model, state, mesh=mesh)
    return model, state


def train(args, rank, world):
    """Trains on an initialised group; returns rank's numbers (losses, bytes, held-out loss)."""
    from torch.distributed.device_mesh import init_device_mesh
    if world % args.replicas:
        raise ValueError(f"world size {world} is not a multiple of --replicas {args.replicas}")
    mesh = init_device_mesh("cpu", (args.replicas, world // args.replicas),
                            mesh_dim_names=("replicate", "shard"))
    model, state = build(args, mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    chain = markov_chain(args.vocab, args.seed)
    losses = []
    for step in range(args.steps):
        x, y = sequences(chain, args.batch, args.seq, 1_000_003 * (rank + 1) + step)
        opt.zero_grad()
        loss = lm_loss(model, x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if (step + 1) % args.print_every == 0 or step + 1 == args.steps:
            print(f"[rank {rank}] step {step + 1} loss {losses[-1]:.4f}", flush=True)
    with torch.no_grad():
        held_out = lm_loss(model, *sequences(chain, 64, args.seq, 7)).item()
    out = {"mode": "dense" if args.dense else f"{args.sparsifier}-d{args.density:g}",
           "steps": args.steps, "losses": losses, "held_out_loss": held_out}
    if state is not None:
        out.update(bytes=state.bytes_total, dense_bytes=state.dense_bytes_total,
                   density=state.actual_density(), units=state.units())
    return out


def report(args, rank, out):
    if rank != 0:
        return
    if "bytes" in out:
        print(f"replicate dimension, rank 0: sent {out['bytes']} bytes against "
              f"{out['dense_bytes']} for a dense all-reduce "
              f"({out['dense_bytes'] / max(out['bytes'], 1):.1f}x less), actual density "
              f"{out['density']:.5f}", flush=True)
    print(f"{out['mode']}: final training loss {out['losses'][-1]:.4f}, held-out loss "
          f"{out['held_out_loss']:.4f} (ln V = {math.log(args.vocab):.4f})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    try:
        rank = dist.get_rank()
        report(args, rank, train(args, rank, dist.get_world_size()))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
