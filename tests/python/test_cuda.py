"""The GPU path of the Python package: exdyna.Sparsifier and exdyna.ddp.hook on CUDA tensors.

Every test here needs a build with the GPU path (exdyna.cuda_built()) and a CUDA device; without
them each is skipped with the reason (CI has no GPU). With EXDYNA_REQUIRE_CUDA=1 in the
environment (scripts/gpu-check.sh sets it) a missing package, GPU path or device fails instead of
skipping, so a broken install cannot pass as "all skipped".

- the decisions and updates of the CUDA path equal the CPU path's on the same gradients, 4 ranks
  sharing the one GPU over Gloo, paper and exact modes, 50 iterations each;
- NCCL at world size 1: exdyna steps on a CUDA tensor (and equals a CPU twin over Gloo), in
  float32 and in 16-bit gradients; the DDP hook on CUDA buckets (float32 and 16-bit models); the
  group checkpoint (group_state_dict) over NCCL, resumed on CUDA;
- resident=True (the step without host round trips) takes the synchronous step's updates on 4
  Gloo ranks and at world size 1 over NCCL, where from its second step it makes no synchronizing
  call (torch.cuda.set_sync_debug_mode("error")), on two streams in turn, and in the DDP hook;
- the sparsifiers without a GPU path refuse a CUDA tensor with ValueError naming those with one;
- a build without the GPU path refuses a CUDA tensor (runs only on such a build with a GPU).
"""

import datetime
import os

import math

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402

REQUIRE = os.environ.get("EXDYNA_REQUIRE_CUDA") == "1"


