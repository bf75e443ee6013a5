"""Rank bodies of test_conventions.py: gradient accumulation under no_sync, torch.compile, and
the hook's logging, each on 2 Gloo ranks with the exdyna hook."""

import torch
import torch.nn as nn

from ranks import Stable, assert_same_on_every_rank, batch, train_steps


class OneMatrix(nn.Module):
    """One parameter, so one bucket whatever order a compiled backward produces gradients in."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(20, 500) / 5)

    def forward(self, x):
        h = torch.tanh(x @ self.w)
        return h[:, :10] * h[:, 10:20] + h[:, 20:30]


def _ddp(log=None, log_every=100, compiled=False, net=None):
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = DDP(net if net is not None else Stable())
    state = exdyna.ddp.State("exdyna", 0.05, overlap=True, log=log, log_every=log_every)
    model.register_comm_hook(state, exdyna.ddp.hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return (torch.compile(model) if compiled else model), model, state, opt


def accumulation(rank, world, steps):
    """Two micro-batches of 8, the first under no_sync(), give the update of one batch of 16 (the
    same samples, loss halved per micro-batch): same parameters to float tolerance, same values
    sent, one hook call per bucket and step."""
    runs = {}
    for mode in ("whole", "accumulated"):
        model, _, state, opt = _ddp()
        for t in range(steps):
            x, y = batch(rank, t)
            opt.zero_grad()
            if mode == "whole":
                nn.functional.cross_entropy(model(x), y).backward()
            else:
                with model.no_sync():
                    (nn.functional.cross_entropy(model(x[:8]), y[:8]) / 2).backward()
                (nn.functional.cross_entropy(model(x[8:]), y[8:]) / 2).backward()
            opt.step()
        runs[mode] = ([p.detach().clone() for p in model.parameters()], state)
    (whole, s1), (acc, s2) = runs["whole"], runs["accumulated"]
    assert s1.iter == s2.iter == steps and s1.steps == s2.steps, (s1.steps, s2.steps)
    assert s1.k_total == s2.k_total, (s1.k_total, s2.k_total)
    for i, (a, b) in enumerate(zip(whole, acc)):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=f"parameter {i}")
        assert_same_on_every_rank(b, f"accumulated parameter {i}")


def compiled(rank, world, steps):
    """torch.compile of the DDP model with the hook registered: the hook takes the same decisions
    (values sent, parameters to float tolerance) as eager. A one-parameter model: compiled, DDP's
    gradient-ready order (so a rebuilt bucket's layout) differs from eager's, and a bucket holding
    the same parameters in another order is another vector to select from."""
    runs = {}
    for mode in ("eager", "compiled"):
        torch.manual_seed(0)
        model, ddp, state, opt = _ddp(compiled=mode == "compiled", net=OneMatrix())
        train_steps(model, opt, rank, 0, steps)
        runs[mode] = ([p.detach().clone() for p in ddp.parameters()], state)
    (eager, s1), (comp, s2) = runs["eager"], runs["compiled"]
    assert s2.steps >= steps and s1.k_total == s2.k_total, (s1.k_total, s2.k_total)
    for i, (a, b) in enumerate(zip(eager, comp)):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=f"parameter {i}")
        assert_same_on_every_rank(b, f"compiled parameter {i}")


def logging(rank, world, out_dir):
    """log(iteration, scalars) every log_every iterations, with the interval's scalars; and the
    TensorBoard adapter, into a real SummaryWriter where torch has one."""
    calls = []
    model, _, state, opt = _ddp(log=lambda it, s: calls.append((it, dict(s))), log_every=2)
    train_steps(model, opt, rank, 0, 6)
    state._drain()
    assert [it for it, _ in calls] == [2, 4, 6], calls
    for it, s in calls:
        assert abs(s["density"] - 0.05) <= 0.05 * 0.05, s  # the exact controller holds d
        assert s["target_density"] == 0.05 and s["bytes"] > 0 and s["compression"] > 1, s
        assert s["dense_bytes"] == 2 * 4 * sum(p.numel() for p in model.parameters()), s
        assert s["non_finite_steps"] == 0 and s["f_t"] >= 1, s
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return
    import exdyna.log
    writer = SummaryWriter(log_dir=f"{out_dir}/tb{rank}")
    model, _, state, opt = _ddp(log=exdyna.log.tensorboard(writer), log_every=1)
    train_steps(model, opt, rank, 0, 2)
    state._drain()
    writer.close()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(f"{out_dir}/tb{rank}")
    events.Reload()
    assert [e.step for e in events.Scalars("exdyna/density")] == [1, 2]
