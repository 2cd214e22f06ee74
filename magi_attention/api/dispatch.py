"""dispatch / undispatch: global tensor <-> this rank's local shard (chunks in the key's order)."""
from __future__ import annotations

import torch
import torch.distributed as dist

from .key import DistAttnKey


def dispatch(x: torch.Tensor, key: DistAttnKey) -> torch.Tensor:
    """This rank's shard of a global tensor: x [total_seqlen, ...] -> [shard_seqlen, ...]
    (shard_seqlen = ``key.dispatch_meta.shard_seqlen_of(key.cp_rank)``: S / cp_size but under
    the opt-in ``unequal_runs`` dispatch).

    Every rank passes the same global x (differentiable: a row gather)."""
    if x.shape[0] != key.total_seqlen:
        raise ValueError(f"x must be global [total_seqlen={key.total_seqlen}, ...], "
                         f"got {tuple(x.shape)}")
    return x.index_select(0, key.position_ids(x.device))


def undispatch(y: torch.Tensor, key: DistAttnKey) -> torch.Tensor:
    """All-gather local shards back into global order: y [shard_seqlen, ...] -> [total_seqlen, ...].

    Collective. Its backward takes this rank's rows of the global gradient (the gradient is
    assumed equal on every rank, as when each computes the same loss on the gathered tensor).
    """
    shard = key.meta.dispatch.shard_seqlen_of(key.cp_rank)
    if y.shape[0] != shard:
        raise ValueError(f"y must be a local shard [shard_seqlen={shard}, ...], got {tuple(y.shape)}")
    return _Undispatch.apply(y, key)


class _Undispatch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, key: DistAttnKey):
        ctx.key = key
        sizes = key.meta.dispatch.shard_seqlens
        # all_gather takes equal parts: unequal shards travel padded to the longest
        padded = y.new_zeros((max(sizes),) + tuple(y.shape[1:]))
        padded[:y.shape[0]] = y
        parts = [torch.empty_like(padded) for _ in range(key.cp_size)]
        dist.all_gather(parts, padded, group=key.groups.cp_group)
        gathered = torch.cat([p[:n] for p, n in zip(parts, sizes)])  # rank 0's chunks, ...
        order = key.meta.dispatch.permutation()
        cs = key.chunk_size
        out = torch.empty((key.total_seqlen,) + tuple(y.shape[1:]), dtype=y.dtype, device=y.device)
        out.view(-1, cs, *y.shape[1:])[torch.from_numpy(order).to(y.device)] = \
            gathered.view(-1, cs, *y.shape[1:])
        return out

    @staticmethod
    def backward(ctx, grad):
        return dispatch(grad, ctx.key), None
