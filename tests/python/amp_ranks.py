"""Rank bodies of test_amp.py: fp16 AMP's overflowing steps through the exdyna hook. GradScaler's
rule is applied by hand (Debian's torch 1.13 has GradScaler on CUDA only): a step whose gradients
are not all finite is skipped, as GradScaler.step skips it."""

import math
import time

import torch
import torch.nn as nn

from ranks import Stable, assert_same_on_every_rank, batch


def scaler_rule_steps(model, opt, rank, steps, poison_step, poison_rank=0, before_poison=None):
    """Trains `steps` steps; at poison_step, rank poison_rank's loss is multiplied by inf (an
    overflow on one rank). Returns the steps skipped for a non-finite gradient."""
    skipped = []
    for t in range(steps):
        if t == poison_step and before_poison is not None:
            before_poison()
        x, y = batch(rank, t)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        if t == poison_step and rank == poison_rank:
            loss = loss * math.inf
        loss.backward()
        if all(bool(torch.isfinite(p.grad).all()) for p in model.parameters()):
            opt.step()
        else:
            skipped.append(t)
    return skipped


def overflow_probe(rank, world, hook, overlap):
    """The issue's probe: 8 steps, one overflowing on rank 0 only. With DDP's all-reduce and with
    the exdyna hook, every rank skips that step (and only that one), and the parameters stay
    identical on every rank. With exdyna, the step is counted, nothing is sent, and each bucket's
    residual and iteration are as before the step."""
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = DDP(Stable())
    state = None
    if hook == "exdyna":
        state = exdyna.ddp.State("exdyna", 0.05, overlap=overlap, timeout=30)
        model.register_comm_hook(state, exdyna.ddp.hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    before = {}

    def keep_state():
        state._drain()
        before.update({k: (sp.residual(), sp.iteration) for k, sp in state._buckets.items()})

    skipped = scaler_rule_steps(model, opt, rank, 8, 3,
                                before_poison=keep_state if state else None)
    assert skipped == [3], f"rank {rank} skipped steps {skipped}; expected [3]"
    for i, p in enumerate(model.parameters()):
        assert bool(torch.isfinite(p).all()), f"parameter {i} is not finite"
        assert_same_on_every_rank(p, f"parameter {i}")
    if state is None:
        return
    assert state.non_finite_steps == len(before) >= 1, (state.non_finite_steps, before)
    assert state.iter == 8
    # Replay: a State that never saw step 3 ends with the same iterations per bucket.
    for key, sp in state._buckets.items():
        assert sp.iteration == 8 - 1, (key, sp.iteration)


def skipped_step_keeps_residual(rank, world):
    """The skipped step leaves every bucket's residual as it was (to the rounding of one add and
    subtract) on every rank, the overflowing rank's included, and its iteration unchanged."""
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = DDP(Stable())
    state = exdyna.ddp.State("exdyna", 0.05, overlap=False)
    model.register_comm_hook(state, exdyna.ddp.hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    seen = {}

    def keep():
        seen.update({k: (sp.residual(), sp.iteration) for k, sp in state._buckets.items()})

    scaler_rule_steps(model, opt, rank, 4, 3, before_poison=keep)
    assert seen
    for key, (residual, iteration) in seen.items():
        sp = state._buckets[key]
        assert sp.iteration == iteration, (sp.iteration, iteration)
        after = sp.residual()
        assert bool(torch.isfinite(after).all())
        torch.testing.assert_close(after, residual, rtol=1e-6,
                                   atol=1e-6 * float(residual.abs().max()))
        assert sp.stats["non_finite"] == 1 and sp.stats["k_total"] == 0


def raise_mode(rank, world, overlap):
    """non_finite="raise" keeps the refusal for loops without a scaler: backward raises on every
    rank, and the user reads the step's own message (not "Unable to cast ... to Tensor")."""
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = DDP(Stable())
    state = exdyna.ddp.State("exdyna", 0.05, overlap=overlap, non_finite="raise", timeout=20)
    model.register_comm_hook(state, exdyna.ddp.hook)
    x, y = batch(rank, 0)
    loss = nn.functional.cross_entropy(model(x), y)
    if rank == 0:
        loss = loss * math.inf
    t0 = time.monotonic()
    try:
        loss.backward()
    except RuntimeError as e:
        msg = str(e)
    else:
        raise AssertionError("backward with a non-finite gradient did not raise")
    assert "Unable to cast" not in msg, msg
    assert time.monotonic() - t0 < 20, "the error took the whole timeout"
    if rank == 0:
        assert "expected a finite value" in msg and "on rank 0" in msg, msg


def grad_scaler_run(rank, world, hook, steps, out_path, amp=True):
    """fp16 CPU autocast with torch.amp.GradScaler (torch 2.3 and later) from a scale that
    overflows at first (amp=False: float32, no scaler); writes the mean loss of the last 20 steps
    and the steps skipped."""
    import json

    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(20, 256), nn.ReLU(), nn.Linear(256, 10))
    model = DDP(net)
    if hook == "exdyna":
        state = exdyna.ddp.State(density=0.1)
        model.register_comm_hook(state, exdyna.ddp.hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 40, enabled=amp)
    w = torch.randn(20, 10, generator=torch.Generator().manual_seed(5))
    tail, skipped = [], 0
    for t in range(steps):
        x, _ = batch(rank, t)
        y = (x @ w).argmax(1)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16, enabled=amp):
            loss = nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        skipped += scaler.get_scale() < before
        if t >= steps - 20:
            tail.append(float(loss.detach()))
    for i, p in enumerate(model.parameters()):
        assert_same_on_every_rank(p, f"parameter {i}")
    if hook == "exdyna":  # the sparse path ran, not min_compression_rate's dense one
        assert state.k_total > 0 and all(s["mode"] == "sparse" for s in state.stats.values())
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"loss": sum(tail) / len(tail), "skipped": skipped}, f)
