"""dispatch / undispatch: global tensor <-> this rank's local shard (chunks in the key's order).

Side "q" (the default) is q, out, lse and dq, and under self-attention k, v, dk and dv too; side
"kv" is k, v, dk and dv of a cross-attention key, which dispatches them on their own sequence
(under self-attention "kv" is the same as "q", so code may always pass it for k and v).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from .key import DistAttnKey


def dispatch(x: torch.Tensor, key: DistAttnKey, side: str = "q") -> torch.Tensor:
    """This rank's shard of a global tensor.

    side "q": x [total_seqlen_q, ...] -> [shard_seqlen_q, ...] (q; under self-attention k and v
    too). side "kv": x [total_seqlen_k, ...] -> [shard_seqlen_kv, ...] (k and v of a
    cross-attention key). Shard lengths: S / cp_size, but under the opt-in ``unequal_runs``
    dispatch ``key.dispatch_meta.shard_seqlen_of(rank)``.

    Every rank passes the same global x (differentiable: a row gather)."""
    meta = key.dispatch_meta_of(side)
    if x.shape[0] != meta.total_seqlen:
        hint = (" (k and v of a cross-attention key: dispatch(x, key, side='kv'))"
                if key.is_cross and side == "q" and x.shape[0] == key.total_seqlen_k else "")
        raise ValueError(f"x must be global [{_seqlen_name(key, side)}={meta.total_seqlen}, ...], "
                         f"got {tuple(x.shape)}{hint}")
    return x.index_select(0, key.position_ids(x.device, side))


def undispatch(y: torch.Tensor, key: DistAttnKey, side: str = "q") -> torch.Tensor:
    """All-gather local shards back into global order.

    side "q": y [shard_seqlen_q, ...] -> [total_seqlen_q, ...] (out, lse, dq). side "kv":
    y [shard_seqlen_kv, ...] -> [total_seqlen_k, ...] (dk, dv of a cross-attention key).

    Collective. Its backward takes this rank's rows of the global gradient (the gradient is
    assumed equal on every rank, as when each computes the same loss on the gathered tensor).
    """
    meta = key.dispatch_meta_of(side)
    shard = meta.shard_seqlen_of(key.cp_rank)
    if y.shape[0] != shard:
        name = "shard_seqlen" if side == "q" else "shard_seqlen_kv"
        raise ValueError(f"y must be a local shard [{name}={shard}, ...], got {tuple(y.shape)}")
    return _Undispatch.apply(y, key, side)


def _seqlen_name(key: DistAttnKey, side: str) -> str:
    if not key.is_cross:
        return "total_seqlen"
    return "total_seqlen_q" if side == "q" else "total_seqlen_k"


class _Undispatch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, key: DistAttnKey, side: str):
        ctx.key, ctx.side = key, side
        meta = key.dispatch_meta_of(side)
        sizes = meta.shard_seqlens
        # all_gather takes equal parts: unequal shards travel padded to the longest
        padded = y.new_zeros((max(sizes),) + tuple(y.shape[1:]))
        padded[:y.shape[0]] = y
        parts = [torch.empty_like(padded) for _ in range(key.cp_size)]
        dist.all_gather(parts, padded, group=key.groups.cp_group)
        gathered = torch.cat([p[:n] for p, n in zip(parts, sizes)])  # rank 0's chunks, ...
        order = meta.permutation()
        cs = meta.chunk_size
        out = torch.empty((meta.total_seqlen,) + tuple(y.shape[1:]), dtype=y.dtype,
                          device=y.device)
        out.view(-1, cs, *y.shape[1:])[torch.from_numpy(order).to(y.device)] = \
            gathered.view(-1, cs, *y.shape[1:])
        return out

    @staticmethod
    def backward(ctx, grad):
        return dispatch(grad, ctx.key, ctx.side), None, None
