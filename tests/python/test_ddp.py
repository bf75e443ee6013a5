import pytest

import ranks


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_hook_parameters_identical_and_rebuild_handled(tmp_path, world):
    ranks.spawn(ranks.ddp_identical, world, tmp_path, 5)


def test_ddp_state_dict_round_trip_continues_bit_for_bit(tmp_path):
    ranks.spawn(ranks.ddp_round_trip, 2, tmp_path, str(tmp_path))