def _unavailable(reason):
    if REQUIRE:
        pytest.fail(f"EXDYNA_REQUIRE_CUDA=1 but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


try:
    import exdyna
except ImportError as e:  # the package is not built or not on sys.path
    _unavailable(f"the exdyna package cannot be imported ({e}); build it (scripts/build.sh, "
                 f"PYTHONPATH=build/python) or pip install it")

import cuda_ranks  # noqa: E402
import ranks  # noqa: E402

HAVE_DEVICE = torch.cuda.is_available()
HAVE_GPU_PATH = bool(getattr(exdyna, "cuda_built", lambda: False)())

if REQUIRE and not HAVE_DEVICE:
    _unavailable(f"torch {torch.__version__} sees no CUDA device")
if REQUIRE and not HAVE_GPU_PATH:
    _unavailable("exdyna.cuda_built() is False: the extension was built without the GPU path")

needs_gpu = pytest.mark.skipif(
    not (HAVE_GPU_PATH and HAVE_DEVICE),
    reason="needs a CUDA device and exdyna built with the GPU path: "
           + ("no CUDA device" if not HAVE_DEVICE else "exdyna.cuda_built() is False"))

DENSITY = 0.01
PAPER = dict(controller="paper", balance="paper", worker_cap="none")


@pytest.fixture(scope="module")
def nccl_one(tmp_path_factory):
    """A world-size-1 NCCL default group in this process, and a Gloo group beside it (returned)
    for CPU twins."""
    if not dist.is_nccl_available():
        pytest.skip(f"torch {torch.__version__} has no NCCL")
    if dist.is_initialized():
        pytest.skip("a default process group already exists in this process")
    torch.cuda.set_device(0)
    store = tmp_path_factory.mktemp("nccl") / "store"
    dist.init_process_group("nccl", init_method=f"file://{store}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    try:
        yield dist.new_group(backend="gloo")
    finally:
        dist.destroy_process_group()


# --- (a) the CUDA path takes the CPU path's decisions -------------------------------------------

@needs_gpu
@pytest.mark.parametrize("mode", ["paper", "exact"])
def test_cuda_equals_cpu_on_four_gloo_ranks(tmp_path, mode):
    # n_g odd and not a multiple of the block size: the last partition has a ragged tail
    ranks.spawn(cuda_ranks.cpu_vs_cuda, 4, tmp_path, PAPER if mode == "paper" else {}, 50,
                1_500_007, DENSITY, deadline_s=150)


@needs_gpu
def test_resident_equals_synchronous_on_four_gloo_ranks(tmp_path):
    # resident=True: the step without host round trips (the exact controller under its cap)
    ranks.spawn(cuda_ranks.resident_vs_synchronous, 4, tmp_path, {}, 16, 600_011, DENSITY,
                deadline_s=150)


# --- (b) NCCL at world size 1 --------------------------------------------------------------------

@needs_gpu
def test_nccl_world_one_steps_exdyna_on_cuda(nccl_one):
    n = 1_000_003
    gpu = exdyna.Sparsifier("exdyna", DENSITY)  # the default group: NCCL
    cpu = exdyna.Sparsifier("exdyna", DENSITY, process_group=nccl_one)  # its twin over Gloo
    for t in range(5):
        grad = cuda_ranks.heavy_gradient(0, t, n)
        update = gpu.step(grad.cuda())
        assert update.is_cuda and update.shape == grad.shape and update.dtype == torch.float32
        assert bool(torch.isfinite(update).all())
        s = gpu.stats
        assert s["iteration"] == t and s["world_size"] == 1 and s["n_g"] == n
        assert s["k_per_worker"] == [s["k_total"]] and s["k_total"] > 0
        assert 0 < int((update != 0).sum()) <= s["k_unique"] <= s["k_total"]
        assert s["bytes"]["total"] > 0
        if t >= 1:  # the exact controller holds k' = k from the second iteration on
            assert abs(s["density"] - DENSITY) <= 0.02 * DENSITY, s["density"]
        # one rank: the all-reduce is the identity, so the twin matches bit for bit
        cpu_update = cpu.step(grad)
        cuda_ranks.compare_decisions(cpu.stats, s, f"NCCL vs Gloo twin, iteration {t}")
        cuda_ranks.compare_updates(cpu_update, update, f"NCCL vs Gloo twin, iteration {t}")


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_nccl_world_one_16bit_cuda_gradients_equal_the_cpu_twin(nccl_one, dtype):
    """A 16-bit gradient is widened for the step and the update rounded back, on the device as on
    the host: same decisions, and the rounded updates equal bit for bit."""
    n = 400_003
    gpu = exdyna.Sparsifier("exdyna", DENSITY)
    cpu = exdyna.Sparsifier("exdyna", DENSITY, process_group=nccl_one)
    for t in range(5):
        grad = cuda_ranks.heavy_gradient(0, t, n).to(dtype)
        update = gpu.step(grad.cuda())
        assert update.is_cuda and update.dtype == dtype and update.shape == grad.shape
        cpu_update = cpu.step(grad)
        assert gpu.stats["k_total"] > 0
        cuda_ranks.compare_decisions(cpu.stats, gpu.stats, f"{dtype}, iteration {t}")
        cuda_ranks.compare_updates(cpu_update, update, f"{dtype}, iteration {t}")


@needs_gpu
def test_density_warm_up_on_cuda_equals_the_cpu_twin(nccl_one):
    """The warm-up's phases (dense first, then three densities, then d) on the device as on the
    host: same decisions and updates at every step, through a phase change into exdyna."""
    n, opts = 400_003, {"warmup_steps": 8, "warmup_start": 1.0}
    gpu = exdyna.Sparsifier("exdyna", DENSITY, **opts)
    cpu = exdyna.Sparsifier("exdyna", DENSITY, process_group=nccl_one, **opts)
    for t in range(10):
        grad = cuda_ranks.heavy_gradient(0, t, n)
        update = gpu.step(grad.cuda())
        cpu_update = cpu.step(grad)
        assert gpu.stats["target_density"] == cpu.stats["target_density"]
        cuda_ranks.compare_decisions(cpu.stats, gpu.stats, f"warm-up, iteration {t}")
        cuda_ranks.compare_updates(cpu_update, update, f"warm-up, iteration {t}")
    assert gpu.stats["target_density"] == DENSITY
    with pytest.raises(ValueError, match="momentum_correction and local_clip run on CPU"):
        exdyna.Sparsifier("exdyna", DENSITY, momentum_correction=0.9).step(
            torch.ones(10_000, device="cuda"))


@needs_gpu
def test_step_clip_on_cuda_equals_the_cpu_twin(nccl_one):
    """step_clip on the device as on the host: the same support, the update's norm at the clip,
    the same scale (the squares are summed in another order there: equal to rounding), and the
    clipped part dropped from the residual on both."""
    n, clip = 400_003, 0.5
    gpu = exdyna.Sparsifier("exdyna", DENSITY, step_clip=clip)
    cpu = exdyna.Sparsifier("exdyna", DENSITY, process_group=nccl_one, step_clip=clip)
    clipped = 0
    for t in range(5):
        grad = cuda_ranks.heavy_gradient(0, t, n)
        update, cpu_update = gpu.step(grad.cuda()), cpu.step(grad)
        assert gpu.stats["step_scale"] == pytest.approx(cpu.stats["step_scale"], rel=1e-6)
        clipped += cpu.stats["step_scale"] < 1
        cuda_ranks.compare_decisions(cpu.stats, gpu.stats, f"step_clip, iteration {t}")
        got = update.cpu()
        assert torch.equal(got != 0, cpu_update != 0), f"step_clip, iteration {t}: support"
        torch.testing.assert_close(got, cpu_update, rtol=1e-6, atol=0)
        assert float(got.norm()) <= clip * (1 + 1e-5)
        torch.testing.assert_close(gpu.residual().cpu(), cpu.residual(), rtol=0, atol=0)
    assert clipped > 0, "the heavy gradient's updates should exceed the clip"


@needs_gpu
def test_a_skipped_overflow_on_cuda_equals_the_cpu_twin(nccl_one):
    """non_finite="skip" on the device as on the host: the overflowing step is NaN on both and
    nothing changes, and the steps around it take the same decisions."""
    n = 400_003
    gpu = exdyna.Sparsifier("exdyna", DENSITY, non_finite="skip")
    cpu = exdyna.Sparsifier("exdyna", DENSITY, process_group=nccl_one, non_finite="skip")
    for t in range(5):
        grad = cuda_ranks.heavy_gradient(0, t, n)
        if t == 2:
            grad[n // 3] = float("inf")
        update, cpu_update = gpu.step(grad.cuda()), cpu.step(grad)
        if t == 2:
            assert bool(torch.isnan(update).all()) and bool(torch.isnan(cpu_update).all())
            assert gpu.stats["non_finite"] == 1 == cpu.stats["non_finite"]
            assert gpu.iteration == cpu.iteration == 2
            torch.testing.assert_close(gpu.residual(), cpu.residual())
            continue
        cuda_ranks.compare_decisions(cpu.stats, gpu.stats, f"skip, iteration {t}")
        cuda_ranks.compare_updates(cpu_update, update, f"skip, iteration {t}")


@needs_gpu
def test_fp16_amp_with_grad_scaler_reaches_the_allreduce_loss(nccl_one):
    """200 steps of fp16 autocast with torch.cuda.amp.GradScaler from a scale that overflows at
    first: DDP's all-reduce and the exdyna hook (d = 0.1) skip the same overflowing steps; the
    hook's loss is in the all-reduce's band and in its own float32 one."""
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    losses, skipped = {}, {}
    for name, amp in (("allreduce", True), ("exdyna", True), ("exdyna-fp32", False)):
        torch.manual_seed(0)
        model = DDP(_cuda_mlp(), device_ids=[0])
        if name.startswith("exdyna"):
            state = exdyna.ddp.State(density=0.1)
            model.register_comm_hook(state, exdyna.ddp.hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        scaler = torch.cuda.amp.GradScaler(init_scale=2.0 ** 30, enabled=amp)
        g = torch.Generator(device="cuda").manual_seed(3)
        w = torch.randn(256, 10, device="cuda", generator=g)
        tail, scales = [], []
        for t in range(200):
            x = torch.randn(64, 256, device="cuda", generator=g)
            y = (x @ w).argmax(1)
            opt.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
                loss = nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scales.append(scaler.get_scale())
            scaler.update()
            if t >= 180:
                tail.append(float(loss.detach()))
        skipped[name] = sum(1 for a, b in zip(scales, scales[1:]) if b < a)
        losses[name] = sum(tail) / len(tail)
        if name == "exdyna":
            assert state.non_finite_steps >= 1 and state.k_total > 0
    assert skipped["allreduce"] >= 1 and skipped["exdyna"] == skipped["allreduce"], skipped
    assert math.isfinite(losses["exdyna"]), losses
    assert losses["exdyna"] <= 1.5 * losses["allreduce"] + 0.05, losses
    assert losses["exdyna"] <= 1.1 * losses["exdyna-fp32"] + 0.02, losses


@needs_gpu
def test_nccl_world_one_dense_on_cuda(nccl_one):
    sp = exdyna.Sparsifier("dense", 1.0)
    grad = cuda_ranks.heavy_gradient(0, 0, 100_003).cuda()
    update = sp.step(grad)
    assert update.is_cuda and torch.equal(update, grad)  # one rank: the average is the gradient


@needs_gpu
def test_ddp_hook_on_cuda_buckets(nccl_one):
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 2000), nn.ReLU(), nn.Linear(2000, 500), nn.ReLU(),
                        nn.Linear(500, 10)).cuda()
    model = DDP(net, device_ids=[0], bucket_cap_mb=1)  # ~4.5 MB of gradients: several buckets
    state = exdyna.ddp.State(density=0.05)
    model.register_comm_hook(state, exdyna.ddp.hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator(device="cuda").manual_seed(3)
    for t in range(4):  # DDP rebuilds its buckets after the first iteration
        x = torch.randn(32, 64, device="cuda", generator=g)
        y = torch.randint(0, 10, (32,), device="cuda", generator=g)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        for i, p in enumerate(model.parameters()):
            assert p.grad.is_cuda and bool(torch.isfinite(p.grad).all()), f"grad {i}, step {t}"
        opt.step()
    grads = torch.cat([p.grad.flatten() for p in model.parameters()])
    n = grads.numel()
    assert 0 < int((grads != 0).sum()) <= 0.05 * 1.1 * n
    assert len(state.buckets()) >= 2 and state.steps >= 4
    assert 0 < state.actual_density() <= 0.05 * 1.1, state.actual_density()
    assert sum(int(k.split(":")[1]) for k in state.buckets()) == n
    for s in state.stats.values():
        assert s["world_size"] == 1 and s["k_total"] > 0


@needs_gpu
def test_resident_step_at_world_one_makes_no_synchronizing_call(nccl_one):
    """resident=True at world size 1 over NCCL (a slot of k, the plan uncapped): the same updates
    as the synchronous step, and from its second iteration on no call that synchronizes with the
    device, which torch.cuda.set_sync_debug_mode("error") turns into an error (the host's wait is
    on the previous step's event, which the device has passed)."""
    n = 1_000_003
    sync = exdyna.Sparsifier("exdyna", DENSITY, measure_global_error=False)
    resident = exdyna.Sparsifier("exdyna", DENSITY, measure_global_error=False, resident=True)
    grads = [cuda_ranks.heavy_gradient(0, t, n).cuda() for t in range(8)]
    inputs = [g.clone() for g in grads]
    torch.cuda.synchronize()
    for t, grad in enumerate(grads):
        expected = sync.step(grad)
        if t >= 2:
            torch.cuda.set_sync_debug_mode("error")
        try:
            update = resident.step(inputs[t], in_place=True)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        cuda_ranks.compare_updates(expected.cpu(), update, f"resident at world size 1, step {t}")


@needs_gpu
def test_resident_step_on_alternating_streams_equals_synchronous(nccl_one):
    """resident=True stepped on two streams in turn (as a caller switching streams between steps):
    each step orders itself after the last one's update, so the updates stay the synchronous
    step's."""
    n = 1_000_003
    sync = exdyna.Sparsifier("exdyna", DENSITY, measure_global_error=False)
    resident = exdyna.Sparsifier("exdyna", DENSITY, measure_global_error=False, resident=True)
    main, side = torch.cuda.current_stream(), torch.cuda.Stream()
    for t in range(8):
        grad = cuda_ranks.heavy_gradient(0, t, n).cuda()
        expected = sync.step(grad.clone())
        mine = grad.clone()
        stream = side if t % 2 else main
        stream.wait_stream(main)  # the gradient was made on main
        with torch.cuda.stream(stream):
            update = resident.step(mine, in_place=True)
        main.wait_stream(stream)
        cuda_ranks.compare_updates(expected.cpu(), update, f"resident on two streams, step {t}")


@needs_gpu
def test_ddp_hook_resident_equals_the_synchronous_hook(nccl_one):
    import exdyna.ddp
    resident = exdyna.ddp.State(density=0.02, controller="exact", resident=True)
    mine, _ = _train_cuda_ddp(False, steps=8, state=resident)
    sync, _ = _train_cuda_ddp(False, steps=8)
    for i, (p, q) in enumerate(zip(mine, sync)):
        assert torch.equal(p, q), f"parameter {i} differs between the resident and the sync hook"


def _cuda_mlp(dtype=torch.float32):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 4000), nn.ReLU(), nn.Linear(4000, 1000), nn.ReLU(),
                         nn.Linear(1000, 10)).to(device="cuda", dtype=dtype)


def _train_cuda_ddp(overlap, steps=6, dtype=torch.float32, net=None, state=None, seed=5):
    """Trains net (default: a fresh _cuda_mlp) under DDP with the exdyna hook (state, default: a
    new State at d = 0.02) for `steps` steps; returns the parameters and the state."""
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    net = _cuda_mlp(dtype) if net is None else net
    model = DDP(net, device_ids=[0], bucket_cap_mb=2)
    if state is None:
        state = exdyna.ddp.State(density=0.02, overlap=overlap, controller="exact")
    model.register_comm_hook(state, exdyna.ddp.hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator(device="cuda").manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(512, 256, device="cuda", generator=g).to(dtype)
        y = torch.randint(0, 10, (512,), device="cuda", generator=g)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x).float(), y).backward()
        for i, p in enumerate(model.parameters()):
            assert p.grad.dtype == dtype and bool(torch.isfinite(p.grad).all()), f"grad {i}"
        opt.step()
    torch.cuda.synchronize()
    return [p.detach().clone() for p in model.parameters()], state


