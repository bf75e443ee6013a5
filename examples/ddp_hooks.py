#!/usr/bin/env python3
"""One rank of the DDP head-to-head (`exdyna compare --ddp`): trains a model with each DDP
communication hook in turn (--hook H --csv FILE, repeated: a fresh model from the same seed per
hook, all in one process group, so torch is imported and the ranks meet once per setting) and
writes rank 0's per-step CSV of each hook.

    torchrun --nnodes W --node_rank i --nproc_per_node 1 --master_addr HOST0 --master_port P \
        examples/ddp_hooks.py --model lstm --steps 200 \
        --hook allreduce --csv allreduce.csv --hook exdyna-d0.01 --csv exdyna.csv

Models (Gloo, one thread per rank, the same --seed on every rank):
  cnn   the small CNN of `exdyna train` on Fashion-MNIST (/usr/share/datasets/fashion-mnist),
        215k parameters, batch --batch (32) per rank, SGD lr 0.05 momentum 0.9; accuracy: test
        accuracy on the first --eval-images (2,000) test images.
  resnet18  ResNet-18 (examples/resnet18.py: BasicBlock, [2, 2, 2, 2], a 3x3 stem and no max-pool
        for 28 x 28 images; 11.2M parameters) with the CNN's data, batches, optimizer and measure.
  lstm  a word LSTM language model on the English text of python3.11-doc
        (/usr/share/doc/python3.11/html/_sources): the --vocab (10,000) most frequent words,
        embedding 200, 2 LSTM layers of 200, output layer 200 x V (4.65M parameters at V = 10,000,
        nine tenths of them in the embedding and the output layer, whose compute is small), batch
        --batch (4) sequences of --bptt (20) words per rank, SGD lr 20 with gradient clipping
        0.25 (PyTorch's word_language_model example); accuracy: next-word top-1 accuracy on 100
        held-out sequences (2,000 words) of the last 5 % of the corpus.
  transformer  a small decoder-only language model (TinyGpt: 4 blocks of causal self-attention,
        width 256, 8.3M parameters at V = 10,000) on the LSTM's corpus, words and batches, Adam lr
        1e-3 with gradient clipping 1.0; its measure is the held-out loss, as the LSTM's.
Hooks: allreduce (DDP with no hook: its C++ all-reduce), fp16, bf16 (PyTorch's
fp16_compress_hook, bf16_compress_hook), powersgd-rN (powerSGD_hook, rank N, error feedback and
warm start, start_powerSGD_iter = 10 % of --steps as PowerSGDState's documentation advises, at
least 2), exdyna-dX (exdyna.ddp.hook, State(density=X), the exact controller, overlapped, with
the density warm-up over the same share of steps: warmup_steps = 10 % of --steps, at least 2,
and dense_fallback=True: all-reduced densely where a dense iteration proved not slower),
exdyna-sync-dX (the same with overlap=False). Hybrid sharding (HSDP, FSDP2; the transformer only,
torch >= 2.7, torchrun --nproc_per_node P >= 2 ranks per node): the mesh is (nodes, P) with names
("replicate", "shard"), so a node's ranks form the shard group and the replicas span the nodes;
each of the model's 4 blocks is an FSDP unit, the root the fifth. hsdp (fully_shard on the 2-D
mesh: FSDP2's own dense all-reduce across the replicas), hsdp-exdyna-dX (fully_shard on
mesh["shard"] and exdyna.fsdp.ReplicaState(density=X), the exact controller and the warm-up of
exdyna-dX, on the replicate dimension).

The CSV (rank 0; one row per step): step, wall_s (training time so far, evaluation excluded),
step_ms (forward, backward with the hook, optimizer), compute_ms (the median of --calibrate steps
run with DDP's no_sync(), i.e. without communication, before training), hook_ms (time the autograd
thread spent inside the hook's calls this step; 0 for allreduce, whose hook is DDP's C++ code),
wait_ms (step_ms - compute_ms - hook_ms, at least 0: waiting for communication), bytes (what this
rank handed to collectives this step: exdyna's communicator count, the dense payload for
allreduce, fp16 and bf16, PowerSGD's P and Q and uncompressed tensors; for the HSDP hooks only
what crosses the replicas: the shards FSDP2 all-reduces, exdyna.fsdp's count), loss, and at every
--eval-every step acc (the model's accuracy, in [0, 1]) and val_loss (its mean cross-entropy on the
same held-out data: the LSTM's measure, whose accuracy stays near that of always predicting the
commonest word for hundreds of steps). A run ends after --steps steps, or with --budget S at the
first evaluation after S seconds of training (every rank stops after the same step). Each rank
evaluates every W-th held-out example and the ranks add up their counts. Each CSV is written as
FILE.part and renamed to FILE when its hook's run has ended, so FILE exists only for a finished
run. A failing rank prints the exception and exits 1, leaving the hooks
after it unrun; the driver records the failure and starts the rest again.

--device cuda puts every rank's model, batches and DDP buckets on the GPU (cuda:LOCAL_RANK modulo
the GPUs seen: the ranks of a machine with one GPU share cuda:0), still over Gloo, since NCCL
refuses two ranks on one device; each step and calibration step waits for the device before the
clock is read. exdyna's hooks then step CUDA buckets, which needs a build with the GPU path
(exdyna.cuda_built()); the HSDP hooks run on the CPU only. --fashion and --corpus name the data's
folders where Debian's packages are not installed (scripts/gpu-race-prepare.sh copies them).
"""

