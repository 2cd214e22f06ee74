"""Reduce-scatter (sum) of a tensor made of per-rank segments of different lengths along dim 0."""
from __future__ import annotations

import torch
import torch.distributed as dist

from ._stats import CommStats, comm_range, nbytes

_reduce_scatter_tensor = (getattr(dist, "reduce_scatter_single", None)
                          or dist.reduce_scatter_tensor)


def reduce_scatter_uneven(x: torch.Tensor, lengths: list[int], rank: int, group,
                          stats: CommStats, direction: str) -> torch.Tensor:
    """x: [sum(lengths), ...], segment r for rank r -> the sum over ranks of segment ``rank``."""
    width = max(lengths)
    padded = x.new_zeros((len(lengths), width) + tuple(x.shape[1:]))
    start = 0
    for r, n in enumerate(lengths):
        padded[r, :n] = x[start:start + n]
        start += n
    out = x.new_empty((width,) + tuple(x.shape[1:]))
    with comm_range("reduce_scatter", nbytes(out) * len(lengths), x.device):
        _reduce_scatter_tensor(out, padded.flatten(0, 1), group=group)
    stats.add(direction, nbytes(out) * (len(lengths) - 1))
    return out[:lengths[rank]]
