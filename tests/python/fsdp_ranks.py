"""Rank bodies of test_fsdp.py (exdyna.fsdp on HSDP with FSDP2), spawned with ranks.spawn: 4 ranks
are a 2 x 2 mesh ("replicate", "shard"), rank r replica r // 2 and shard r % 2. The model is
examples/hsdp_exdyna.py's TinyLm, the data its Markov chain's sequences."""

import json
import math
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
import hsdp_exdyna as example  # noqa: E402

R = 2  # replicas
SMALL = dict(vocab=32, width=32, layers=1, seq=16)


def mesh_2d(world, replicas=R):
    from torch.distributed.device_mesh import init_device_mesh
    return init_device_mesh("cpu", (replicas, world // replicas),
                            mesh_dim_names=("replicate", "shard"))


def model_on(mesh, mode, sizes=SMALL, **state_options):
    """TinyLm sharded on mesh["shard"] with a ReplicaState (mode "exdyna"), or on the 2-D mesh
    (mode "native": FSDP2's own HSDP). The same seed everywhere: FSDP2 does not broadcast."""
    from torch.distributed.fsdp import fully_shard

    import exdyna.fsdp
    torch.manual_seed(0)
    model = example.TinyLm(sizes["vocab"], sizes["width"], sizes["layers"], sizes["seq"])
    on = mesh if mode == "native" else mesh["shard"]
    for block in model.blocks:
        fully_shard(block, mesh=on)
    fully_shard(model, mesh=on)
    if mode == "native":
        return model, None
    state = exdyna.fsdp.ReplicaState(**state_options)
    exdyna.fsdp.register(model, state, mesh=mesh)
    return model, state


def train(model, opt, rank, first, last, sizes=SMALL):
    chain = example.markov_chain(sizes["vocab"], 0)
    for step in range(first, last):
        x, y = example.sequences(chain, 4, sizes["seq"], 1000 * (rank + 1) + step)
        opt.zero_grad()
        example.lm_loss(model, x, y).backward()
        opt.step()


def local_shards(model):
    return [p.detach().to_local().clone() for p in model.parameters()]


def write(out_path, rank, numbers):
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(numbers, f)


def replica_identical(rank, world, steps, out_path):
    """Ranks of a replica group (same shard index) end with bit-identical shards; the shard
    groups' halves differ (so the check compares something)."""
    mesh = mesh_2d(world)
    model, state = model_on(mesh, "exdyna", density=0.05)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, opt, rank, 0, steps)
    rep = mesh.get_group("replicate")
    for i, p in enumerate(local_shards(model)):
        copies = [torch.empty_like(p) for _ in range(R)]
        dist.all_gather(copies, p, group=rep)
        assert all(torch.equal(c, copies[0]) for c in copies), f"parameter {i} differs"
    modes = {s["mode"] for s in state.stats.values()}
    assert "sparse" in modes, state.stats
    assert state.iter == steps and 0 < state.actual_density() <= 0.05 * 1.02
    write(out_path, rank, {"units": state.units(), "modes": sorted(modes),
                           "density": state.actual_density()})


def dense_equals_native(rank, world, steps, out_path):
    """sparsifier="dense" and the start_iter warm-up give native HSDP's parameters."""
    mesh = mesh_2d(world)
    runs = {}
    for name, mode, options in (("native", "native", {}),
                                ("dense", "exdyna", {"sparsifier": "dense", "density": 1.0}),
                                ("start_iter", "exdyna", {"start_iter": steps})):
        model, state = model_on(mesh, mode, **options)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        train(model, opt, rank, 0, steps)
        runs[name] = local_shards(model)
        if name == "start_iter":
            assert state.dense_steps == state.steps > 0
    diffs = {}
    for name in ("dense", "start_iter"):
        diffs[name] = max(float((a - b).abs().max()) for a, b in zip(runs[name], runs["native"]))
        assert diffs[name] <= 1e-6, (name, diffs)
    write(out_path, rank, diffs)


