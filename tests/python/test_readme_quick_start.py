"""The README's PyTorch quick start, as written: its train.py on 2 Gloo ranks under torchrun
(torch.distributed.run of this interpreter), printing the State's compression line."""

import os
import pathlib
import re
import subprocess
import sys

import torch

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_quick_start_trains_on_two_ranks(tmp_path):
    text = README.read_text()
    section = text[text.index("## PyTorch quick start"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "# train.py" in code
    (tmp_path / "train.py").write_text(code)
    # torch 1.13 under Python 3.11 cannot parse torchrun's default --redirects 0 (README says so)
    old = tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 0)
    redirects = ["--redirects", "1", "--tee", "1"] if old else []
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         *redirects, str(tmp_path / "train.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    lines = re.findall(r"exdyna exdyna d=0.01: iteration 100, .*density ([0-9.]+)", out)
    assert len(lines) == 2, out[-3000:]  # one line per rank
    assert all(abs(float(d) - 0.01) < 0.001 for d in lines), lines
