"""Fixtures shared by the Python tests."""

import pytest
import torch.distributed as dist


@pytest.fixture
def one_rank(tmp_path):
    """A Gloo group of one rank, in this process, over a FileStore in the test's directory."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()
