"""The hook's decisions equal the C++ CLI's on the same raw gradients: 2 Gloo ranks train under
exdyna.ddp.hook while recording their raw bucket gradients as an `exdyna simulate` trace, then
`exdyna simulate --trace` replays it and its --decisions CSV (threshold, k per worker, partition
allocation, blocks per partition, every iteration) must equal the hook's statistics exactly."""

import csv
import json
import os
import subprocess

import pytest

import ranks


def exdyna_cli():
    path = os.environ.get("EXDYNA_BIN")
    if not path or not os.path.exists(path):
        pytest.skip("EXDYNA_BIN does not name the exdyna command (CTest sets it)")
    return path


@pytest.mark.parametrize("density", [0.01, 0.05])
def test_hook_decisions_equal_simulate_trace(tmp_path, density):
    cli = exdyna_cli()
    steps, world = 12, 2
    trace = tmp_path / "trace"
    hook_json = tmp_path / "hook.json"
    ranks.spawn(ranks.ddp_record_trace, world, tmp_path / "pg", steps, density, str(trace),
                str(hook_json))
    out = tmp_path / "decisions.csv"
    # the hook's defaults are `exdyna train`'s: exact controller and balance, automatic cap
    subprocess.run([cli, "simulate", "--trace", str(trace), "--iterations", str(steps),
                    "--sparsifier", "exdyna", "--density", str(density), "--controller", "exact",
                    "--balance", "exact", "--worker-cap", "auto", "--decisions", str(out)],
                   check=True, stdout=subprocess.DEVNULL, timeout=300)
    hook = json.loads(hook_json.read_text())
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == steps == len(hook)
    # a comparison worth making: the controller moved the threshold and the counts
    assert len({h["threshold"] for h in hook}) > steps // 2
    assert len({tuple(h["k_per_worker"]) for h in hook}) > 1
    for row, h in zip(rows, hook):
        t = int(row["iter"])
        assert t == h["iteration"]
        assert float(row["threshold"]) == h["threshold"], f"threshold at {t}"
        assert int(row["k_total"]) == h["k_total"], f"k' at {t}"
        assert [int(row[f"k_w{w}"]) for w in range(world)] == h["k_per_worker"], f"k_i at {t}"
        assert [int(row[f"alloc_w{w}"]) for w in range(world)] == h["alloc_per_worker"]
        assert [int(row[f"blocks_p{w}"]) for w in range(world)] == h["blocks_per_partition"]
