"""PyTorch users' conventions: gradient accumulation under no_sync, torch.compile, logging, the
public names (every one documented, internals private) and the names of the two densities.
Multi-rank bodies: conventions_ranks.py."""

import inspect

import pytest
import torch

import conventions_ranks
import exdyna
import exdyna.ddp
import exdyna.fsdp
import exdyna.log
import ranks


def test_accumulation_under_no_sync_equals_the_whole_batch(tmp_path):
    ranks.spawn(conventions_ranks.accumulation, 2, tmp_path, 4)


@pytest.mark.skipif(not hasattr(torch, "compile"), reason=f"torch {torch.__version__} has no "
                    "torch.compile (2.0 and later; scripts/torch2-venv.sh runs this)")
def test_compiled_model_takes_the_eager_decisions(tmp_path):
    ranks.spawn(conventions_ranks.compiled, 2, tmp_path, 4, deadline_s=600)


def test_the_hook_logs_every_n_iterations(tmp_path):
    ranks.spawn(conventions_ranks.logging, 2, tmp_path, str(tmp_path))


def test_bad_log_arguments_are_refused(one_rank):
    with pytest.raises(TypeError, match="log 3 is not callable"):
        exdyna.ddp.State(density=0.01, log=3)
    with pytest.raises(ValueError, match="log_every 0 is not valid"):
        exdyna.ddp.State(density=0.01, log=print, log_every=0)
    with pytest.raises(TypeError, match="has no add_scalar"):
        exdyna.log.tensorboard(object())


def _public_members(obj):
    for name, member in inspect.getmembers(obj):
        if not name.startswith("_"):
            yield name, member


@pytest.mark.parametrize("module", [exdyna, exdyna.ddp, exdyna.fsdp, exdyna.log])
def test_every_public_name_has_a_docstring(module):
    assert module.__doc__, module.__name__
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        if name == "__version__" or inspect.ismodule(obj):
            continue
        if not inspect.getdoc(obj):
            missing.append(name)
        if inspect.isclass(obj):
            missing += [f"{name}.{m}" for m, member in _public_members(obj)
                        if (inspect.isfunction(member) or isinstance(member, property))
                        and not inspect.getdoc(member)]
    assert not missing, f"{module.__name__}: public names without a docstring: {missing}"


def test_the_hooks_internals_are_private():
    public = {name for name, _ in _public_members(exdyna.ddp.State)}
    for internal in ("record", "end_iteration", "submit", "drain", "dense_mode",
                     "bucket_sparsifier", "check_shapes", "comm_stream"):
        assert internal not in public, internal


def test_the_two_densities_have_names_that_say_which(one_rank):
    sp = exdyna.Sparsifier("exdyna", 0.02)
    assert sp.target_density == 0.02
    state = exdyna.ddp.State(density=0.02)
    assert state.target_density == 0.02 and state.actual_density() == 0.0
    with pytest.warns(DeprecationWarning, match="actual_density"):
        assert state.density() == 0.0


def test_the_option_and_statistics_tables_are_public():
    table = exdyna.option_table()
    # option_names() adds the two the Python path alone takes
    assert {row["key"] for row in table} | {"measure_global_error", "resident", "timeout"} == set(
        exdyna.option_names())
    assert "non_finite" in {row["key"] for row in table}
    fields = exdyna.stats_fields()
    assert "non_finite" in fields and "total" in fields["bytes"]


def test_a_state_made_before_the_group_finds_it_at_the_first_bucket(tmp_path):
    """Lightning's DDPStrategy(ddp_comm_state=State(...)) makes the State before fit() makes the
    process group: the State validates what it can and looks the group up at first use."""
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    assert not dist.is_initialized()
    state = exdyna.ddp.State(density=0.05)
    with pytest.raises(ValueError, match="density"):
        exdyna.ddp.State(density=2.0)
    with pytest.raises(ValueError, match="no_such_option"):
        exdyna.ddp.State(density=0.05, no_such_option=1)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        model = DDP(nn.Linear(200, 100))
        model.register_comm_hook(state, exdyna.ddp.hook)
        model(torch.randn(4, 200)).square().sum().backward()
        assert state.steps == 1 and state.k_total > 0
    finally:
        dist.destroy_process_group()
