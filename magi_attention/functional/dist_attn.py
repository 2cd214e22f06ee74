"""Distributed (context-parallel) attention: autograd over DistAttnRuntime's staged fwd / bwd."""
from __future__ import annotations

import torch

from ._dist_runtime import DistAttnRuntime


class DistAttnFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, runtime: DistAttnRuntime):
        out, lse, kv_all = runtime.forward_saving(q, k, v)
        # the fused path's KV buffer is kept for the backward: one cast per step, not two
        ctx.save_for_backward(q, k, v, out, lse, kv_all)
        ctx.runtime = runtime
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse, kv_all = ctx.saved_tensors
        dq, dk, dv = ctx.runtime.backward(dout, q, k, v, out, lse, kv_all)
        return dq, dk, dv, None


def dist_attn_func(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, runtime: DistAttnRuntime
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of this rank's dispatched q over the whole (dispatched) k, v of the cp group.

    Args:
        q: [shard_seqlen, num_heads_q, head_dim]; k, v: [shard_seqlen, num_heads_kv, head_dim],
            this rank's local shards (see ``magi_attention.api.dispatch``).
        runtime: the rank's DistAttnRuntime (meta, process group, kernel backend).

    Returns:
        (out [shard_seqlen, num_heads_q, head_dim] in q.dtype, lse [shard_seqlen, num_heads_q]
        fp32, not differentiable). Collective: every rank of the group must call it.
    """
    return DistAttnFunc.apply(q, k, v, runtime)
