"""examples/lightning_ddp.py and examples/accelerate_ddp.py on 2 Gloo ranks (CPU): the ranks end
with identical parameters, and the exdyna hook ran (the State's counters, saved by each rank).
Skipped where Lightning or Accelerate is absent (Debian's torch 1.13); scripts/torch2-venv.sh
installs both."""

import os
import subprocess
import sys

import pytest
import torch

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
STEPS = 6


def run(tmp_path, *command):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([*command, "--steps", str(STEPS), "--out", str(tmp_path)], env=env,
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    assert torch.equal(ranks[0]["params"], ranks[1]["params"])
    for saved in ranks:
        # One bucket (9,610 parameters), stepped sparsely once per step.
        assert saved["world_size"] == 2 and saved["steps"] == STEPS and 0 < saved["k_total"] < STEPS * 9610
    return r.stdout


def test_lightning_trains_two_ranks_through_the_hook(tmp_path):
    pytest.importorskip("lightning")
    run(tmp_path, sys.executable, os.path.join(EXAMPLES, "lightning_ddp.py"))


def test_accelerate_trains_two_ranks_through_the_hook(tmp_path):
    pytest.importorskip("accelerate")
    run(tmp_path, sys.executable, "-m", "torch.distributed.run", "--standalone",
        "--nproc_per_node", "2", os.path.join(EXAMPLES, "accelerate_ddp.py"))
