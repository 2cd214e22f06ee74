"""MAGI_ATTENTION_COMM_PRIORITY: the CP runtime's collectives stream is created high-priority
when it is on, at the default priority when off; the row split's "blocks" stream never is."""
import pytest
import torch

from magi_attention import env
from magi_attention.functional._dist_runtime import DistAttnRuntime

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("high", [False, True])
def test_comm_stream_priority_follows_the_switch(monkeypatch, high):
    monkeypatch.setattr(env, "COMM_PRIORITY", high)
    runtime = DistAttnRuntime(None)
    device = torch.device("cuda", torch.cuda.current_device())
    comm, blocks = runtime._stream(device), runtime._stream(device, "blocks")
    default = torch.cuda.Stream(device=device).priority
    assert (comm.priority < default) is high
    assert blocks.priority == default
    assert runtime._stream(device) is comm  # made once per device and role