@needs_gpu
def test_ddp_hook_on_its_own_stream_equals_the_synchronous_hook(nccl_one):
    """Overlapped, the steps run on the State's stream while backward runs on the caller's: a
    missing wait either way (the bucket read before backward wrote it, the update used before the
    step wrote it) changes the parameters."""
    mine, state = _train_cuda_ddp(True)
    sync, sync_state = _train_cuda_ddp(False)
    assert list(state._streams) == [0] and not sync_state._streams
    assert state.steps == sync_state.steps >= 6
    for i, (p, q) in enumerate(zip(mine, sync)):
        assert torch.equal(p, q), f"parameter {i} differs between the overlapped and the sync hook"


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_ddp_hook_on_16bit_cuda_buckets(nccl_one, dtype):
    """A 16-bit model's buckets: sparse steps at the target density, the overlapped hook's
    parameters equal the synchronous hook's bit for bit."""
    mine, state = _train_cuda_ddp(True, steps=5, dtype=dtype)
    sync, sync_state = _train_cuda_ddp(False, steps=5, dtype=dtype)
    assert state.steps == sync_state.steps >= 5 and state.dense_steps == 0
    assert 0 < state.actual_density() <= 0.02 * 1.1, state.actual_density()
    for i, (p, q) in enumerate(zip(mine, sync)):
        assert p.dtype == dtype and torch.equal(p, q), f"parameter {i} differs ({dtype})"


