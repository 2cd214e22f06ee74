"""flex_flash_attn_func as torch.library custom ops: the path torch.compile traces.

Under torch.compile, ``flex_flash_attn_func`` calls ``flex_flash_attn_fwd_op`` (whose autograd
formula calls ``flex_flash_attn_bwd_op``) instead of the autograd.Function the eager path runs,
so a compiled step holds the attention as one opaque node in its forward and backward graphs,
with no graph break. The mask travels as the plan's handle (``common.handles``: the id of the
FlexAttnPlan, a constant of the graph guarded on the plan's identity), or as the range tensors
themselves (their plan is then found inside the op by the tensors' identity, as in an eager
call). The ops return contiguous tensors: the layout their fake implementations promise.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..common.handles import lookup
from ..kernels.plan import FlexAttnPlan
from ._backends import load_backend
from ._resolve import resolve_call
from ._sink import apply_sink, check_sink, sink_grad
from ._validate import validate_qkv, validate_range_tensors

# plan_handle of a call that passes range tensors instead of a plan
NO_PLAN = -1


def _mask_args(handle: int, q_ranges, k_ranges, attn_type_map):
    """(mask, k_ranges, attn_type_map) as ``resolve_call`` takes them."""
    if handle != NO_PLAN:
        return lookup(handle, FlexAttnPlan), None, None
    return q_ranges, k_ranges, attn_type_map


def _check_metadata(q, k, v, sink, handle, q_ranges, k_ranges, attn_type_map) -> None:
    """The per-call checks that need no tensor values: at trace time, on fake tensors."""
    validate_qkv(q, k, v)
    if handle != NO_PLAN:
        lookup(handle, FlexAttnPlan).check_shapes(q.shape[0], k.shape[0])
    else:
        validate_range_tensors(q, q_ranges, k_ranges, attn_type_map)
    if sink is not None:
        check_sink(sink, q.shape[1], q.device)


def _empty_f32(like: Tensor, size: int) -> Tensor:
    return like.new_empty((size,), dtype=torch.float32)


@torch.library.custom_op("magi_attention::flex_flash_attn_fwd", mutates_args=())
def flex_flash_attn_fwd_op(q: Tensor, k: Tensor, v: Tensor, sink: Optional[Tensor],
                           plan_handle: int, q_ranges: Optional[Tensor],
                           k_ranges: Optional[Tensor], attn_type_map: Optional[Tensor],
                           softmax_scale: Optional[float], softcap: float, backend: str,
                           deterministic: bool, return_max_logits: bool
                           ) -> tuple[Tensor, Tensor, Tensor]:
    """(out, lse, max_logits: [num_heads_q], or [0] when not asked for)."""
    plan, name, scale = resolve_call(
        q, k, v, *_mask_args(plan_handle, q_ranges, k_ranges, attn_type_map), softmax_scale,
        backend, return_max_logits)
    if sink is not None:
        check_sink(sink, q.shape[1], q.device)
    out, lse, max_logits = load_backend(name).fwd(q, k, v, plan, scale, softcap,
                                                  return_max_logits)
    if sink is not None:
        out, lse = apply_sink(out, lse, sink)
    if max_logits is None:
        max_logits = _empty_f32(q, 0)
    return out.contiguous(), lse.contiguous(), max_logits


@flex_flash_attn_fwd_op.register_fake
def _fwd_fake(q, k, v, sink, plan_handle, q_ranges, k_ranges, attn_type_map, softmax_scale,
              softcap, backend, deterministic, return_max_logits):
    _check_metadata(q, k, v, sink, plan_handle, q_ranges, k_ranges, attn_type_map)
    return (q.new_empty(q.shape), q.new_empty(q.shape[:2], dtype=torch.float32),
            _empty_f32(q, q.shape[1] if return_max_logits else 0))


@torch.library.custom_op("magi_attention::flex_flash_attn_bwd", mutates_args=())
def flex_flash_attn_bwd_op(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor,
                           lse: Tensor, sink: Optional[Tensor], plan_handle: int,
                           q_ranges: Optional[Tensor], k_ranges: Optional[Tensor],
                           attn_type_map: Optional[Tensor], softmax_scale: Optional[float],
                           softcap: float, backend: str, deterministic: bool,
                           return_max_logits: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(dq, dk, dv, dsink: like sink, or [0] without one) from the forward's out and lse."""
    # the forward's return_max_logits: "auto" resolves to the same backend both ways
    plan, name, scale = resolve_call(
        q, k, v, *_mask_args(plan_handle, q_ranges, k_ranges, attn_type_map), softmax_scale,
        backend, return_max_logits)
    dq, dk, dv = load_backend(name).bwd(dout.contiguous(), q, k, v, out, lse, plan, scale,
                                        softcap, deterministic)
    dsink = _empty_f32(q, 0) if sink is None else sink_grad(sink, out, lse, dout)
    return dq.contiguous(), dk.contiguous(), dv.contiguous(), dsink


@flex_flash_attn_bwd_op.register_fake
def _bwd_fake(dout, q, k, v, out, lse, sink, plan_handle, q_ranges, k_ranges, attn_type_map,
              softmax_scale, softcap, backend, deterministic, return_max_logits):
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape),
            _empty_f32(q, 0) if sink is None else sink.new_empty(sink.shape))


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, sink, handle, q_ranges, k_ranges, attn_type_map, *args = inputs
    out, lse, max_logits = output
    ctx.save_for_backward(q, k, v, out, lse, sink, q_ranges, k_ranges, attn_type_map)
    ctx.handle, ctx.args = handle, args
    ctx.mark_non_differentiable(lse, max_logits)


def _backward(ctx, dout, _dlse, _dmax):
    q, k, v, out, lse, sink, q_ranges, k_ranges, attn_type_map = ctx.saved_tensors
    dq, dk, dv, dsink = flex_flash_attn_bwd_op(dout, q, k, v, out, lse, sink, ctx.handle,
                                               q_ranges, k_ranges, attn_type_map, *ctx.args)
    dsink = dsink if sink is not None and ctx.needs_input_grad[3] else None
    return (dq, dk, dv, dsink) + (None,) * 9


flex_flash_attn_fwd_op.register_autograd(_backward, setup_context=_setup_context)


def compiled_call(q, k, v, mask, k_ranges, attn_type_map, sink, softmax_scale, softcap: float,
                  backend: str, deterministic: bool, return_max_logits: bool):
    """(out, lse, max_logits or None) through the custom op; ``mask`` a FlexAttnPlan or the
    q_ranges tensor."""
    if isinstance(mask, FlexAttnPlan):
        if k_ranges is not None or attn_type_map is not None:
            raise ValueError("pass either a FlexAttnPlan or (q_ranges, k_ranges, attn_type_map)")
        args = (id(mask), None, None, None)
    else:
        args = (NO_PLAN, mask, k_ranges, attn_type_map)
    out, lse, max_logits = flex_flash_attn_fwd_op(
        q, k, v, sink, *args, softmax_scale, float(softcap), backend, deterministic,
        return_max_logits)
    return out, lse, max_logits if return_max_logits else None