def bytes_ratio(rank, world, steps, settle, out_path):
    """The bytes the sparsifiers' communicator counts across the replicas at d = 0.01, over the
    steps after `settle`, against the dense all-reduce of the same buffers and against
    exdyna.ddp.State.sparse_bytes's estimate of a settled step of each unit."""
    import exdyna.ddp
    sizes = dict(vocab=64, width=64, layers=2, seq=16)
    d = 0.01
    mesh = mesh_2d(world)
    logged = []
    model, state = model_on(mesh, "exdyna", sizes, density=d, log_every=2,
                            log=lambda it, scalars: logged.append((it, scalars)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, opt, rank, 0, settle, sizes)
    sent0, dense0 = state.bytes_total, state.dense_bytes_total
    train(model, opt, rank, settle, steps, sizes)
    sent, dense = state.bytes_total - sent0, state.dense_bytes_total - dense0
    assert state.dense_steps == 0, state.stats
    lengths = [int(k.rsplit(":", 1)[1]) for k in state.units()]
    estimator = exdyna.ddp.State(density=d, process_group=mesh.get_group("replicate"))
    estimate = (steps - settle) * sum(estimator.sparse_bytes(n, R) for n in lengths)
    assert dense == (steps - settle) * 4 * sum(lengths), (dense, lengths)
    # sparse_bytes is a settled, balanced step's count; on these small units ExDyna's padded
    # all-gathers of unbalanced steps and fuse="auto"'s choice (from measured times) add some:
    # measured 1.18-1.22 of the estimate on torch 2.15
    assert 0.75 <= sent / estimate <= 1.4, (sent, estimate)
    # log: once per 2 iterations, after the iteration's last unit, the bytes of those iterations
    assert [it for it, _ in logged] == list(range(2, steps + 1, 2)), logged
    assert sum(s["bytes"] for _, s in logged) == state.bytes_total, logged
    assert all(0 < s["density"] <= 1 and s["compression"] > 1 for _, s in logged[1:]), logged
    numbers = {"sent": sent, "dense": dense, "estimate": estimate, "ratio": dense / sent,
               "expected_ratio": dense / estimate, "lengths": lengths,
               "density": state.actual_density()}
    write(out_path, rank, numbers)


def _checkpointed(model, opt, state):
    from torch.distributed.checkpoint.state_dict import get_state_dict
    model_sd, optim_sd = get_state_dict(model, opt)
    return {"model": model_sd, "optim": optim_sd, "exdyna": state.dcp_state_dict()}


def _restored(model, opt, state, ckpt_dir):
    """Model, optimizer and ReplicaState loaded from a torch.distributed.checkpoint."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict
    loaded = _checkpointed(model, opt, state)
    dcp.load(loaded, checkpoint_id=ckpt_dir)
    set_state_dict(model, opt, model_state_dict=loaded["model"],
                   optim_state_dict=loaded["optim"])
    state.load_dcp_state_dict(loaded["exdyna"])


def dcp_round_trip(rank, world, ckpt_dir):
    """Model, optimizer and ReplicaState through torch.distributed.checkpoint: the steps after
    loading equal the steps without the round trip, bit for bit."""
    import torch.distributed.checkpoint as dcp
    mesh = mesh_2d(world)
    model, state = model_on(mesh, "exdyna", density=0.05)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    train(model, opt, rank, 0, 3)
    dcp.save(_checkpointed(model, opt, state), checkpoint_id=ckpt_dir)
    train(model, opt, rank, 3, 5)
    expect = local_shards(model)

    model2, state2 = model_on(mesh, "exdyna", density=0.05)
    with torch.no_grad():  # moved away from the saved point: the load must bring it back
        for p in model2.parameters():
            p.add_(1.0)
    opt2 = torch.optim.AdamW(model2.parameters(), lr=3e-3)
    _restored(model2, opt2, state2, ckpt_dir)
    assert state2.iter == 3 and state2.steps == state.steps - 2 * len(state.units())
    train(model2, opt2, rank, 3, 5)
    for i, (p, q) in enumerate(zip(local_shards(model2), expect)):
        assert torch.equal(p, q), f"parameter {i} differs after the round trip"
    # the same decisions (not the same bytes: fuse="auto" picks one all-gather or two from
    # measured times, a path and not a decision)
    assert (state2.steps, state2.k_total, state2.iter) == (state.steps, state.k_total, state.iter)


def loss_band(rank, world, steps, out_path):
    """The example's 2 x 2 run with exdyna at d = 0.01 and with native HSDP, at equal steps
    (the example's defaults: AdamW lr 3e-3, the density warm-up over 10 % of the steps)."""
    out = {}
    for flags in (["--dense"], ["--density", "0.01"]):
        args = example.parse_args(["--steps", str(steps), "--print-every", str(10 ** 6)] + flags)
        out["dense" if flags == ["--dense"] else "exdyna"] = example.train(args, rank, world)
    write(out_path, rank, {k: {"held_out": v["held_out_loss"],
                               "last10": sum(v["losses"][-10:]) / 10,
                               "first": v["losses"][0]} for k, v in out.items()}
          | {"ln_v": math.log(64)})


def bad_input(rank, world):
    """Clear errors for what register() and ReplicaState cannot take."""
    import torch.nn as nn
    from torch.distributed.device_mesh import init_device_mesh

    import exdyna.fsdp

    def raises(kind, words, fn, *args, **kwargs):
        try:
            fn(*args, **kwargs)
        except kind as e:
            assert all(w in str(e) for w in words), (words, str(e))
        else:
            raise AssertionError(f"{fn.__name__}{args} did not raise {kind.__name__}")

    mesh = init_device_mesh("cpu", (1, world), mesh_dim_names=("replicate", "shard"))
    state = exdyna.fsdp.ReplicaState(density=0.01)
    raises(ValueError, ["Linear", "no FSDPModule", "fully_shard"], exdyna.fsdp.register,
           nn.Linear(4, 4), state, mesh=mesh)
    flat = init_device_mesh("cpu", (world,), mesh_dim_names=("shard",))
    model, _ = model_on(mesh, "native")  # sharded on the 2-D mesh: native HSDP
    raises(ValueError, ["('shard',)", "'replicate'"], exdyna.fsdp.register, model, state,
           mesh=flat)
    raises(ValueError, ["2-D mesh", "mesh['shard']"], exdyna.fsdp.register, model, state,
           mesh=mesh)
    raises(ValueError, ["no replicate group"], exdyna.fsdp.register, model,
           exdyna.fsdp.ReplicaState(density=0.01))
    raises(TypeError, ["dict", "ReplicaState"], exdyna.fsdp.register, model, {})
    raises(ValueError, ["density 2 is not valid"], exdyna.fsdp.ReplicaState, density=2.0)
    raises(ValueError, ["no_such_option"], exdyna.fsdp.ReplicaState, no_such_option=1)
    raises(TypeError, ["log 3 is not callable"], exdyna.fsdp.ReplicaState, log=3)
    raises(ValueError, ["log_every 0 is not valid"], exdyna.fsdp.ReplicaState, log_every=0)
    raises(TypeError, ["torch.int32", "float32"], state.reduce, "x",
           torch.zeros(8, dtype=torch.int32))
    raises(ValueError, ["not an exdyna.fsdp.ReplicaState"], state.load_state_dict, {})
    other = exdyna.fsdp.ReplicaState(density=0.02).state_dict()
    raises(ValueError, ["density 0.02"], state.load_state_dict, other)
    raises(ValueError, [f"'shard{rank}'"], state.load_dcp_state_dict, {"shard99": b""})


# --- resuming at another replica count ------------------------------------------------------------

def replicas_save(rank, world, ckpt_dir, residuals_path):
    """2 x 2: 4 steps at d = 0.05, then model, optimizer and ReplicaState through dcp.save; each
    rank writes its units' residuals and thresholds beside, for replicas_resume's check."""
    import torch.distributed.checkpoint as dcp
    mesh = mesh_2d(world)
    model, state = model_on(mesh, "exdyna", density=0.05)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    train(model, opt, rank, 0, 4)
    assert state.units(), state.stats
    dcp.save(_checkpointed(model, opt, state), checkpoint_id=ckpt_dir)
    torch.save({"residuals": {key: state.residual(key) for key in state.units()},
                "thresholds": {key: state.stats[key]["threshold"] for key in state.units()},
                "iter": state.iter}, f"{residuals_path}.{rank}")


def replicas_resume(rank, world, ckpt_dir, residuals_path, saved_world):
    """Resumes replicas_save's checkpoint on a (world / S) x S mesh, S = 2 as saved: every unit
    of this rank's shard starts from the mean of the saved replicas' residuals of that shard and
    from replica 0's threshold, and the training goes on, the replicas equal."""
    shards = 2
    mesh = mesh_2d(world, world // shards)
    model, state = model_on(mesh, "exdyna", density=0.05)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    _restored(model, opt, state, ckpt_dir)
    shard = rank % shards
    saved = [torch.load(f"{residuals_path}.{r}") for r in range(shard, saved_world, shards)]
    assert state.iter == saved[0]["iter"]
    for key, first in saved[0]["residuals"].items():
        expect = torch.stack([s["residuals"][key] for s in saved]).double().mean(0)
        got = state.residual(key)
        assert expect.abs().sum() > 0 and got.shape == expect.shape, key
        assert torch.allclose(got.double(), expect, rtol=0, atol=1e-6 * float(expect.abs().max()))
    train(model, opt, rank, 4, 5)
    thresholds = saved[0]["thresholds"]
    for key, stats in state.stats.items():
        if stats["mode"] != "sparse":  # a unit too small to sparsify: no threshold
            continue
        # ExDyna started from the saved threshold, not a fresh start's 1 / (2 sqrt(k)) (the
        # exact controller then moves it by its counts)
        assert state._unit_options[key] == {"initial_threshold": thresholds[key]}, key
        assert stats["world_size"] == world // shards and stats["iteration"] == 0, stats
    train(model, opt, rank, 5, 7)
    rep = mesh.get_group("replicate")
    for i, p in enumerate(local_shards(model)):
        assert torch.isfinite(p).all()
        copies = [torch.empty_like(p) for _ in range(world // shards)]
        dist.all_gather(copies, p, group=rep)
        assert all(torch.equal(c, copies[0]) for c in copies), f"parameter {i} differs"


def replicas_refuse_shards(rank, world, ckpt_dir):
    """A checkpoint of 2 shards per replica on a mesh of 1: refused by name."""
    import torch.distributed.checkpoint as dcp
    mesh = mesh_2d(world, world)
    _, state = model_on(mesh, "exdyna", density=0.05)
    loaded = {"exdyna": state.dcp_state_dict()}
    dcp.load(loaded, checkpoint_id=ckpt_dir)
    try:
        state.load_dcp_state_dict(loaded["exdyna"])
    except ValueError as e:
        assert "saved at 2 shards per replica, this mesh has 1" in str(e), str(e)
        assert "not another shard count" in str(e), str(e)
    else:
        raise AssertionError("a checkpoint of another shard count was loaded")