import argparse
import collections
import contextlib
import datetime
import functools
import glob
import os
import re
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

# The user-facing example beside this script (its directory is on sys.path when this runs as a
# script): the CNN, the IDX reader and PowerSGD's byte count, kept in one place.
from ddp_fashion_mnist import SmallCnn, powersgd_bytes, read_idx  # noqa: E402
from resnet18 import ResNet18  # noqa: E402

FASHION = "/usr/share/datasets/fashion-mnist"
CORPUS = "/usr/share/doc/python3.11/html/_sources"
# The models trained on Fashion-MNIST: the CNN's data, batch, optimizer and accuracy.
IMAGE_MODELS = ("cnn", "resnet18")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["cnn", "resnet18", "lstm", "transformer"], required=True)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where the models, batches and DDP buckets live (cuda: Gloo over CUDA "
                   "tensors; the ranks of a one-GPU machine share it)")
    p.add_argument("--fashion", default=FASHION, help="the Fashion-MNIST IDX files' folder")
    p.add_argument("--corpus", default=CORPUS, help="the language models' text (*.txt below it)")
    p.add_argument("--eval-images", type=int, default=2000,
                   help="held-out images of cnn and resnet18 (the first N test images)")
    p.add_argument("--hook", action="append", required=True, help="allreduce, fp16, bf16, "
                   "powersgd-rN, exdyna-dX, exdyna-sync-dX, hsdp, hsdp-exdyna-dX (repeated: run "
                   "in turn)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=0, help="the model's initial weights and every "
                   "rank's batches (0: the head-to-head's first seed)")
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--calibrate", type=int, default=5, help="no_sync steps before training")
    p.add_argument("--budget", type=float, default=0, help="stop a hook's run at the first "
                   "evaluation after this many seconds of training (0: run every step)")
    p.add_argument("--batch", type=int, help="per rank (cnn, resnet18 32; lstm, transformer 4)")
    p.add_argument("--lr", type=float, default=0.0, help="learning rate (cnn 0.05, lstm 20, transformer 1e-3)")
    p.add_argument("--bptt", type=int, default=20)
    p.add_argument("--vocab", type=int, default=10000)
    p.add_argument("--csv", action="append", required=True,
                   help="rank 0's per-step CSV, one per --hook, in the same order")
    p.add_argument("--cache-dir", default="", help="where the corpus' word ids are cached")
    p.add_argument("--timeout", type=float, default=300, help="seconds a collective may block")
    a = p.parse_args(argv)
    if a.steps < 1 or a.eval_every < 1 or a.calibrate < 1 or a.bptt < 2 or a.vocab < 100 \
            or not a.budget >= 0 or not 1 <= a.eval_images <= 10000:
        p.error("--steps, --eval-every, --calibrate >= 1, --bptt >= 2, --vocab >= 100, "
                "--budget >= 0, --eval-images 1 .. 10000")
    if len(a.csv) != len(a.hook):
        p.error(f"{len(a.hook)} --hook but {len(a.csv)} --csv; expected one --csv per --hook")
    a.batch = a.batch or (32 if a.model in IMAGE_MODELS else 4)
    for h in a.hook:
        try:
            kind, _ = parse_hook(h, a.steps)  # a bad name fails here, before any collective
        except ValueError as e:
            p.error(str(e))
        if kind == "hsdp":
            why = hsdp_unavailable(a.model)
            if why:
                p.error(f"--hook {h}: {why}")
        why = device_unavailable(a.device, kind)
        if why:
            p.error(f"--device {a.device} with --hook {h}: {why}")
    return a


