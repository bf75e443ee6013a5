"""Rank bodies for the tests, spawned with torch.multiprocessing: each rank joins a Gloo group over a
FileStore in the test's temporary directory (loopback, no ports to collide) and asserts; a failing
rank fails the test through mp.spawn."""

import copy
import datetime
import math
import os
import pickle
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def spawn(body, world, tmp_path, *args, deadline_s=240):
    """Runs body(rank, world, *args) on `world` ranks; fails the test when one raises, or when
    they have not all finished within deadline_s (a hang must not stall CTest)."""
    os.makedirs(str(tmp_path), exist_ok=True)
    store = os.path.join(str(tmp_path), "store")
    ctx = mp.start_processes(_enter, args=(world, store, body, args), nprocs=world, join=False,
                             start_method="spawn")
    end = time.monotonic() + deadline_s
    while not ctx.join(timeout=1):
        if time.monotonic() > end:
            for p in ctx.processes:
                if p.is_alive():
                    p.terminate()
            raise AssertionError(f"{body.__name__} on {world} ranks did not finish within "
                                 f"{deadline_s} s")


def _enter(rank, world, store, body, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    try:
        body(rank, world, *args)
    finally:
        dist.destroy_process_group()
    # A passed rank leaves without finalizing the interpreter: torch 1.13's Gloo worker may drop a
    # collective's last tensor reference after the caller has moved on, and if the interpreter is
    # finalizing then, the worker cannot take the GIL and the process aborts ("terminate called
    # without an active exception"; seen under load in 2 of 150 runs of a test that ends with
    # an all-gather of temporaries).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def gathered(t):
    """Every rank's copy of t (flattened)."""
    flat = t.detach().flatten().contiguous()
    out = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(out, flat)
    return out


def assert_same_on_every_rank(t, what):
    copies = gathered(t)
    for r, c in enumerate(copies):
        assert torch.equal(c, copies[0]), f"{what}: rank {r} differs from rank 0"


def gradient(rank, t, n, scale=1.0):
    g = torch.Generator().manual_seed(1000 * rank + t)
    # a few large entries over a normal bulk, like real gradients
    x = torch.randn(n, generator=g) * scale
    x[torch.randint(0, n, (n // 50,), generator=g)] *= 8
    return x


# --- exdyna.Sparsifier ---------------------------------------------------------------------------

def sparsifier_steps(rank, world, name, steps, options=None):
    import exdyna
    n, d = 20000, 0.01
    sp = exdyna.Sparsifier(name, d, **(options or {}))
    for t in range(steps):
        grad = gradient(rank, t, n)
        before = grad.clone()
        update = sp.step(grad)
        assert torch.equal(grad, before), "step must not change its input"
        assert update.shape == grad.shape and update.dtype == torch.float32
        assert_same_on_every_rank(update, f"{name} update {t}")
        s = sp.stats
        assert s["iteration"] == t and s["n_g"] == n and s["world_size"] == world
        assert len(s["k_per_worker"]) == world and sum(s["k_per_worker"]) == s["k_total"]
        assert 0 < int((update != 0).sum()) <= s["k_unique"] <= s["k_total"]
        assert s["bytes"]["total"] > 0
        values = (options or {}).get("values")
        if values in ("fp16", "bf16"):
            # Gloo sums fp16 words as they are (2 bytes a value); bf16 travels widened (4)
            per_value = 2 if values == "fp16" else 4
            assert s["bytes"]["allreduce"] == per_value * s["k_unique"], s["bytes"]
        if name == "exdyna" and not options and t >= 1:
            # exact controller (the default): k' = k from the second iteration on
            assert abs(s["density"] - d) <= 0.02 * d, s["density"]


def sixteen_bit_wire(rank, world):
    """values="fp16" halves the values' bytes of the same step against fp32 on Gloo, and its
    update is fp32's to fp16 rounding, identical on every rank."""
    import exdyna
    n, d = 50000, 0.01
    wide, half = exdyna.Sparsifier("exdyna", d), exdyna.Sparsifier("exdyna", d, values="fp16")
    grad = gradient(rank, 0, n)
    u32, u16 = wide.step(grad), half.step(grad)
    assert wide.stats["k_unique"] == half.stats["k_unique"] > 0
    b32, b16 = wide.stats["bytes"], half.stats["bytes"]
    assert 2 * b16["allreduce"] == b32["allreduce"] > 0, (b32, b16)
    assert b16["total"] < b32["total"], (b32, b16)
    assert_same_on_every_rank(u16, "fp16 update")
    torch.testing.assert_close(u16, u32, rtol=2e-3, atol=1e-3 * float(u32.abs().max()))


def sparse_bytes_estimate(rank, world):
    """State.sparse_bytes, which min_compression_rate uses, is within 25 % of the bytes a settled
    step of those options counts (ladder slot, fused indices, values, the non-finite check)."""
    import exdyna
    import exdyna.ddp
    for options in ({}, {"values": "fp16"}, {"worker_cap": "none"}):
        state = exdyna.ddp.State(density=0.01, **options)
        for n in (500, 5000, 50000):
            sp = exdyna.Sparsifier("exdyna", 0.01, **state.options)
            for t in range(12):
                sp.step(gradient(rank, t, n))
            sent = sp.stats["bytes"]["total"]
            estimate = state.sparse_bytes(n, world)
            assert 0.75 <= estimate / sent <= 1.25, (options, n, estimate, sp.stats["bytes"])


def sparsifier_round_trip(rank, world, name):
    import exdyna
    n, d = 8000, 0.02
    a = exdyna.Sparsifier(name, d, gather="exact")
    for t in range(3):
        a.step(gradient(rank, t, n))
    saved = a.state_dict()
    expect = [a.step(gradient(rank, t, n)) for t in range(3, 6)]
    b = exdyna.Sparsifier(name, d, gather="exact")
    b.load_state_dict(saved)
    assert b.iteration == 3
    for t in range(3, 6):
        got = b.step(gradient(rank, t, n))
        assert torch.equal(got, expect[t - 3]), f"{name}: step {t} after load differs"
    # a state is refused by a sparsifier that did not save it
    c = exdyna.Sparsifier(name, d * 2)
    try:
        c.load_state_dict(saved)
    except ValueError as e:
        assert "saved by sparsifier" in str(e)
    else:
        raise AssertionError("load_state_dict of another sparsifier's state did not raise")


# --- exdyna.ddp -----------------------------------------------------------------------------------

class Reordered(nn.Module):
    """Parameters registered in another order than forward uses them: DDP's buckets after its
    rebuild (gradient-ready order) differ from its first ones (reverse registration order)."""

    def __init__(self):
        super().__init__()
        self.c = nn.Linear(64, 10)
        self.a = nn.Linear(20, 8000)
        self.b = nn.Linear(8000, 64)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


class Stable(nn.Module):
    """Under DDP's 1 MB first bucket and registered in gradient-ready order: DDP's first bucket
    layout equals its rebuilt one, so a restored run continues bit for bit."""

    def __init__(self):
        super().__init__()
        self.l3 = nn.Linear(64, 10, bias=False)
        self.l2 = nn.Linear(1000, 64, bias=False)
        self.l1 = nn.Linear(20, 1000, bias=False)

    def forward(self, x):
        return self.l3(torch.relu(self.l2(torch.relu(self.l1(x)))))


def batch(rank, t):
    g = torch.Generator().manual_seed(7919 * rank + t)
    return torch.randn(16, 20, generator=g), torch.randint(0, 10, (16,), generator=g)


def train_steps(model, opt, rank, first, last):
    for t in range(first, last):
        x, y = batch(rank, t)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def ddp_model(net, density, bucket_cap_mb=0.25):
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(net, bucket_cap_mb=bucket_cap_mb)
    state = exdyna.ddp.State(density=density)
    model.register_comm_hook(state, exdyna.ddp.hook)
    return model, state


def ddp_identical(rank, world, steps):
    torch.manual_seed(rank)  # different initial weights: DDP must broadcast rank 0's
    model, state = ddp_model(Reordered(), 0.05)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    train_steps(model, opt, rank, 0, 1)
    first = state.buckets()
    train_steps(model, opt, rank, 1, steps)
    after = state.buckets()
    # the rebuild replaced the first layout; only the current buckets keep state
    assert first != after and state.rebuilds >= 1, (first, after)
    assert len(after) == 2 and all(int(k.split(":")[1]) > 0 for k in after)
    assert sum(int(k.split(":")[1]) for k in after) == sum(p.numel() for p in model.parameters())
    for i, p in enumerate(model.parameters()):
        assert_same_on_every_rank(p, f"parameter {i} after {steps} steps")
    assert 0 < state.actual_density() <= 0.05 * 1.02
    assert state.bytes_total > 0 and set(state.stats) == {0, 1}


def ddp_round_trip(rank, world, out_dir):
    import exdyna.ddp
    torch.manual_seed(0)
    model, state = ddp_model(Stable(), 0.02)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    train_steps(model, opt, rank, 0, 3)
    assert state.rebuilds == 0 and len(state.buckets()) == 1, state.buckets()
    ckpt = {"model": {k: v.clone() for k, v in model.module.state_dict().items()},
            "opt": copy.deepcopy(opt.state_dict()), "hook": state.state_dict()}
    train_steps(model, opt, rank, 3, 6)
    expect = [p.detach().clone() for p in model.parameters()]

    torch.manual_seed(1)
    net = Stable()
    net.load_state_dict(ckpt["model"])
    model2, state2 = ddp_model(net, 0.02)
    opt2 = torch.optim.SGD(model2.parameters(), lr=0.05, momentum=0.9)
    opt2.load_state_dict(ckpt["opt"])
    state2.load_state_dict(ckpt["hook"])
    train_steps(model2, opt2, rank, 3, 6)
    for i, (p, q) in enumerate(zip(model2.parameters(), expect)):
        assert torch.equal(p.detach(), q), f"parameter {i} differs after the restored run"
    assert state2.steps == state.steps
    try:
        exdyna.ddp.State(density=0.05).load_state_dict(ckpt["hook"])
    except ValueError as e:
        assert "density" in str(e)
    else:
        raise AssertionError("load_state_dict with another density did not raise")


# --- the hook against `exdyna simulate --trace` ----------------------------------------------------

def ddp_record_trace(rank, world, steps, density, trace_dir, out_path):
    """Trains Stable() under the hook for `steps` steps, recording every rank's raw bucket
    gradient (the trace) and the hook's decisions (rank 0 writes both)."""
    import json

    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = DDP(Stable(), bucket_cap_mb=0.25)
    state = exdyna.ddp.State(density=density)
    raw = []

    def recording_hook(st, bucket):
        raw.append(bucket.buffer().clone())
        return exdyna.ddp.hook(st, bucket)

    model.register_comm_hook(state, recording_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    decisions = []
    for t in range(steps):
        train_steps(model, opt, rank, t, t + 1)
        s = state.stats[0]
        decisions.append({k: s[k] for k in ("iteration", "threshold", "k_total", "k_per_worker",
                                            "alloc_per_worker", "blocks_per_partition")})
    assert len(raw) == steps, "expected one bucket per step"
    per_step = [gathered(g) for g in raw]  # [t][w] flat gradients
    if rank == 0:
        os.makedirs(trace_dir, exist_ok=True)
        with open(os.path.join(trace_dir, "grads.f32"), "wb") as f:
            for t in range(steps):
                for w in range(world):
                    f.write(per_step[t][w].numpy().astype("<f4").tobytes())
        with open(os.path.join(trace_dir, "meta.json"), "w") as f:
            json.dump({"n_g": raw[0].numel(), "workers": world, "iterations": steps}, f)
        with open(out_path, "w") as f:
            json.dump(decisions, f)


# --- failures end in exceptions, not in an aborted interpreter ------------------------------------

def dead_peer(rank, world):
    import exdyna
    sp = exdyna.Sparsifier("exdyna", 0.01, timeout=20)
    sp.step(gradient(rank, 0, 10000))
    dist.barrier()
    if rank == world - 1:
        os._exit(0)  # dies without a word between two steps
    try:
        sp.step(gradient(rank, 1, 10000))
    except (RuntimeError, TimeoutError) as e:
        msg = str(e)
    else:
        raise AssertionError("a step with a dead peer did not raise")
    assert "process group (gloo)" in msg, msg
    # the communicator refuses further calls, naming the first failure
    try:
        sp.step(gradient(rank, 2, 10000))
    except RuntimeError as e:
        assert "after an earlier failure" in str(e), str(e)
    else:
        raise AssertionError("a step after a failure did not raise")


# --- ranks that disagree ------------------------------------------------------------------------

def disagree(rank, world):
    """Each case differs on rank 1 only; every rank must raise the same ValueError naming rank 1
    and the field, quickly, and the group must stay usable for the next case."""
    import exdyna
    cases = [("length", "exdyna", 0.01, 100_000 + rank, torch.float32),
             ("density", "exdyna", 0.01 * (1 + rank), 100_000, torch.float32),
             ("sparsifier", ["exdyna", "topk"][rank], 0.01, 100_000, torch.float32),
             ("dtype", "exdyna", 0.01, 100_000, [torch.float32, torch.bfloat16][rank])]
    for field, name, density, n, dtype in cases:
        sp = exdyna.Sparsifier(name, density)
        t0 = time.monotonic()
        try:
            sp.step(gradient(rank, 0, n).to(dtype))
        except ValueError as e:
            msg = str(e)
        else:
            raise AssertionError(f"ranks with another {field} stepped without an error")
        seconds = time.monotonic() - t0
        assert f"rank 1 has {field} " in msg and "rank 0 has" in msg, msg
        assert seconds < 1.0, f"{field}: the refusal took {seconds:.2f} s"
        assert sp.iteration == 0 and sp.stats is None
        # every rank raised the same message
        msgs = [None] * world
        dist.all_gather_object(msgs, msg)
        assert msgs == [msg] * world, msgs
    # agreeing ranks still step (and the group still works) after the refusals
    sp = exdyna.Sparsifier("exdyna", 0.01)
    assert_same_on_every_rank(sp.step(gradient(rank, 0, 100_000)), "update after refusals")


# --- PyTorch's hook conventions ------------------------------------------------------------------

def ddp_start_iter(rank, world, warmup):
    """The first `warmup` steps under State(start_iter=warmup) give plain DDP's parameters bit for
    bit; the sparsifiers start afterwards from iteration 0 (their residuals at zero)."""
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    net = Reordered()
    plain = DDP(copy.deepcopy(net), bucket_cap_mb=0.25)
    hooked = DDP(net, bucket_cap_mb=0.25)
    state = exdyna.ddp.State("exdyna", 0.05, start_iter=warmup)
    hooked.register_comm_hook(state, exdyna.ddp.hook)
    opts = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (plain, hooked)]
    for model, opt in zip((plain, hooked), opts):
        train_steps(model, opt, rank, 0, warmup)
    for i, (p, q) in enumerate(zip(plain.parameters(), hooked.parameters())):
        assert torch.equal(p, q), f"parameter {i} after {warmup} warm-up steps differs from DDP's"
    assert state.iter == warmup and state.buckets() == [], state.buckets()
    assert state.dense_steps == state.steps and {s["mode"] for s in state.stats.values()} == {
        "dense"}
    train_steps(hooked, opts[1], rank, warmup, warmup + 2)
    assert {s["mode"] for s in state.stats.values()} == {"sparse"}
    # two sparse steps since the warm-up: the sparsifiers began at iteration 0 then
    assert {s["iteration"] for s in state.stats.values()} == {1}, state.stats
    assert 0 < state.actual_density() <= 0.05 * 1.02
    line = state.compression_stats()
    assert f"iteration {warmup + 2}," in line and "density 0.0" in line, line


def ddp_overlap_same(rank, world, steps):
    """overlap=True and overlap=False take the same decisions: the stats of every bucket at every
    step and the parameters after `steps` steps are equal. (Not the bytes: fuse="auto" chooses
    between one all-gather and two from measured times, a path and not a decision.)"""
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    runs = []
    for overlap in (True, False):
        torch.manual_seed(0)
        model = DDP(Reordered(), bucket_cap_mb=0.25)
        state = exdyna.ddp.State("exdyna", 0.05, overlap=overlap, start_iter=1)
        model.register_comm_hook(state, exdyna.ddp.hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        decisions = []
        for t in range(steps):
            train_steps(model, opt, rank, t, t + 1)
            decisions.append({i: {k: s[k] for k in ("mode", "iteration", "n_g", "k_total",
                                                     "threshold", "k_per_worker")
                                  if k in s} for i, s in sorted(state.stats.items())})
        runs.append((decisions, [p.detach().clone() for p in model.parameters()], state))
    (d1, p1, s1), (d0, p0, s0) = runs
    assert s1._thread is not None and s0._thread is None  # the overlapped run used its thread
    for t, (a, b) in enumerate(zip(d1, d0)):
        assert a == b, f"step {t}: overlapped {a} != synchronous {b}"
    for i, (a, b) in enumerate(zip(p1, p0)):
        assert torch.equal(a, b), f"parameter {i} differs between overlap=True and False"


def ddp_global_error_on_request(rank, world, steps):
    """The hook's sparsifiers skip Eq. 1's all-reduce unless measure_global_error=True: its
    global_error is NaN by default and a positive number when asked for, and the parameters are
    the same either way (measuring decides nothing)."""
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    runs = []
    for options in ({}, {"measure_global_error": True}):
        torch.manual_seed(0)
        model = DDP(Stable())
        state = exdyna.ddp.State("exdyna", 0.05, **options)
        model.register_comm_hook(state, exdyna.ddp.hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        train_steps(model, opt, rank, 0, steps)
        errors = [s["global_error"] for s in state.stats.values()]
        runs.append((errors, [p.detach().clone() for p in model.parameters()]))
    (off, p_off), (on, p_on) = runs
    assert off and all(math.isnan(e) for e in off), off
    assert on and all(math.isfinite(e) and e > 0 for e in on), on
    for i, (a, b) in enumerate(zip(p_off, p_on)):
        assert torch.equal(a, b), f"parameter {i} differs with measure_global_error=True"


# --- a checkpoint that survives a change of world size -------------------------------------------

def elastic_save(rank, world, path):
    """Trains Stable() (one bucket) for 3 steps and saves the group checkpoint (rank 0)."""
    torch.manual_seed(0)
    model, state = ddp_model(Stable(), 0.02)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    train_steps(model, opt, rank, 0, 3)
    (key,) = state.buckets()
    residuals = gathered(state._bucket_sparsifier(key).residual())
    ckpt = state.group_state_dict()
    mean = ckpt["buckets"][key]["mean_residual"]
    assert ckpt["world_size"] == world and mean.abs().sum() > 0
    expect = torch.stack(residuals).double().mean(0)
    assert torch.allclose(mean.double(), expect, rtol=0, atol=1e-6 * float(expect.abs().max()))
    if rank == 0:
        torch.save({"model": model.module.state_dict(), "hook": ckpt}, path)


def elastic_resume(rank, world, path):
    """Resumes the group checkpoint at this world size: every rank starts from the saved mean
    residual (so the group's mean is the saved one), ExDyna from the saved threshold, and the
    training goes on with identical parameters on every rank."""
    ckpt = torch.load(path)
    net = Stable()
    net.load_state_dict(ckpt["model"])
    model, state = ddp_model(net, 0.02)
    state.load_state_dict(ckpt["hook"])
    (key, saved), = ckpt["hook"]["buckets"].items()
    sp = state._bucket_sparsifier(key)
    r = sp.residual()
    assert torch.equal(r, saved["mean_residual"])
    group_mean = r.clone()
    dist.all_reduce(group_mean)
    # the group's mean is the saved one to float32 rounding (the all-reduce sums world copies)
    assert torch.allclose(group_mean / world, saved["mean_residual"], rtol=4e-7 * world, atol=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    train_steps(model, opt, rank, 3, 5)
    assert state.stats[0]["world_size"] == world and state.stats[0]["iteration"] == 1
    for i, p in enumerate(model.parameters()):
        assert torch.isfinite(p).all()
        assert_same_on_every_rank(p, f"parameter {i} after resuming at {world} ranks")


# --- momentum correction's velocity through a change of world size ------------------------------

def _momentum_model(net):
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(net, bucket_cap_mb=0.25)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    state = exdyna.ddp.State(density=0.02, momentum_correction=0.9, optimizer=opt)
    model.register_comm_hook(state, exdyna.ddp.hook)
    return model, state, opt


def elastic_velocity_save(rank, world, path):
    """Trains Stable() with momentum correction and saves the group checkpoint, whose velocity is
    the mean of the ranks' velocities."""
    torch.manual_seed(0)
    model, state, opt = _momentum_model(Stable())
    train_steps(model, opt, rank, 0, 3)
    (key,) = state.buckets()
    velocities = gathered(state._bucket_sparsifier(key).velocity())
    ckpt = state.group_state_dict()
    mean = ckpt["buckets"][key]["mean_velocity"]
    expect = torch.stack(velocities).double().mean(0)
    assert expect.abs().sum() > 0
    assert torch.allclose(mean.double(), expect, rtol=0, atol=1e-6 * float(expect.abs().max()))
    if rank == 0:
        torch.save({"model": model.module.state_dict(), "hook": ckpt}, path)


def elastic_velocity_resume(rank, world, path):
    """Every rank of the resumed group starts from the saved mean velocity."""
    ckpt = torch.load(path)
    net = Stable()
    net.load_state_dict(ckpt["model"])
    model, state, opt = _momentum_model(net)
    state.load_state_dict(ckpt["hook"])
    (key, saved), = ckpt["hook"]["buckets"].items()
    assert torch.equal(state._bucket_sparsifier(key).velocity(), saved["mean_velocity"])
    train_steps(model, opt, rank, 3, 5)
    for i, p in enumerate(model.parameters()):
        assert torch.isfinite(p).all()
        assert_same_on_every_rank(p, f"parameter {i} after resuming at {world} ranks")


# --- exdyna.ddp.State(dense_fallback=True) ---------------------------------------------------------

def _fake_fallback_clock(state, times):
    """The link's speed is what the fallback measures; these tests set it: an iteration lasts
    times["sparse"] or times["dense"] by its mode (times["at_d"] once fresh sparsifiers at d
    follow a dense warm-up), the sample all-reduce times["exchange"] (the model is smaller than
    the sample, so that is the predicted dense exchange). The collectives are real."""
    fb, now = state._fallback, [0.0]

    def clock():
        sparse = times["sparse"] if fb.retime is None else times["at_d"]
        now[0] += (times["dense"] if fb.mode(state.iter) else sparse) / 1e3
        return now[0]
    measure = fb.measure_exchange
    fb.clock = clock
    fb.measure_exchange = lambda st, buf, n: measure(st, buf, n) * 0 + times["exchange"] / 1e3


def _modes_by_iteration(model, opt, state, rank, first, last):
    modes = []
    for t in range(first, last):
        train_steps(model, opt, rank, t, t + 1)
        modes.append({s["mode"] for s in state.stats.values()})
    return modes


def ddp_dense_fallback(rank, world, times, warmup, expect):
    """dense_fallback's probe and decisions under set iteration times: the probe's iterations and
    the fallback's are DDP's all-reduce bit for bit, the probe keeps the sparsifiers for a sparse
    decision, a dense warm-up is followed by sparsifiers at d, and the decision is every rank's
    and survives state_dict() and pickling."""
    import warnings
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    hooked = DDP(Stable(), bucket_cap_mb=0.25)
    state = exdyna.ddp.State("exdyna", 0.05, dense_fallback=True, warmup_steps=warmup)
    hooked.register_comm_hook(state, exdyna.ddp.hook)
    _fake_fallback_clock(state, times)
    opt = torch.optim.SGD(hooked.parameters(), lr=0.05, momentum=0.9)
    end = 28
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        modes = _modes_by_iteration(hooked, opt, state, rank, 0, 14)
        rebuilds, buckets = state.rebuilds, state.buckets()
        modes += _modes_by_iteration(hooked, opt, state, rank, 14, end - 1)
        # the last iteration's gradients against DDP's all-reduce of the local ones, by hand
        local = copy.deepcopy(hooked.module)
        x, y = batch(rank, end - 1)
        nn.functional.cross_entropy(local(x), y).backward()
        expected = []
        for p in local.parameters():
            expected.append(p.grad.div_(world))
            dist.all_reduce(expected[-1])
        modes += _modes_by_iteration(hooked, opt, state, rank, end - 1, end)
    went_dense = [w for w in caught if "dense_fallback" in str(w.message)]
    found = state.fallback
    assert modes[:8] == [{"sparse"}] * 8, modes
    assert found["decision"] == expect, found
    if times["exchange"] > times["sparse"]:  # the predicted dense exchange ruled the probe out
        assert modes[8:] == [{"sparse"}] * (end - 8) and found["since"] == 8, modes
        assert "dense_ms" not in found["summary"] and "sparse since iteration 8" in \
            state.compression_stats()
        assert found["summary"]["predicted_dense_ms"] == times["exchange"]
    else:
        assert modes[8:14] == [{"probe"}] * 6, modes
    if warmup and found["since"] != 8 and times["sparse"] >= 0.75 * times["dense"]:
        # dense through the warm-up, then 5 timed iterations of fresh sparsifiers at d
        assert modes[14:20] == [{"fallback"}] * 6 and modes[20:26] == [{"sparse"}] * 6, modes
        assert found["since"] == 26 and found["retime"] == 20
        assert state.stats[0]["density"] < 0.06 or expect == "dense", state.stats[0]
    elif found["since"] != 8:
        assert found["since"] == 14 and found["retime"] is None
    if expect == "dense":
        assert modes[found["since"]:] == [{"fallback"}] * (end - found["since"]), modes
        assert state.buckets() == [] and len(went_dense) == (1 if rank == 0 else 0)
        for i, (g, p) in enumerate(zip(expected, hooked.parameters())):
            assert torch.equal(g, p.grad), f"parameter {i}: the fallback is not DDP's all-reduce"
        assert f"dense since iteration {found['since']}" in state.compression_stats()
    else:
        assert modes[found["since"]:] == [{"sparse"}] * (end - found["since"]) and not went_dense
        if found["since"] == 14:  # the probe kept the sparsifiers
            assert state.rebuilds == rebuilds and buckets == state.buckets()
    for p in hooked.parameters():
        assert_same_on_every_rank(p.detach(), "a parameter under dense_fallback")
    resumed = exdyna.ddp.State("exdyna", 0.05, dense_fallback=True, warmup_steps=warmup)
    resumed.load_state_dict(state.state_dict())
    assert resumed.fallback == found and (resumed._fallback.retime is not None) == (
        found["retime"] is not None)
    unpickled = pickle.loads(pickle.dumps(state))
    assert unpickled.dense_fallback and unpickled.fallback == found
