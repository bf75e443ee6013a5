import pytest

import ranks


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_hook_parameters_identical_and_rebuild_handled(tmp_path, world):
    ranks.spawn(ranks.ddp_identical, world, tmp_path, 5)


def test_ddp_state_dict_round_trip_continues_bit_for_bit(tmp_path):
    ranks.spawn(ranks.ddp_round_trip, 2, tmp_path, str(tmp_path))


def test_ranks_that_disagree_raise_value_error_on_every_rank(tmp_path):
    ranks.spawn(ranks.disagree, 2, tmp_path, deadline_s=60)


def test_start_iter_warm_up_is_ddp_allreduce_bit_for_bit(tmp_path):
    ranks.spawn(ranks.ddp_start_iter, 2, tmp_path, 3)


def test_overlapped_hook_takes_the_synchronous_decisions(tmp_path):
    ranks.spawn(ranks.ddp_overlap_same, 2, tmp_path, 4)


def test_global_error_is_measured_only_on_request(tmp_path):
    ranks.spawn(ranks.ddp_global_error_on_request, 2, tmp_path, 3)


def test_group_checkpoint_resumes_at_another_world_size(tmp_path):
    path = str(tmp_path / "group.pt")
    ranks.spawn(ranks.elastic_save, 4, tmp_path / "save", path)
    for world in (2, 8):
        ranks.spawn(ranks.elastic_resume, world, tmp_path / f"resume{world}", path)


def _times(sparse, dense, exchange, at_d=None):
    return {"sparse": sparse, "dense": dense, "exchange": exchange, "at_d": at_d}


@pytest.mark.parametrize("times, warmup, expect", [
    (_times(50, 40, 1), 0, "dense"),     # a fast link: the probe's dense iterations are shorter
    (_times(50, 60, 1), 0, "dense"),     # sparse not 25 % shorter: a dense step learns more
    (_times(50, 70, 1), 0, "sparse"),    # probed, the sparse iterations are shorter
    (_times(50, 70, 200), 0, "sparse"),  # a slow link: the predicted dense exchange rules out a probe
    (_times(50, 40, 1, at_d=25), 20, "sparse"),  # the warm-up was slow, sparse at d is shorter
    (_times(50, 40, 1, at_d=35), 20, "dense"),   # ... and at d not 25 % shorter
])
def test_dense_fallback_probes_and_decides_on_every_rank(tmp_path, times, warmup, expect):
    ranks.spawn(ranks.ddp_dense_fallback, 2, tmp_path, times, warmup, expect)
