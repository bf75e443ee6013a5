"""Sparsifier.stats is shaped by the library's list of statistics (_stats_fields): the same keys,
the same nesting, integers exact; and every key is documented in docs/python.md."""

import pathlib
import re

import pytest
import torch

import exdyna

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"


def shape(d):
    """The nesting of a dict: its keys, with a nested dict's keys under it."""
    return {k: shape(v) if isinstance(v, dict) else None for k, v in d.items()}


def test_field_list_names_every_statistic_once():
    fields = exdyna._exdyna._stats_fields()
    for key in ("iteration", "k_target", "k_total", "density", "f_t", "own_partition",
                "k_per_worker", "alloc_per_worker", "blocks_per_partition"):
        assert isinstance(fields[key], str) and fields[key], key
    assert "k" not in fields and "iter" not in fields  # the old spellings are gone
    assert set(fields["bytes"]) >= {"allgather_counts", "allreduce", "total"}
    assert set(fields["times"]) >= {"select", "select_cpu", "non_comm", "cpu"}


@pytest.mark.parametrize("name", ["exdyna", "topk", "dense"])
def test_stats_keys_come_from_the_field_list(one_rank, name):
    n, d = 5000, 0.02
    sp = exdyna.Sparsifier(name, d)
    g = torch.Generator().manual_seed(3)
    sp.step(torch.randn(n, generator=g))
    s = sp.stats
    assert shape(s) == shape(exdyna._exdyna._stats_fields())
    assert s["iteration"] == 0 and s["world_size"] == 1 and s["n_g"] == n
    assert s["k_target"] == (n if name == "dense" else int(d * n))  # dense sends every value
    assert s["k_per_worker"] == [s["k_total"]]
    for key in ("iteration", "n_g", "k_target", "k_total", "k_unique", "own_partition"):
        assert type(s[key]) is int, key
    for key in ("density", "f_t", "threshold", "target_density"):
        assert type(s[key]) is float, key
    b = s["bytes"]
    assert all(type(v) is int for v in b.values()), b
    assert b["total"] == sum(b[k] for k in ("allgather_counts", "allgather_indices", "allreduce",
                                             "broadcast", "alltoall"))
    t = s["times"]
    assert t["non_comm"] == pytest.approx(t["accumulate"] + t["select"] + t["update"] + t["other"])


def test_every_key_is_documented():
    table = DOCS.read_text()
    start = table.index("**`stats`**")
    documented = set(re.findall(r"`([a-z_0-9]+)`", table[start:table.index("## Errors", start)]))
    fields = exdyna._exdyna._stats_fields()
    missing = [k for k in fields if k not in documented]
    for group in ("bytes", "times"):
        missing += [f"{group}.{k}" for k in fields[group] if k not in documented]
    assert not missing, f"stats keys not in docs/python.md: {missing}"
