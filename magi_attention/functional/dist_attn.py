"""Distributed (context-parallel) attention: autograd over DistAttnRuntime's staged fwd / bwd."""
from __future__ import annotations

import torch

from ._dist_op import dist_attn_fwd_op, reduced_sink_grad
from ._dist_runtime import DistAttnRuntime
from ._sink import apply_sink, check_sink


class DistAttnFunc(torch.autograd.Function):
    """The eager path's autograd node. A sink is applied once, to the merged (global) out and
    lse of the local rows; the runtime's backward from the sinked ones is exact (``_sink``)."""

    @staticmethod
    def forward(ctx, q, k, v, runtime: DistAttnRuntime, sink=None):
        out, lse, kv_all = runtime.forward_saving(q, k, v)
        if sink is not None:
            out, lse = apply_sink(out, lse, sink)
        # the fused path's KV buffer is kept for the backward: one cast per step, not two
        ctx.save_for_backward(q, k, v, out, lse, kv_all, sink)
        ctx.runtime = runtime
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse, kv_all, sink = ctx.saved_tensors
        dq, dk, dv = ctx.runtime.backward(dout, q, k, v, out, lse, kv_all)
        dsink = None
        if ctx.needs_input_grad[4]:  # alike on every rank: the collective always meets
            dsink = reduced_sink_grad(sink, out, lse, dout, ctx.runtime.group)
        return dq, dk, dv, None, dsink


def dist_attn_func(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, runtime: DistAttnRuntime,
                   sink: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of this rank's dispatched q over the whole (dispatched) k, v of the cp group.

    Args:
        q: [shard_seqlen, num_heads_q, head_dim]; k, v: [shard_seqlen, num_heads_kv, head_dim],
            this rank's local shards (see ``magi_attention.api.dispatch``). Strided views are
            taken as contiguous copies (the casts and stage kernels read whole rows); their
            gradients come back in the caller's layout.
        runtime: the rank's DistAttnRuntime (meta, process group, kernel backend).
        sink: fp32 [num_sink, num_heads_q] attention-sink logits, the same on every rank (see
            ``flex_flash_attn_func``), or None. Their gradient is summed over the runtime's
            group (the key's cp group), so every rank gets the whole sequence's.

    Returns:
        (out [shard_seqlen, num_heads_q, head_dim] in q.dtype, lse [shard_seqlen, num_heads_q]
        fp32, not differentiable; with a sink, both include it). Collective: every rank of the
        group must call it. Under torch.compile it is one custom op each way (no graph break).
    """
    if sink is not None:
        check_sink(sink, q.shape[1], q.device)
    q, k, v = (t.contiguous() for t in (q, k, v))
    if torch.compiler.is_compiling():
        out, lse, _ = dist_attn_fwd_op(q, k, v, sink, id(runtime))
        return out, lse
    return DistAttnFunc.apply(q, k, v, runtime, sink)
