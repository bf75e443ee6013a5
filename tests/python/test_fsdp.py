"""exdyna.fsdp: ExDyna on the replicate dimension of HSDP with FSDP2 (2 replicas x 2 shards, Gloo).
Skipped where torch lacks FSDP2 with set_all_reduce_hook (torch < 2.7, e.g. Debian's 1.13).
Multi-rank bodies: fsdp_ranks.py. Rank 0's numbers are printed (pytest -s shows them)."""

import json
import os
import re
import subprocess
import sys

import pytest
import torch


def _has_fsdp2():
    try:
        from torch.distributed.fsdp import FSDPModule
    except Exception:  # noqa: BLE001 - Debian's 1.13 under Python 3.11 raises ValueError here
        return False
    return hasattr(FSDPModule, "set_all_reduce_hook")


needs_fsdp2 = pytest.mark.skipif(
    not _has_fsdp2(), reason=f"torch {torch.__version__} lacks FSDP2 with "
    "FSDPModule.set_all_reduce_hook (torch >= 2.7; scripts/torch2-venv.sh runs this)")

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "hsdp_exdyna.py")


def _spawn(body, tmp_path, *args, world=4, deadline_s=300):
    import ranks
    ranks.spawn(body, world, tmp_path, *args, deadline_s=deadline_s)


def _numbers(path):
    with open(path) as f:
        numbers = json.load(f)
    print(numbers)
    return numbers


@needs_fsdp2
def test_replica_groups_end_bit_identical(tmp_path):
    import fsdp_ranks
    _spawn(fsdp_ranks.replica_identical, tmp_path, 5, str(tmp_path / "out.json"))
    assert "sparse" in _numbers(tmp_path / "out.json")["modes"]


@needs_fsdp2
def test_dense_reduction_equals_native_hsdp(tmp_path):
    import fsdp_ranks
    _spawn(fsdp_ranks.dense_equals_native, tmp_path, 3, str(tmp_path / "out.json"))
    _numbers(tmp_path / "out.json")


@needs_fsdp2
def test_bytes_across_the_replicas_drop_by_the_expected_factor(tmp_path):
    import fsdp_ranks
    _spawn(fsdp_ranks.bytes_ratio, tmp_path, 8, 3, str(tmp_path / "out.json"))
    n = _numbers(tmp_path / "out.json")
    # at d = 0.01 a settled step sends about 2 d of the dense bytes (values, indices) plus the
    # counts; the estimate holds that, the measurement must match it (also checked in the body)
    assert n["expected_ratio"] / 1.4 <= n["ratio"] <= n["expected_ratio"] / 0.75, n
    assert n["ratio"] >= 0.5 / (2 * 0.01), n


@needs_fsdp2
def test_dcp_round_trip_continues_bit_for_bit(tmp_path):
    import fsdp_ranks
    _spawn(fsdp_ranks.dcp_round_trip, tmp_path, str(tmp_path / "ckpt"))


@needs_fsdp2
def test_a_checkpoint_of_two_replicas_resumes_at_one(tmp_path):
    import fsdp_ranks
    ckpt, residuals = str(tmp_path / "ckpt"), str(tmp_path / "residuals")
    _spawn(fsdp_ranks.replicas_save, tmp_path / "save", ckpt, residuals)
    _spawn(fsdp_ranks.replicas_resume, tmp_path / "resume", ckpt, residuals, 4, world=2)
    # 2 x 2 -> 2 x 1 keeps the replicas and halves the shards: refused by name
    _spawn(fsdp_ranks.replicas_refuse_shards, tmp_path / "refuse", ckpt, world=2)


@needs_fsdp2
def test_two_by_two_run_learns_within_the_band_of_native_hsdp(tmp_path):
    import fsdp_ranks
    _spawn(fsdp_ranks.loss_band, tmp_path, 100, str(tmp_path / "out.json"), deadline_s=600)
    n = _numbers(tmp_path / "out.json")
    dense, sparse = n["dense"], n["exdyna"]
    # Both learn; at d = 0.01 exdyna's held-out loss has fallen by at least 70 % of native HSDP's
    # drop from the first loss at equal steps (measured on 2.15: 0.83 at 100 steps; 0.51 at 50,
    # 0.93 at 150: the sparse run lags early, then closes in).
    assert dense["held_out"] < 0.6 * n["ln_v"], n
    progress = (sparse["first"] - sparse["held_out"]) / (dense["first"] - dense["held_out"])
    print(f"exdyna's share of native HSDP's loss drop after 100 steps: {progress:.3f}")
    assert progress >= 0.7, (progress, n)


@needs_fsdp2
def test_bad_input_raises_clear_errors(tmp_path):
    import fsdp_ranks
    _spawn(fsdp_ranks.bad_input, tmp_path, world=2)


@needs_fsdp2
def test_without_set_all_reduce_hook_register_names_the_torch_version(monkeypatch):
    import torch.nn as nn
    from torch.distributed.fsdp import FSDPModule

    import exdyna.fsdp
    monkeypatch.delattr(FSDPModule, "set_all_reduce_hook")
    assert not exdyna.fsdp.available()
    with pytest.raises(ImportError, match=re.escape(f"torch >= 2.7); this torch is "
                                                    f"{torch.__version__}")):
        exdyna.fsdp.register(nn.Linear(2, 2), None)


def test_the_module_imports_and_says_what_is_missing_without_fsdp2():
    fsdp = pytest.importorskip("exdyna.fsdp")
    assert fsdp.available() == _has_fsdp2()


@needs_fsdp2
def test_the_example_runs_under_torchrun(tmp_path):
    out = tmp_path / "run.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc-per-node", "4", EXAMPLE, "--steps", "3", "--print-every", "1",
                        "--json", str(out)], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for rank in range(4):
        assert f"[rank {rank}] step 3 loss" in r.stdout, r.stdout
    assert "replicate dimension, rank 0: sent" in r.stdout
    numbers = json.loads(out.read_text())
    assert 0 < numbers["bytes"] < numbers["dense_bytes"] and len(numbers["losses"]) == 3
