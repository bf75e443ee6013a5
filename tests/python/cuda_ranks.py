"""Rank bodies and helpers for tests/python/test_cuda.py (the GPU path of exdyna.Sparsifier).

Spawned with ranks.spawn (torch.multiprocessing + a Gloo group over a FileStore): every rank
shares the one GPU. Each body raises AssertionError on a mismatch, which fails the test."""

import torch
import torch.distributed as dist

# Compared exactly, every iteration, between the CPU path and the CUDA path: the decisions.
DECISION_KEYS = ("iteration", "threshold", "k_per_worker", "k_total", "k_unique",
                 "alloc_per_worker", "blocks_per_partition")

_layer_scales = {}


def layer_scales(n):
    """A fixed layout of 24 contiguous layers of varied sizes whose scales span three decades
    (1e-3 .. 1), the same on every rank: what makes one threshold mean different things in
    different parts of the bucket."""
    if n not in _layer_scales:
        g = torch.Generator().manual_seed(12345)
        cuts = torch.sort(torch.randint(1, n, (23,), generator=g)).values.tolist()
        bounds = [0] + cuts + [n]
        scale = torch.empty(n)
        for i in range(24):
            scale[bounds[i]:bounds[i + 1]] = 10.0 ** (-3.0 * float(torch.rand(1, generator=g)))
        _layer_scales[n] = scale
    return _layer_scales[n]


_hot = {}


def hot_factor(n):
    """A fixed per-element log-normal factor (median 1, a few elements tens of times larger), the
    same on every rank and iteration: the parameters whose gradients run large in every step."""
    if n not in _hot:
        _hot[n] = torch.exp(1.2 * torch.randn(n, generator=torch.Generator().manual_seed(54321)))
    return _hot[n]


def laplace(n, g):
    """n Laplace(0, 1) values from generator g, by the inverse CDF of one uniform draw each (u is
    kept off 0, so no log(0))."""
    v = torch.rand(n, generator=g).clamp_(min=2.0 ** -25).sub_(0.5)
    return torch.log1p(v.abs().mul_(-2.0)).mul_(-torch.sign(v))


def heavy_gradient(rank, t, n):
    """Rank `rank`'s gradient at iteration t: deterministic in (rank, t), heavy-tailed (Laplace times
    a fixed log-normal factor per element), times the layer scales (three decades), decaying
    slowly with a tenfold drop from iteration 25 on (a learning-rate step the threshold controller
    must follow). Magnitudes about 1 / (2 sqrt(d n)) at the top percent, like the paper controller's
    first threshold, as real gradients shrink with n. float32, CPU, contiguous."""
    own = laplace(n, torch.Generator().manual_seed(1_000_003 * (rank + 1) + t))
    decay = 0.99 ** t * (0.1 if t >= 25 else 1.0)
    scale = 3e-3 * decay
    return own.mul_(hot_factor(n)).mul_(layer_scales(n)).mul_(scale).float().contiguous()


def compare_updates(cpu_update, cuda_update, what):
    """The CUDA update (moved to the CPU) must equal the CPU one bit for bit. The decisions are
    taken on the host from the same counts, acc is formed by the same float additions on both
    sides, and Gloo sums a CUDA tensor by staging it through host memory with the same algorithm
    it runs on a CPU tensor, so the values are expected identical (at world size 1 over NCCL too:
    a sum of one). On a difference the message says which kind: a different support (a wrong
    selection), values beyond rtol 1e-6, or only the last bits (a summation order that differs on
    the device: then the support and closeness checks are the ones to keep)."""
    got = cuda_update.detach().cpu()
    assert got.shape == cpu_update.shape and got.dtype == cpu_update.dtype, (
        f"{what}: CUDA update {tuple(got.shape)} {got.dtype} vs CPU {tuple(cpu_update.shape)} "
        f"{cpu_update.dtype}")
    if torch.equal(got, cpu_update):
        return
    cpu_nz = cpu_update != 0
    got_nz = got != 0
    if not torch.equal(cpu_nz, got_nz):
        only_cpu = (cpu_nz & ~got_nz).nonzero().flatten()[:5].tolist()
        only_cuda = (got_nz & ~cpu_nz).nonzero().flatten()[:5].tolist()
        raise AssertionError(
            f"{what}: support differs: {int(cpu_nz.sum())} nonzeros on CPU, {int(got_nz.sum())} "
            f"on CUDA; only on CPU (first 5): {only_cpu}, only on CUDA: {only_cuda}")
    assert torch.allclose(got, cpu_update, rtol=1e-6, atol=0.0), (
        f"{what}: values differ beyond rtol 1e-6: max |diff| "
        f"{float((got - cpu_update).abs().max())}")
    diff = (got != cpu_update).nonzero().flatten()
    raise AssertionError(
        f"{what}: same support and values within rtol 1e-6, but {diff.numel()} values differ "
        f"in the last bits (summation order on the device?), first at {diff[:5].tolist()}")