def device_unavailable(device, kind):
    """Why a hook of this kind cannot run on the device ("" when it can), asked before any rank
    meets the others, so that a machine without a GPU fails here, naming it, not in a collective."""
    if device != "cuda":
        return ""
    if not torch.cuda.is_available():
        return (f"torch.cuda.is_available() is False (torch {torch.__version__}, built for CUDA "
                f"{torch.version.cuda}); expected a GPU and a CUDA build of torch, or --device cpu")
    if kind == "hsdp":
        return "the HSDP hooks run on the CPU only; expected --device cpu"
    if kind == "exdyna":
        import exdyna
        if not exdyna.cuda_built():
            return ("exdyna steps CUDA buckets only in a build with the GPU path "
                    "(exdyna.cuda_built() is False); rebuild it where nvcc is found "
                    "(EXDYNA_CUDA=ON)")
    return ""


def hsdp_unavailable(model):
    """Why an HSDP hook cannot run here ("" when it can): the model, the torch, the ranks."""
    if model != "transformer":
        return f"HSDP runs on the transformer (its blocks are the FSDP units), not --model {model}"
    import exdyna.fsdp
    if not exdyna.fsdp.available():
        return exdyna.fsdp._missing()
    if int(os.environ.get("LOCAL_WORLD_SIZE", "1")) < 2:
        return ("HSDP shards over a node's ranks; expected torchrun --nproc_per_node 2 or more "
                f"(LOCAL_WORLD_SIZE is {os.environ.get('LOCAL_WORLD_SIZE', 'unset')})")
    return ""


def parse_hook(name, steps):
    """(kind, parameter): ('allreduce', None), ('powersgd', rank), ('exdyna', (density, overlap)),
    ('hsdp', None) for native HSDP, ('hsdp', density) for exdyna.fsdp."""
    if name in ("allreduce", "fp16", "bf16"):
        return name, None
    if name == "hsdp":
        return "hsdp", None
    m = re.fullmatch(r"hsdp-exdyna-d([0-9.e-]+)", name)
    if m and 0 < float(m.group(1)) <= 1:
        return "hsdp", float(m.group(1))
    m = re.fullmatch(r"powersgd-r([1-9][0-9]*)", name)
    if m:
        return "powersgd", int(m.group(1))
    m = re.fullmatch(r"exdyna(-sync)?-d([0-9.e-]+)", name)
    if m:
        d = float(m.group(2))
        if 0 < d <= 1:
            return "exdyna", (d, m.group(1) is None)
    raise ValueError(f"--hook '{name}' is not valid; expected allreduce, fp16, bf16, "
                     "powersgd-rN, exdyna-dX, exdyna-sync-dX, hsdp or hsdp-exdyna-dX with "
                     "0 < X <= 1")


class WordLstm(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, 200)
        self.lstm = nn.LSTM(200, 200, num_layers=2, batch_first=True)
        self.out = nn.Linear(200, vocab)

    def forward(self, x):
        h, _ = self.lstm(self.embed(x))
        return self.out(h)