@needs_gpu
def test_group_state_dict_over_nccl_resumes_on_cuda(nccl_one, tmp_path):
    """group_state_dict() all-reduces the residuals over NCCL (CUDA buffers); at world size 1
    the mean is the residual itself. Saved and loaded (torch.load's default weights_only), it
    resumes a fresh State on CUDA, which claims every saved bucket."""
    import exdyna.ddp
    params, state = _train_cuda_ddp(True, steps=4)
    group = state.group_state_dict()
    assert group["world_size"] == 1 and set(group["buckets"]) == set(state.buckets())
    for key, b in group["buckets"].items():
        sp = state._bucket_sparsifier(key)
        assert torch.equal(b["mean_residual"], sp.residual()), f"bucket {key}: mean residual"
        assert b["threshold"] == sp.stats["threshold"] > 0, f"bucket {key}: threshold"
    torch.save(group, tmp_path / "group.pt")
    resumed = exdyna.ddp.State(density=0.02, controller="exact")
    resumed.load_state_dict(torch.load(tmp_path / "group.pt"))
    assert resumed.iter == state.iter and resumed.steps == state.steps
    net = _cuda_mlp()
    with torch.no_grad():
        for p, q in zip(net.parameters(), params):
            p.copy_(q)
    _, resumed = _train_cuda_ddp(True, steps=3, net=net, state=resumed, seed=6)
    assert set(resumed.buckets()) == set(group["buckets"])
    assert 0 < resumed.actual_density() <= 0.02 * 1.1, resumed.actual_density()