def compare_decisions(cpu_stats, cuda_stats, what):
    diffs = [f"{k}: CPU {cpu_stats.get(k)!r} vs CUDA {cuda_stats.get(k)!r}"
             for k in DECISION_KEYS if cpu_stats.get(k) != cuda_stats.get(k)]
    assert not diffs, f"{what}: decisions differ:\n  " + "\n  ".join(diffs)


def cpu_vs_cuda(rank, world, options, steps, n, density):
    """Two exdyna sparsifiers over the same Gloo group, one fed CPU tensors and one fed CUDA
    tensors of the same recorded gradients; every iteration's decisions and update must match."""
    import exdyna
    torch.cuda.set_device(0)
    cpu = exdyna.Sparsifier("exdyna", density, **options)
    gpu = exdyna.Sparsifier("exdyna", density, **options)
    mode = ",".join(f"{k}={v}" for k, v in options.items()) or "defaults"
    for t in range(steps):
        grad = heavy_gradient(rank, t, n)
        cpu_update = cpu.step(grad)
        dev = grad.cuda()
        before = dev.clone()
        cuda_update = gpu.step(dev)
        what = f"rank {rank}, {mode}, iteration {t}"
        assert isinstance(cuda_update, torch.Tensor) and cuda_update.is_cuda, (
            f"{what}: the update of a CUDA gradient is not a CUDA tensor: "
            f"{getattr(cuda_update, 'device', type(cuda_update))}")
        assert torch.equal(dev, before), f"{what}: step changed its CUDA input"
        compare_decisions(cpu.stats, gpu.stats, what)
        compare_updates(cpu_update, cuda_update, what)
    s = gpu.stats
    assert s["iteration"] == steps - 1 and len(s["k_per_worker"]) == world
    assert 0 < s["k_total"] <= n


def resident_vs_synchronous(rank, world, options, steps, n, density):
    """Two exdyna sparsifiers on CUDA tensors over the same group, one synchronous and one with
    resident=True (the step without host round trips, from its second iteration on): the same
    update in every iteration, and the resident one's statistics those of the iteration before."""
    import exdyna
    torch.cuda.set_device(0)
    options = {"measure_global_error": False, **options}
    sync = exdyna.Sparsifier("exdyna", density, **options)
    resident = exdyna.Sparsifier("exdyna", density, resident=True, **options)
    last = None
    for t in range(steps):
        grad = heavy_gradient(rank, t, n).cuda()
        what = f"rank {rank}, resident vs synchronous, iteration {t}"
        expected = sync.step(grad.clone())
        compare_updates(expected.cpu(), resident.step(grad.clone()), what)
        if t == 0:
            compare_decisions(sync.stats, resident.stats, what)
        elif t >= 2:  # iteration 1 is the first resident one: it returns the statistics of none
            compare_decisions(last, resident.stats, what + " (its statistics, one step late)")
        last = sync.stats
    state = resident.state_dict()  # finishes the pending step: the same state as the synchronous
    assert resident.stats["iteration"] == steps - 2
    assert state == sync.state_dict(), f"rank {rank}: the resident state differs"
