"""All-gather of per-rank tensors of different lengths along dim 0 (padded to the longest)."""
from __future__ import annotations

import torch
import torch.distributed as dist

from ._stats import CommStats, comm_range, nbytes

# torch >= 2.10 renamed the tensor collectives; keep the older names working too.
_all_gather_tensor = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def all_gather_uneven(x: torch.Tensor, lengths: list[int], group, stats: CommStats,
                      direction: str) -> list[torch.Tensor]:
    """x: [lengths[my_rank], ...] -> one tensor per rank of the group, [lengths[r], ...] each."""
    width = max(lengths)
    padded = x.new_zeros((width,) + tuple(x.shape[1:]))
    padded[:x.shape[0]] = x
    out = x.new_empty((len(lengths) * width,) + tuple(x.shape[1:]))
    with comm_range("all_gather", nbytes(padded), x.device):
        _all_gather_tensor(out, padded, group=group)
    stats.add(direction, nbytes(padded) * (len(lengths) - 1))
    return [out[r * width: r * width + n] for r, n in enumerate(lengths)]
