"""scripts/select_cost_model.py: the per-worker cost model of the selection fitted on
`exdyna bench select --per-step` steps. The fit recovers known coefficients, refuses a fit it
cannot make, and reads what the command writes."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "select_cost_model.py"


def model():
    spec = importlib.util.spec_from_file_location("select_cost_model", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_fit_recovers_known_coefficients():
    m = model()
    rows = []
    for part in (1000, 5000, 20000, 80000):
        for cand in (10, 300, 2000):
            rows.append({"partition": part, "candidates": cand,
                         "select_cpu_us": 2.0 + 4e-5 * part + 1e-3 * cand})
    c, means = m.fit(rows, "candidates")
    assert c == pytest.approx([2.0, 4e-5, 1e-3], rel=1e-6)
    mean_time = sum(r["select_cpu_us"] for r in rows) / len(rows)
    assert sum(means) == pytest.approx(mean_time, rel=1e-9)


def test_a_constant_feature_is_refused_by_name():
    m = model()
    rows = [{"partition": 4096, "kept": k, "select_cpu_us": 1.0 + k} for k in (1, 2, 3)]
    with pytest.raises(ValueError, match="singular"):
        m.fit(rows, "kept")


def test_it_reads_what_bench_select_writes(tmp_path):
    cli = os.environ.get("EXDYNA_BIN")
    if not cli or not os.path.exists(cli):
        pytest.skip("EXDYNA_BIN does not name the exdyna command (CTest sets it)")
    steps = tmp_path / "steps.csv"
    subprocess.run([cli, "bench", "select", "--n-grad", "65536", "--workers", "4", "--iterations",
                    "8", "--repeat", "1", "--solo-runs", "1", "--per-step", str(steps)],
                   check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([sys.executable, str(SCRIPT), str(steps)], check=True,
                         capture_output=True, text=True).stdout
    rows = [line for line in out.splitlines() if line.startswith("| paper") or
            line.startswith("| exact")]
    assert len(rows) == 2
    assert "| 28 |" in rows[0] and "| 28 |" in rows[1]  # 4 workers x 7 steps after iteration 0


def test_a_missing_file_is_an_error_not_a_trace(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "none.csv")],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "none.csv" in r.stderr
