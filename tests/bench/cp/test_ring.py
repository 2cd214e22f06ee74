"""RingComm fails loudly when misused (gloo, one process; the ring itself runs in test_strategies)."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from bench.cp._ring import RingComm
from bench.cp._stats import CommStats


@pytest.fixture(scope="module")
def world_of_one(tmp_path_factory):
    store = dist.FileStore(str(tmp_path_factory.mktemp("ring") / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _comm(stats=None):
    return RingComm(None, 0, 0, tag=1, stats=stats or CommStats(), direction="fwd")


def test_commit_without_send_recv_raises(world_of_one):
    with pytest.raises(RuntimeError, match="commit without send_recv"):
        _comm().commit()


def test_wait_without_commit_raises(world_of_one):
    with pytest.raises(RuntimeError, match="wait without commit"):
        _comm().wait()


def test_second_send_recv_before_wait_raises(world_of_one):
    comm = _comm()
    comm.send_recv(torch.ones(3), (3,))
    with pytest.raises(RuntimeError, match="not waited"):
        comm.send_recv(torch.ones(3), (3,))
