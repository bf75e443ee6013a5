import math

import pytest
import torch
import torch.distributed as dist

import exdyna
import ranks


@pytest.mark.parametrize("kwargs, match", [
    (dict(density=0), "density 0"),
    (dict(density=1.5), "density 1.5"),
    (dict(density=math.nan), "density nan"),
    (dict(density="0.01"), "density '0.01'"),
    (dict(density=0.01, bogus=3), "unknown option 'bogus'"),
    (dict(density=0.01, controller="fast"), "controller 'fast'"),
    (dict(density=0.01, gather="all"), "gather"),
    (dict(density=0.01, values="fp8"), "value format 'fp8'"),
    (dict(density=0.01, gamma="x"), "option gamma='x'"),
    (dict(density=0.01, gamma=2.0), r"option gamma=2.0 is not valid; expected a number in \(0, 1\)"),
    (dict(density=0.01, gamma=True), "option gamma=True is not valid; expected a number"),
    (dict(density=0.01, controller=1), "option controller=1 is not valid; expected paper"),
    (dict(density=0.01, blocks=1.5), "option blocks=1.5"),
    (dict(density=0.01, controller="paper", worker_cap="auto"), "needs --controller exact"),
    (dict(density=0.01, oktopk_period=0), "option oktopk_period=0"),
    (dict(density=0.01, oktopk_repartition=2**40), "option oktopk_repartition=1099511627776"),
])
def test_bad_options_raise_value_error(one_rank, kwargs, match):
    with pytest.raises(ValueError, match=match):
        exdyna.Sparsifier("exdyna", **kwargs)


def test_options_are_the_option_table(one_rank):
    # The keywords are the library's option table (the CLI's flags with underscores) and the
    # binding's own three; each is taken, and refused naming itself when its value is bad.
    rows = exdyna._exdyna.option_table()
    keys = [r["key"] for r in rows]
    own = ["measure_global_error", "resident", "timeout"]
    assert sorted(keys + own) == sorted(exdyna.option_names())
    for r in rows:
        assert r["flag"] == "--" + r["key"].replace("_", "-")
        with pytest.raises(ValueError, match=f"option {r['key']}="):
            exdyna.Sparsifier("exdyna", 0.01, **{r["key"]: [1]})
    for key in own:
        with pytest.raises(ValueError, match=f"option {key}="):
            exdyna.Sparsifier("exdyna", 0.01, **{key: "yes"})
    # resident=True refuses, by name, what the resident step runs without.
    for extra, named in (({"measure_global_error": True}, "measure_global_error"),
                         ({"step_clip": 1.0}, "step_clip"),
                         ({"controller": "paper"}, "controller='paper'"),
                         ({"values": "bf16"}, "values='bf16'")):
        with pytest.raises(ValueError, match=f"resident=True.*{named}"):
            exdyna.Sparsifier("exdyna", 0.01, resident=True, **extra)
    # resident concerns CUDA gradients: on the CPU the step is the same.
    g = torch.randn(5000, generator=torch.Generator().manual_seed(3))
    plain, resident = exdyna.Sparsifier("exdyna", 0.01), exdyna.Sparsifier("exdyna", 0.01,
                                                                           resident=True)
    for _ in range(3):
        assert torch.equal(plain.step(g.clone()), resident.step(g.clone()))
    defaults = {r["key"]: r["default"] for r in rows}
    assert (defaults["controller"], defaults["balance"]) == ("exact", "exact")


def test_bad_name_lists_the_known_ones(one_rank):
    with pytest.raises(ValueError, match="topk"):
        exdyna.Sparsifier("nonesuch", 0.01)
    assert "exdyna" in exdyna.sparsifier_names()


def test_bad_gradients(one_rank):
    sp = exdyna.Sparsifier("topk", 0.1)
    for dtype in (torch.float64, torch.int32, torch.uint8):
        with pytest.raises(TypeError, match=f"dtype {dtype} .*expected torch.float32"):
            sp.step(torch.ones(100, dtype=dtype))
    with pytest.raises(TypeError):
        sp.step([1.0, 2.0])
    with pytest.raises(ValueError, match=r"shape \(10, 10\) is not contiguous"):
        sp.step(torch.ones(10, 10).t())
    assert sp.iteration == 0 and sp.stats is None  # nothing refused reached the sparsifier
    sp.step(torch.ones(100))
    with pytest.raises(ValueError, match="built for 100"):
        sp.step(torch.ones(101))
    bad = torch.ones(100)
    bad[17] = math.inf
    with pytest.raises(ValueError, match="element 17"):
        sp.step(bad)
    with pytest.raises(ValueError, match="not an exdyna sparsifier state"):
        sp.load_state_dict({"state": b"garbage!garbage!"})


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_gradients_keep_an_fp32_residual(one_rank, dtype):
    sp = exdyna.Sparsifier("topk", 0.01)
    g = ranks.gradient(0, 0, 10000)
    half = g.to(dtype)
    u = sp.step(half)
    assert u.dtype == dtype and u.shape == half.shape
    kept = u != 0
    assert int(kept.sum()) == 100
    assert torch.equal(u[kept], half[kept])  # one rank: the update is the selected gradient
    # the residual is the widened gradient, unsent values kept in float32
    r = sp.residual()
    assert r.dtype == torch.float32
    assert torch.equal(r[~kept], half.float()[~kept]) and not r[kept].any()
    # a second step accumulates in float32: residual + grad, not rounded to 16 bits in between
    u2 = sp.step(half)
    expect = r + half.float()
    top = expect.abs().topk(100).indices
    assert torch.equal(u2[top].float(), expect[top].to(dtype).float())