class TinyGpt(nn.Module):
    """A small decoder-only language model: learned token and position embeddings, 4 pre-norm
    blocks of causal self-attention (4 heads) and a 4x MLP at width 256, an untied output layer;
    8.3M parameters at V = 10,000, most of them in the two V x 256 matrices, as in the LSTM."""

    def __init__(self, vocab, context, width=256, layers=4, heads=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(context, width))
        block = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers)
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, vocab)
        causal = torch.triu(torch.full((context, context), float("-inf")), diagonal=1)
        self.register_buffer("causal", causal, persistent=False)

    def forward(self, x):
        n = x.shape[1]
        h = self.embed(x) + self.position[:n]
        return self.out(self.norm(self.blocks(h, mask=self.causal[:n, :n])))


# Cached: the process trains one model per hook on the same data (nothing here writes to it).
@functools.lru_cache(maxsize=None)
def fashion(folder, split):
    x = torch.from_numpy(read_idx(os.path.join(folder, f"{split}-images-idx3-ubyte.gz")).copy())
    y = torch.from_numpy(read_idx(os.path.join(folder, f"{split}-labels-idx1-ubyte.gz")).copy())
    x = x.float() / 255.0
    y = y.long()
    return ((x - 0.2860) / 0.3530).unsqueeze(1), y


@functools.lru_cache(maxsize=None)
def corpus_ids(vocab, cache_dir, corpus=CORPUS):
    """The corpus as word ids (0: a word outside the vocabulary), cached: every rank reads it."""
    cache = os.path.join(cache_dir, f"lstm-corpus-v{vocab}.pt") if cache_dir else ""
    if cache and os.path.exists(cache):
        return torch.load(cache)
    words = []
    for path in sorted(glob.glob(os.path.join(corpus, "**", "*.txt"), recursive=True)):
        with open(path, encoding="utf-8", errors="replace") as f:
            words.extend(re.findall(r"[a-z]+", f.read().lower()))
    if not words:
        raise SystemExit(f"ddp_hooks.py: no corpus under {corpus} (install python3.11-doc, "
                         "or name its _sources folder with --corpus)")
    common = [w for w, _ in collections.Counter(words).most_common(vocab - 1)]
    index = {w: i + 1 for i, w in enumerate(common)}
    ids = torch.tensor([index.get(w, 0) for w in words], dtype=torch.long)
    if cache:
        tmp = f"{cache}.{os.getpid()}"
        torch.save(ids, tmp)
        os.replace(tmp, cache)  # atomic: ranks racing here all write the same ids
    return ids


def rank_device(name):
    """The rank's device: the CPU, or the GPU of its local rank among those seen (one GPU: all
    ranks of the machine share cuda:0)."""
    if name == "cpu":
        return torch.device("cpu")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())


