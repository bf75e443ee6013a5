"""fp16 AMP through the exdyna hook: an overflowing step (GradScaler's first scales overflow by
design) reaches every rank as a non-finite update, so every rank skips it, with the hook's state
untouched; non_finite="raise" keeps the refusal. Rank bodies: amp_ranks.py."""

import math

import pytest
import torch

import amp_ranks
import exdyna
import ranks


@pytest.mark.parametrize("hook,overlap", [("allreduce", True), ("exdyna", True),
                                          ("exdyna", False)])
def test_an_overflow_on_one_rank_is_skipped_on_every_rank(tmp_path, hook, overlap):
    ranks.spawn(amp_ranks.overflow_probe, 2, tmp_path, hook, overlap, deadline_s=120)


def test_the_skipped_step_keeps_the_residual(tmp_path):
    ranks.spawn(amp_ranks.skipped_step_keeps_residual, 2, tmp_path, deadline_s=120)


@pytest.mark.parametrize("overlap", [True, False])
def test_raise_mode_refuses_with_the_steps_own_message(tmp_path, overlap):
    ranks.spawn(amp_ranks.raise_mode, 2, tmp_path, overlap, deadline_s=60)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_skip_mode_returns_nan_in_the_gradients_dtype(one_rank, dtype):
    sp = exdyna.Sparsifier("exdyna", 0.01, non_finite="skip")
    g = torch.randn(5000).to(dtype)
    sp.step(g)
    residual = sp.residual()
    g[17] = math.inf
    out = sp.step(g)
    assert out.dtype == dtype and bool(torch.isnan(out).all())
    assert sp.stats["non_finite"] == 1 and sp.iteration == 1
    torch.testing.assert_close(sp.residual(), residual)


def test_the_state_passes_overflows_by_default_and_the_option_is_checked(one_rank):
    import exdyna.ddp
    assert exdyna.ddp.State(density=0.01).options["non_finite"] == "skip"
    assert exdyna.ddp.State(density=0.01, non_finite="raise").options["non_finite"] == "raise"
    with pytest.raises(ValueError, match="non_finite 'ignore' is not valid; expected"):
        exdyna.ddp.State(density=0.01, non_finite="ignore")


@pytest.mark.skipif(not hasattr(torch, "amp") or not hasattr(torch.amp, "GradScaler"),
                    reason=f"torch {torch.__version__} has no CPU GradScaler (2.3 and later; "
                    "scripts/torch2-venv.sh runs this)")
def test_fp16_autocast_with_grad_scaler_reaches_the_allreduce_loss_band(tmp_path):
    """200 steps at d = 0.1 from a scale of 2^40 (23 overflowing steps): DDP's all-reduce and the
    hook skip as many; the hook's loss with AMP is in the all-reduce's band (measured 0.425
    against 0.348) and in its own float32 one (the overflows cost nothing)."""
    import json
    result = {}
    for hook, amp in (("allreduce", True), ("exdyna", True), ("exdyna", False)):
        name = f"{hook}-{'amp' if amp else 'fp32'}"
        out = tmp_path / f"{name}.json"
        ranks.spawn(amp_ranks.grad_scaler_run, 2, tmp_path / name, hook, 200, str(out), amp,
                    deadline_s=300)
        result[name] = json.loads(out.read_text())
    assert result["allreduce-amp"]["skipped"] >= 10, result
    assert result["exdyna-amp"]["skipped"] == result["allreduce-amp"]["skipped"], result
    assert math.isfinite(result["exdyna-amp"]["loss"]), result
    assert result["exdyna-amp"]["loss"] <= 1.5 * result["allreduce-amp"]["loss"] + 0.05, result
    assert result["exdyna-amp"]["loss"] <= 1.1 * result["exdyna-fp32"]["loss"] + 0.02, result