def test_no_process_group():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        exdyna.Sparsifier("exdyna", 0.01)


def test_one_rank_update_is_the_sparsified_gradient(one_rank):
    sp = exdyna.Sparsifier("topk", 0.01)
    g = ranks.gradient(0, 0, 10000)
    u = sp.step(g)
    kept = u != 0
    assert int(kept.sum()) == 100
    assert torch.equal(u[kept], g[kept])
    # top-k: the kept magnitudes are the largest
    assert g.abs()[kept].min() >= g.abs()[~kept].max()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_in_place_step_writes_the_update_into_the_gradient(one_rank, dtype):
    twin, sp = exdyna.Sparsifier("exdyna", 0.01), exdyna.Sparsifier("exdyna", 0.01)
    for t in range(3):
        g = ranks.gradient(0, t, 10000).to(dtype)
        expect = twin.step(g.clone())
        u = sp.step(g, in_place=True)
        assert u is g and u.dtype == dtype
        assert torch.equal(g, expect), f"step {t}: the in-place update differs"
        assert torch.equal(sp.residual(), twin.residual())
    with pytest.raises(TypeError, match="in_place 1 is not a bool"):
        sp.step(g, in_place=1)


@pytest.mark.parametrize("world", [2, 4])
def test_updates_identical_on_every_rank(tmp_path, world):
    # padded all-gathers (default), and the exact all-gather (one broadcast per rank) with the
    # broadcast CLT-k needs and the paper's own controller
    # 16-bit values: fp16 summed by Gloo as 16-bit words, bf16 widened to float32
    cases = (("exdyna", {}), ("topk", {}), ("cltk", {"gather": "exact"}),
             ("topk", {"values": "bf16"}), ("exdyna", {"values": "fp16"}),
             # Ok-Topk: the group's all-to-all (alltoall_base), both gather modes
             ("oktopk", {"oktopk_period": 2}), ("oktopk", {"gather": "exact"}),
             ("exdyna", {"gather": "exact", "controller": "paper", "balance": "paper"}))
    for i, (name, options) in enumerate(cases):
        ranks.spawn(ranks.sparsifier_steps, world, tmp_path / f"{i}-{name}", name, 5,
                    options)


def test_fp16_values_halve_the_value_bytes_at_four_ranks(tmp_path):
    ranks.spawn(ranks.sixteen_bit_wire, 4, tmp_path)


def test_state_dict_round_trip_continues_bit_for_bit(tmp_path):
    ranks.spawn(ranks.sparsifier_round_trip, 2, tmp_path, "exdyna")


def test_ddp_state_carries_residuals_into_rebuilt_buckets(one_rank):
    import exdyna.ddp
    state = exdyna.ddp.State(sparsifier="topk", density=0.5)
    # bucket "A" holds parameters 101 (3 values) and 202 (2 values); then DDP re-lays out and
    # bucket "B" holds 202 alone, bucket "C" holds 303 (new) and 101
    a = state._bucket_sparsifier("A", [(101, 0, 3), (202, 3, 2)])
    a.step(torch.tensor([1.0, 2.0, 30.0, 4.0, 5.0]))
    ra = a.residual()
    assert torch.equal(ra, torch.tensor([1.0, 2.0, 0.0, 4.0, 0.0]))  # top-2 of 5 sent
    state._end_iteration()
    b = state._bucket_sparsifier("B", [(202, 0, 2)])
    c = state._bucket_sparsifier("C", [(303, 0, 4), (101, 4, 3)])
    assert torch.equal(b.residual(), ra[3:5])
    assert torch.equal(c.residual(), torch.cat([torch.zeros(4), ra[0:3]]))
    b.step(torch.zeros(2))
    c.step(torch.zeros(7))
    state._end_iteration()
    assert state.buckets() == ["B", "C"] and state.rebuilds == 1


def test_dead_peer_raises_instead_of_aborting(tmp_path):
    ranks.spawn(ranks.dead_peer, 2, tmp_path)


def test_ddp_hook_refuses_a_float64_model(one_rank):
    import exdyna.ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(torch.nn.Linear(50, 4).double())
    model.register_comm_hook(exdyna.ddp.State(density=0.1), exdyna.ddp.hook)
    with pytest.raises(Exception, match="float32"):
        model(torch.randn(8, 50, dtype=torch.float64)).sum().backward()


def test_version_has_one_source_cmakes_project_version():
    import importlib.metadata
    import os
    import re
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "CMakeLists.txt")) as f:
        want = re.search(r"project\(exdyna VERSION ([0-9.]+)", f.read()).group(1)
    assert exdyna.__version__ == want
    try:  # installed with pip: the package metadata says the same
        assert importlib.metadata.version("exdyna") == want
    except importlib.metadata.PackageNotFoundError:
        pass
