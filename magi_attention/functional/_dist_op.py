"""dist_attn_func (MagiAttention's calc_attn) as torch.library custom ops: the path
torch.compile traces.

Under torch.compile, ``dist_attn_func`` calls ``dist_attn_fwd_op`` (whose autograd formula calls
``dist_attn_bwd_op``), so a compiled step holds the whole distributed attention (casts, stage
kernels, merges; the backward's reduces) as one opaque node each way, with no graph break. The
runtime travels as its handle (``common.handles``). The forward also returns what the backward
takes instead of casting the remote KV again (``DistAttnRuntime.forward_saving``), an empty
buffer where it keeps nothing; its shape, which the fake implementation must know before
anything runs, is ``saved_kv_rows``'s. Every rank runs the same graph, so the collectives
inside the ops meet in the same order on every rank.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.distributed as dist
from torch import Tensor

from ..common.handles import lookup
from ._dist_runtime import DistAttnRuntime
from ._sink import apply_sink, sink_grad


def saved_kv_rows(runtime: DistAttnRuntime) -> int:
    """Rows of the KV buffer ``runtime.forward_saving`` returns for its backward (0: none),
    from the meta and the runtime's switches alone (they must not change between the trace and
    the run): the fused buffer where the fused stage runs whole or cut by rows, the received
    KV where the backward is cut by keys."""
    meta = runtime.meta
    if not meta.stages:
        return 0
    if meta.fused_split is not None and "fwd" in runtime.split:
        return meta.fused_layout.size
    if meta.fused is not None:
        if "bwd" in runtime.cut:
            return meta.stages[0].cast.recv_seqlen
        return meta.fused_layout.size
    return 0


def reduced_sink_grad(sink: Tensor, out: Tensor, lse: Tensor, dout: Tensor, group) -> Tensor:
    """dsink of the whole sequence: this rank's rows' share, summed over the cp group (the
    sink is replicated, each rank holds some of the rows)."""
    dsink = sink_grad(sink, out, lse, dout)
    dist.all_reduce(dsink, group=group)
    return dsink


def _empty_f32(like: Tensor) -> Tensor:
    return like.new_empty((0,), dtype=torch.float32)


@torch.library.custom_op("magi_attention::dist_attn_fwd", mutates_args=())
def dist_attn_fwd_op(q: Tensor, k: Tensor, v: Tensor, sink: Optional[Tensor],
                     runtime_handle: int) -> tuple[Tensor, Tensor, Tensor]:
    """(out, lse, kv_saved [saved_kv_rows, 2 * num_heads_kv, head_dim])."""
    runtime = lookup(runtime_handle, DistAttnRuntime)
    out, lse, kv_saved = runtime.forward_saving(q, k, v)
    if sink is not None:
        out, lse = apply_sink(out, lse, sink)
    if kv_saved is None:
        kv_saved = k.new_empty((0, 2 * k.shape[1], k.shape[2]))
    return out.to(q.dtype).contiguous(), lse.contiguous(), kv_saved


@dist_attn_fwd_op.register_fake
def _fwd_fake(q, k, v, sink, runtime_handle):
    rows = saved_kv_rows(lookup(runtime_handle, DistAttnRuntime))
    return (q.new_empty(q.shape), q.new_empty(q.shape[:2], dtype=torch.float32),
            k.new_empty((rows, 2 * k.shape[1], k.shape[2])))


@torch.library.custom_op("magi_attention::dist_attn_bwd", mutates_args=())
def dist_attn_bwd_op(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                     kv_saved: Tensor, sink: Optional[Tensor], runtime_handle: int
                     ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(dq, dk, dv, dsink: reduced over the cp group, or [0] without a sink)."""
    runtime = lookup(runtime_handle, DistAttnRuntime)
    dq, dk, dv = runtime.backward(dout, q, k, v, out, lse,
                                  kv_saved if kv_saved.shape[0] else None)
    dsink = (_empty_f32(q) if sink is None
             else reduced_sink_grad(sink, out, lse, dout, runtime.group))
    return dq.contiguous(), dk.contiguous(), dv.contiguous(), dsink


@dist_attn_bwd_op.register_fake
def _bwd_fake(dout, q, k, v, out, lse, kv_saved, sink, runtime_handle):
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape),
            _empty_f32(q) if sink is None else sink.new_empty(sink.shape))


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, sink, runtime_handle = inputs
    out, lse, kv_saved = output
    ctx.save_for_backward(q, k, v, out, lse, kv_saved, sink)
    ctx.runtime_handle = runtime_handle
    ctx.mark_non_differentiable(lse, kv_saved)


def _backward(ctx, dout, _dlse, _dkv):
    q, k, v, out, lse, kv_saved, sink = ctx.saved_tensors
    dq, dk, dv, dsink = dist_attn_bwd_op(dout, q, k, v, out, lse, kv_saved, sink,
                                         ctx.runtime_handle)
    return dq, dk, dv, (dsink if sink is not None and ctx.needs_input_grad[3] else None), None


dist_attn_fwd_op.register_autograd(_backward, setup_context=_setup_context)
