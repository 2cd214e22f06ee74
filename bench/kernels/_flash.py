"""How the FlashAttention family (fa2, fa3, fa4) runs a mask: one sliding window (full and causal
included) over each batch row, or varlen documents (cu_seqlens) over the packed batch."""
from __future__ import annotations

import importlib
from dataclasses import dataclass

import torch

from bench.masks import Mask, UnsupportedMask, convert


@dataclass(frozen=True)
class FlashPlan:
    """window: (left, right), -1 unbounded, for dense calls; cu_seqlens: int32 [num_docs + 1]
    over the packed ``batch * seqlen`` tokens for varlen calls (then ``causal`` says the kind)."""

    window: tuple[int, int] | None
    causal: bool
    cu_seqlens: torch.Tensor | None = None
    max_seqlen: int | None = None

    @property
    def varlen(self) -> bool:
        return self.cu_seqlens is not None


def flash_plan(mask: Mask, batch: int, device: torch.device | str, varlen_window: bool = False
               ) -> FlashPlan:
    """The plan for ``mask``; documents are tiled over the batch rows.

    Raises:
        UnsupportedMask: neither one window nor full/causal documents (both reasons given).
    """
    try:
        left, right = convert.to_window(mask)
        return FlashPlan(window=(left, right), causal=(left, right) == (-1, 0))
    except UnsupportedMask as e:
        window_reason = str(e)
    try:
        cu, is_causal = convert.to_cu_seqlens(mask)
    except UnsupportedMask as e:
        raise UnsupportedMask(f"not one window ({window_reason}) and not varlen documents ({e})")
    lens = [b - a for a, b in zip(cu[:-1], cu[1:])]
    packed = [0]
    for _ in range(batch):
        for n in lens:
            packed.append(packed[-1] + n)
    cu_t = torch.tensor(packed, dtype=torch.int32, device=device)
    return FlashPlan(window=None, causal=is_causal, cu_seqlens=cu_t, max_seqlen=max(lens))


def plan_reason(mask: Mask, varlen_window: bool = False) -> str | None:
    """None when a FlashAttention-style kernel can run ``mask`` (one window or plain documents),
    else why not; the predicate every flash-family adapter's ``supports`` ends with."""
    try:
        flash_plan(mask, 1, "cpu", varlen_window)
    except UnsupportedMask as e:
        return str(e)
    return None


def fa2_style_prepared(plan: FlashPlan, inputs, scale: float, flash_attn_func,
                       flash_attn_varlen_func):
    """flash_prepared for the FA2 / FA3 call signatures (window (-1, -1) = unbounded)."""

    def dense(q, k, v, causal, window):
        return flash_attn_func(q, k, v, softmax_scale=scale, causal=causal,
                               window_size=(-1, -1) if causal else window)

    def varlen(q, k, v, cu, m, causal):
        return flash_attn_varlen_func(q, k, v, cu, cu, m, m, softmax_scale=scale, causal=causal)

    return flash_prepared(plan, inputs, dense, varlen)


def import_error(module: str) -> str | None:
    """None when ``module`` imports, else the ImportError text (for ``supports``)."""
    try:
        importlib.import_module(module)
    except ImportError as e:  # a missing peer is a row with status unsupported, never a crash
        return f"{module} not importable: {e}"
    return None


def first(result):
    """Flash functions return out or (out, lse, ...) depending on the version; take out."""
    return result[0] if isinstance(result, (tuple, list)) else result


def flash_prepared(plan: FlashPlan, inputs, dense_call, varlen_call):
    """Prepared for a FlashAttention-style pair of calls.

    ``dense_call(q, k, v, causal, window)`` gets bshd tensors and the plan's window (-1
    unbounded); ``varlen_call(q, k, v, cu_seqlens, max_seqlen, causal)`` gets thd tensors.
    """
    from ._autograd import autograd_prepared

    if plan.varlen:
        cu, max_seqlen, causal = plan.cu_seqlens, plan.max_seqlen, plan.causal
        return autograd_prepared(lambda q, k, v: first(varlen_call(q, k, v, cu, max_seqlen, causal)),
                                 inputs, "thd", extra={"mask": f"varlen, causal={causal}"})
    window, causal = plan.window, plan.causal
    return autograd_prepared(lambda q, k, v: first(dense_call(q, k, v, causal, window)),
                             inputs, "bshd", extra={"mask": f"window={window}"})