class Task:
    """A model, its batches (per rank and step), its loss and its accuracy. The data stay on the
    host; a batch moves to the model's device when it is drawn."""

    def __init__(self, a, rank, world):
        self.a, self.rank, self.world = a, rank, world
        self.device = rank_device(a.device)
        torch.manual_seed(a.seed)
        if a.model in IMAGE_MODELS:
            self.xtr, self.ytr = fashion(a.fashion, "train")
            xte, yte = fashion(a.fashion, "t10k")
            self.xte, self.yte = xte[:a.eval_images], yte[:a.eval_images]
            self.net = SmallCnn() if a.model == "cnn" else ResNet18()
        else:
            ids = corpus_ids(a.vocab, a.cache_dir, a.corpus)
            cut = int(len(ids) * 0.95)
            self.train_ids, held = ids[:cut], ids[cut:]
            span = a.bptt + 1
            self.test = held[:100 * span].view(100, span)
            self.net = WordLstm(a.vocab) if a.model == "lstm" else TinyGpt(a.vocab, a.bptt)
        # Initialised on the host from the seed, then moved: every rank starts from equal weights.
        self.net.to(self.device)
        self.gen = torch.Generator().manual_seed(1 + rank + 1000 * a.seed)

    def batch(self):
        a = self.a
        if a.model in IMAGE_MODELS:
            idx = torch.randint(len(self.xtr), (a.batch,), generator=self.gen)
            return self.xtr[idx].to(self.device), self.ytr[idx].to(self.device)
        span = a.bptt + 1
        starts = torch.randint(len(self.train_ids) - span, (a.batch,), generator=self.gen)
        chunk = torch.stack([self.train_ids[s:s + span] for s in starts.tolist()]).to(self.device)
        return chunk[:, :-1], chunk[:, 1:]

    def sync(self):
        """Waits for the device's queued work, so that a clock read after it counts that work."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def loss(self, model, batch):
        out = model(batch[0])
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), batch[1].reshape(-1))

    def evaluate(self):
        """This rank's share of the held-out data (every world-th example; the replicas are
        equal, so the shares add up to the whole): [hits, summed cross-entropy, examples]."""
        self.net.eval()
        with torch.no_grad():
            if self.a.model in IMAGE_MODELS:
                x, y = self.xte[self.rank::self.world], self.yte[self.rank::self.world]
            else:
                share = self.test[self.rank::self.world]
                x, y = share[:, :-1], share[:, 1:]
            x, y = x.to(self.device), y.to(self.device)
            out = self.net(x)
            hits = (out.argmax(-1) == y).sum()
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1), reduction="sum")
        self.net.train()
        return [float(hits), float(loss), float(y.numel())]

    def clip(self, model=None):
        if self.a.model not in IMAGE_MODELS:
            torch.nn.utils.clip_grad_norm_((model or self.net).parameters(),
                                           0.25 if self.a.model == "lstm" else 1.0)

    def optimizer(self):
        if self.a.model in IMAGE_MODELS:
            return torch.optim.SGD(self.net.parameters(), lr=self.a.lr or 0.05, momentum=0.9)
        if self.a.model == "lstm":
            return torch.optim.SGD(self.net.parameters(), lr=self.a.lr or 20.0)
        return torch.optim.Adam(self.net.parameters(), lr=self.a.lr or 1e-3)


def register(model, kind, param, steps, n_params, clock):
    """Registers the hook, its call time added to clock[0]; returns (bytes of a step, meta, the
    hook's state)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    meta = {}
    if kind == "allreduce":
        return (lambda step: 4 * n_params), meta, None
    if kind in ("fp16", "bf16"):
        state, hook = None, getattr(default_hooks, f"{kind}_compress_hook")
        per_step = lambda step: 2 * n_params  # noqa: E731
    elif kind == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        start = max(2, steps // 10)
        meta["start_powerSGD_iter"] = start
        state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=param,
                                   start_powerSGD_iter=start, use_error_feedback=True,
                                   warm_start=True)
        hook, compressed = psgd.powerSGD_hook, int(powersgd_bytes(model, param))
        per_step = lambda step: 4 * n_params if step < start else compressed  # noqa: E731
    else:
        import exdyna.ddp
        density, overlap = param
        # The density warm-up gets PowerSGD's share of the steps (docs/python.md, "When the
        # accuracy lags": without it d = 0.001 diverges on the CNN).
        warmup = max(2, steps // 10)
        meta["warmup_steps"] = warmup
        # dense_fallback as docs/python.md advises for training: dense where it is not slower.
        state = exdyna.ddp.State(density=density, overlap=overlap, controller="exact",
                                 warmup_steps=warmup, dense_fallback=True)
        hook, seen = exdyna.ddp.hook, [0]

        def per_step(step):
            sent, seen[0] = state.bytes_total - seen[0], state.bytes_total
            return sent

    def timed(s, bucket):
        t0 = time.perf_counter()
        fut = hook(s, bucket)
        clock[0] += time.perf_counter() - t0
        return fut

    model.register_comm_hook(state, timed)
    return per_step, meta, state


def calibrate(model, task, opt, n, no_sync):
    """Median ms of forward + backward (+ clipping) with no communication (DDP's no_sync)."""
    times = []
    for _ in range(n):
        b = task.batch()
        task.sync()
        t0 = time.perf_counter()
        with no_sync():
            task.loss(model, b).backward()
        task.clip(model)
        task.sync()
        times.append(1e3 * (time.perf_counter() - t0))
        opt.zero_grad()
    return statistics.median(times)


# --- hybrid sharding (HSDP) with FSDP2 ------------------------------------------------------------

def hsdp_mesh():
    """The 2-D mesh (nodes, ranks per node) named ("replicate", "shard"). torchrun's static
    rendezvous numbers a node's ranks consecutively, so a row is one node's ranks (the shard
    group, over loopback) and a column spans the nodes (a replica group, over the shaped links)."""
    from torch.distributed.device_mesh import init_device_mesh
    shards = int(os.environ["LOCAL_WORLD_SIZE"])
    rank, world = dist.get_rank(), dist.get_world_size()
    node = int(os.environ.get("GROUP_RANK", rank // shards))
    if world % shards or rank // shards != node:
        raise RuntimeError(f"rank {rank} of {world} runs on node {node} with {shards} ranks a "
                           "node; expected node = rank // ranks per node (torchrun's static "
                           "rendezvous)")
    return init_device_mesh("cpu", (world // shards, shards), mesh_dim_names=("replicate", "shard"))


def hsdp_shard(net, mesh, native):
    """FSDP2 on each of the transformer's blocks and on the root: on the 2-D mesh (native HSDP)
    or on the 1-D mesh["shard"] (exdyna.fsdp then does the replicate dimension)."""
    from torch.distributed.fsdp import fully_shard
    on = mesh if native else mesh["shard"]
    for block in net.blocks.layers:
        fully_shard(block, mesh=on)
    return fully_shard(net, mesh=on)


def hsdp_register(net, mesh, density, steps, clock):
    """(bytes of a step, meta, state) of an HSDP run. Native (density None): an all-reduce hook
    on each unit counts the shard FSDP2 has just all-reduced across the replicas. exdyna:
    exdyna.fsdp.ReplicaState with exdyna-dX's controller and warm-up; its reduce timed into
    clock[0] and its byte count read per step."""
    from torch.distributed.fsdp import FSDPModule

    import exdyna.fsdp
    meta = {"replicas": mesh.size(0), "shards": mesh.size(1), "bytes": "replicate"}
    if density is None:
        sent = [0]

        def count(reduced):
            sent[0] += reduced.numel() * reduced.element_size()

        for module in net.modules():
            if isinstance(module, FSDPModule):
                module.set_all_reduce_hook(count)

        def per_step(step):
            out, sent[0] = sent[0], 0
            return out
        return per_step, meta, None
    warmup = max(2, steps // 10)  # as exdyna-dX's
    meta["warmup_steps"] = warmup
    state = exdyna.fsdp.ReplicaState(density=density, controller="exact", warmup_steps=warmup)
    reduce, seen = state.reduce, [0]

    def timed(name, flat):
        t0 = time.perf_counter()
        reduce(name, flat)
        clock[0] += time.perf_counter() - t0

    state.reduce = timed  # register() hooks each unit to state.reduce: the timed one
    exdyna.fsdp.register(net, state, mesh=mesh)

    def per_step(step):
        sent, seen[0] = state.bytes_total - seen[0], state.bytes_total
        return sent
    return per_step, meta, state


def hsdp_compute_ms(a, task, mesh, native):
    """calibrate() on a spare model sharded alike: FSDP2's set_requires_gradient_sync(False) keeps
    the unsharded gradients for the next synced backward, which the trained model must not get."""
    torch.manual_seed(a.seed)
    spare = hsdp_shard(TinyGpt(a.vocab, a.bptt), mesh, native)
    spare.set_requires_gradient_sync(False)
    opt = torch.optim.SGD(spare.parameters(), lr=0.0)
    return calibrate(spare, task, opt, a.calibrate, contextlib.nullcontext)


def wrap(a, task, kind, param, clock):
    """(model, bytes of a step, meta, state, compute ms): task.net under DDP with the hook, or
    sharded with FSDP2 (kind "hsdp")."""
    n_params = sum(p.numel() for p in task.net.parameters())
    if kind == "hsdp":
        mesh = hsdp_mesh()
        model = hsdp_shard(task.net, mesh, native=param is None)
        step_bytes, meta, state = hsdp_register(model, mesh, param, a.steps, clock)
        compute_ms = hsdp_compute_ms(a, task, mesh, native=param is None)
        return model, n_params, step_bytes, meta, state, compute_ms
    from torch.nn.parallel import DistributedDataParallel as DDP
    # A CUDA module names its one device (the rank's); a CPU module names none.
    on_gpu = task.device.type == "cuda"
    model = DDP(task.net, device_ids=[task.device.index] if on_gpu else None)
    step_bytes, meta, state = register(model, kind, param, a.steps, n_params, clock)
    # task.optimizer() is made again for training: calibration's zero_grad is all it needs here.
    compute_ms = calibrate(model, task, task.optimizer(), a.calibrate, model.no_sync)
    return model, n_params, step_bytes, meta, state, compute_ms


def train(a, hook, csv_path, rank, world):
    task = Task(a, rank, world)
    clock = [0.0]
    kind, param = parse_hook(hook, a.steps)
    model, n_params, step_bytes, meta, state, compute_ms = wrap(a, task, kind, param, clock)
    opt = task.optimizer()
    out = open(csv_path + ".part", "w") if rank == 0 else None
    if out:
        out.write(f"# model={a.model} hook={hook} world={world} device={a.device} "
                  f"parameters={n_params} "
                  f"torch={torch.__version__} calibrated_compute_ms={compute_ms:.3f} "
                  f"steps={a.steps} budget_s={a.budget:g}"
                  + "".join(f" {k}={v}" for k, v in meta.items()) + "\n")
        out.write("step,wall_s,step_ms,compute_ms,hook_ms,wait_ms,bytes,loss,acc,val_loss\n")
    wall = 0.0
    for step in range(a.steps):
        b = task.batch()
        task.sync()  # the batch's copy to the device is not the step's
        clock[0] = 0.0
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = task.loss(model, b)
        loss.backward()
        task.clip()
        task.sync()
        t1 = time.perf_counter()
        opt.step()
        task.sync()
        t2 = time.perf_counter()
        step_ms, opt_ms, hook_ms = 1e3 * (t2 - t0), 1e3 * (t2 - t1), 1e3 * clock[0]
        wall += (t2 - t0)
        sent = step_bytes(step)
        acc, stop = "", False
        if (step + 1) % a.eval_every == 0 or step + 1 == a.steps:
            # Evaluation stays out of the step time. The sums of every rank's share, and whether
            # any rank is past the budget, so that every rank stops after the same step.
            total = torch.tensor(task.evaluate() + [float(0 < a.budget <= wall)],
                                 dtype=torch.float64)
            dist.all_reduce(total)
            acc, stop = f"{total[0] / total[2]:.5f},{total[1] / total[2]:.5f}", total[3] > 0
        if out:
            comp = compute_ms + opt_ms
            out.write(f"{step},{wall:.4f},{step_ms:.3f},{comp:.3f},{hook_ms:.3f},"
                      f"{max(0.0, step_ms - comp - hook_ms):.3f},{sent},{loss.item():.5f},"
                      f"{acc or ','}\n")
            out.flush()
        if not torch.isfinite(loss.detach()):
            raise RuntimeError(f"loss {float(loss)} at step {step}: training diverged")
        if stop:
            break
    if out and hasattr(state, "compression_stats"):
        print(state.compression_stats(), flush=True)  # with dense_fallback's decision
    if hasattr(state, "close"):
        state.close()  # exdyna's communication thread: the next hook's run starts without it
    if out:
        out.close()
        os.replace(csv_path + ".part", csv_path)


def main(argv=None):
    a = parse_args(argv)
    torch.set_num_threads(1)
    if a.device == "cuda":
        # The hooks' own CUDA work (PowerSGD's matrices, exdyna's stream) on the rank's device.
        torch.cuda.set_device(rank_device(a.device))
    # Gloo on either device: NCCL refuses two ranks on one GPU, which a one-GPU race needs.
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=a.timeout))
    try:
        for hook, csv_path in zip(a.hook, a.csv):
            train(a, hook, csv_path, dist.get_rank(), dist.get_world_size())
            dist.barrier()  # every rank has finished this hook before the next one starts
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