@needs_gpu
def test_host_built_state_moves_to_the_device(nccl_one):
    """A sparsifier given its residual (set_residual) or a checkpoint (load_state_dict) before its
    first step holds them on the host and moves them to the device at its first CUDA step: it
    then steps as its CPU twin given the same, and as the sparsifier it was saved from."""
    n = 300_007
    src = exdyna.Sparsifier("exdyna", DENSITY)
    for t in range(3):
        src.step(cuda_ranks.heavy_gradient(0, t, n).cuda())
    saved = src.state_dict()
    residual = src.residual()
    assert residual is not None and not residual.is_cuda and bool(residual.abs().sum() > 0)
    from_state = exdyna.Sparsifier("exdyna", DENSITY)
    from_state.load_state_dict(saved)
    cpu_twin = exdyna.Sparsifier("exdyna", DENSITY, process_group=nccl_one)
    cpu_twin.load_state_dict(saved)
    from_residual = exdyna.Sparsifier("exdyna", DENSITY)
    from_residual.set_residual(residual)
    cpu_residual = exdyna.Sparsifier("exdyna", DENSITY, process_group=nccl_one)
    cpu_residual.set_residual(residual)
    for t in range(3, 6):
        grad = cuda_ranks.heavy_gradient(0, t, n)
        want = src.step(grad.cuda())
        for name, sp, g in (("load_state_dict", from_state, grad.cuda()),
                            ("load_state_dict, CPU twin", cpu_twin, grad)):
            got = sp.step(g)
            cuda_ranks.compare_decisions(src.stats, sp.stats, f"{name}, iteration {t}")
            cuda_ranks.compare_updates(want.cpu(), got, f"{name}, iteration {t}")
        got = from_residual.step(grad.cuda())
        twin = cpu_residual.step(grad)
        what = f"set_residual vs its CPU twin, iteration {t}"
        cuda_ranks.compare_decisions(cpu_residual.stats, from_residual.stats, what)
        cuda_ranks.compare_updates(twin, got, what)
    # once it stepped on the host, a sparsifier refuses CUDA tensors (until a state is loaded)
    with pytest.raises(ValueError, match="steps on CPU tensors"):
        cpu_twin.step(cuda_ranks.heavy_gradient(0, 6, n).cuda())
    cpu_twin.load_state_dict(src.state_dict())
    cuda_ranks.compare_updates(src.step(cuda_ranks.heavy_gradient(0, 6, n).cuda()).cpu(),
                               cpu_twin.step(cuda_ranks.heavy_gradient(0, 6, n).cuda()),
                               "a CPU sparsifier given a state, then a CUDA step")


