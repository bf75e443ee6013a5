"""The convergence options through Python: momentum correction's pairing with the optimizer, its
velocity through state dicts (one rank) and through a change of world size (Gloo ranks)."""

import warnings

import pytest
import torch

import exdyna
import exdyna.ddp
import ranks


def test_an_optimizer_that_applies_momentum_again_is_refused_by_name(one_rank):
    p = [torch.nn.Parameter(torch.zeros(3))]
    with pytest.raises(ValueError, match=r"momentum_correction=0.9 .* SGD applies momentum 0.9 "
                                         r"again \(param group 0\)"):
        exdyna.ddp.State(momentum_correction=0.9, optimizer=torch.optim.SGD(p, lr=1, momentum=0.9))
    with pytest.warns(UserWarning, match="optimizer must apply none"):
        exdyna.ddp.State(momentum_correction=0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exdyna.ddp.State(momentum_correction=0.9, optimizer=torch.optim.SGD(p, lr=1))
        exdyna.ddp.State(optimizer=torch.optim.SGD(p, lr=1, momentum=0.9))  # no correction: fine


def test_velocity_and_warm_up_phase_resume_bit_for_bit(one_rank):
    opts = {"momentum_correction": 0.9, "warmup_steps": 4, "warmup_start": 0.5}
    grads = [torch.randn(5000, generator=torch.Generator().manual_seed(t)) for t in range(6)]
    sp = exdyna.Sparsifier("exdyna", 0.01, **opts)
    for g in grads[:3]:
        sp.step(g)
    saved = sp.state_dict()
    velocity = sp.velocity()
    assert velocity is not None and velocity.abs().sum() > 0
    assert sp.stats["target_density"] == pytest.approx(0.5 * (0.01 / 0.5) ** 0.5)  # step 2: phase 2 of 4
    later = [sp.step(g) for g in grads[3:]]
    twin = exdyna.Sparsifier("exdyna", 0.01, **opts)
    twin.load_state_dict(saved)
    assert torch.equal(twin.velocity(), velocity)
    for g, want in zip(grads[3:], later):
        assert torch.equal(twin.step(g), want)
    assert torch.equal(twin.velocity(), sp.velocity())
    assert twin.stats["target_density"] == 0.01  # past the warm-up
    with pytest.raises(ValueError, match="no momentum correction"):
        exdyna.Sparsifier("exdyna", 0.01).set_velocity(velocity)


def test_velocity_resumes_at_another_world_size(tmp_path):
    path = str(tmp_path / "group.pt")
    ranks.spawn(ranks.elastic_velocity_save, 4, tmp_path / "save", path)
    ranks.spawn(ranks.elastic_velocity_resume, 2, tmp_path / "resume", path)


def test_below_the_auto_density_the_state_warms_up_by_default(one_rank):
    assert exdyna.ddp.State(density=0.001).options["warmup_steps"] == exdyna.ddp.AUTO_WARMUP_STEPS
    assert "warmup_steps" not in exdyna.ddp.State(density=0.01).options
    assert exdyna.ddp.State(density=0.001, warmup_steps=0).options["warmup_steps"] == 0


def test_below_the_auto_density_the_buckets_clip_the_step_by_default(one_rank):
    grad = torch.full((20000,), 3.0)  # every value sent at d = 0.001 (k = 20): update norm 13.4
    state = exdyna.ddp.State(density=0.001, warmup_steps=0)
    update = state._bucket_sparsifier("0:20000:20000").step(grad.clone())
    assert float(update.norm()) == pytest.approx(exdyna.ddp.AUTO_STEP_CLIP, rel=1e-5)
    assert state._bucket_sparsifier("0:20000:20000").stats["step_scale"] < 0.1
    unclipped = exdyna.ddp.State(density=0.001, warmup_steps=0, step_clip=0)
    assert float(unclipped._bucket_sparsifier("k").step(grad.clone()).norm()) > 13
    assert state._make("k")._options["step_clip"] == exdyna.ddp.AUTO_STEP_CLIP
    assert "step_clip" not in exdyna.ddp.State(density=0.01)._make("k")._options
