"""group_reduce's deterministic sum: the partials a row gets from several ranks are added in
source-rank order. The values are chosen so that float addition order shows: in fp32,
(-1e8 + 1e8) + 1 = 1 but (-1e8 + 1) + 1e8 = 0, so a sum in any other order (as CUDA atomics
may take, by arrival) gives other bits, and these tests fail."""
import numpy as np
import pytest
import torch

from magi_attention.comm import GroupCollectiveArgs
from magi_attention.comm.group_reduce import ordered_scatter_add_
from magi_attention.testing.gloo import run_on_ranks

BIG = 1e8  # fp32 spacing at 1e8 is 8: adding 1 to it is lost


def _in_order(start: float, *parts: float) -> torch.Tensor:
    total = torch.tensor(start, dtype=torch.float32)
    for p in parts:
        total = total + torch.tensor(p, dtype=torch.float32)
    return total


def test_addition_order_changes_the_bits_of_these_values():
    assert _in_order(-BIG, BIG, 1.0).item() == 1.0
    assert _in_order(-BIG, 1.0, BIG).item() == 0.0


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_ordered_scatter_add_sums_block_by_block(device):
    # row 0 gets one partial from each of three blocks; row 1 from blocks 1 and 2
    out = torch.tensor([[-BIG], [5.0]], device=device)
    index = torch.tensor([0, 0, 1, 0, 1], device=device)
    src = torch.tensor([[BIG], [1.0], [2.0], [-3.0], [BIG]], device=device)
    ordered_scatter_add_(out, index, src, sizes=(1, 2, 2))
    assert out[0].item() == _in_order(-BIG, BIG, 1.0, -3.0).item() == -2.0
    assert out[1].item() == _in_order(5.0, 2.0, BIG).item()


def check_reduce_order(rank: int) -> list[str]:
    """Rank 0 casts its row 0 to ranks 1 and 2, which return BIG and 1 for it: rank 0, holding
    -BIG, must end with (-BIG + BIG) + 1 = 1 (rank 1's partial first), not 0."""
    import torch.distributed as dist

    from magi_attention.comm import group_reduce
    send = np.array([[0, 1], [0, 1]] if rank == 0 else [], dtype=np.int64).reshape(-1, 2)
    sizes = (0, 1, 1) if rank == 0 else (0, 0, 0)
    recv = (0, 0, 0) if rank == 0 else (1, 0, 0)
    args = GroupCollectiveArgs(send, sizes, recv)
    partial = torch.tensor([[[BIG], [1.0]][rank - 1]] if rank else [], dtype=torch.float32)
    out = torch.full((1, 1), -BIG if rank == 0 else 0.0)
    group_reduce(partial.reshape(-1, 1), out, args, deterministic=True).wait()
    dist.barrier()
    if rank == 0 and out.item() != 1.0:
        return [f"rank 0 summed to {out.item()}, not (-1e8 + 1e8) + 1 = 1 (source-rank order)"]
    return []


def test_deterministic_group_reduce_adds_in_source_rank_order_over_gloo():
    assert run_on_ranks(check_reduce_order, 3) == ""