# --- (c) no GPU path: a clear refusal ------------------------------------------------------------

def _without_gpu_path():
    """(name, options) that have no GPU path: every sparsifier but exdyna and dense, and exdyna
    with a controller or value format the device does not run."""
    try:
        names = exdyna.sparsifier_names()
    except Exception:  # pragma: no cover - the module imported, so this should not happen
        names = ["topk"]
    cases = [(n, {}) for n in names if n not in ("exdyna", "dense")]
    return cases + [("exdyna", dict(controller="histogram")), ("exdyna", dict(values="bf16")),
                    ("dense", dict(values="fp16"))]


@needs_gpu
@pytest.mark.parametrize("name, options", _without_gpu_path(),
                         ids=lambda v: v if isinstance(v, str) else
                         ",".join(f"{k}={x}" for k, x in v.items()) or "defaults")
def test_sparsifiers_without_gpu_path_refuse_cuda(nccl_one, name, options):
    sp = exdyna.Sparsifier(name, DENSITY, **options)
    with pytest.raises(ValueError) as e:
        sp.step(torch.ones(10_000, device="cuda"))
    msg = str(e.value)
    # it names the refused sparsifier and the ones that run on CUDA tensors
    assert name in msg and "exdyna" in msg and "dense" in msg, msg


# --- (d) a build without the GPU path ------------------------------------------------------------

@pytest.mark.skipif(not HAVE_DEVICE or HAVE_GPU_PATH,
                    reason="runs only on a build without the GPU path, on a machine with a GPU")
def test_build_without_gpu_path_refuses_cuda(tmp_path):
    if dist.is_initialized():
        group = dist.new_group(backend="gloo")
        own = False
    else:
        dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0,
                                world_size=1)
        group, own = None, True
    try:
        sp = exdyna.Sparsifier("exdyna", DENSITY, process_group=group)
        with pytest.raises((TypeError, ValueError)) as e:
            sp.step(torch.ones(10_000, device="cuda"))
        assert any(w in str(e.value).lower() for w in ("cuda", "cpu", "device")), str(e.value)
    finally:
        if own:
            dist.destroy_process_group()
