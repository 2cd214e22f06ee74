"""Shared by ffa and ffa_fa4: the project's flex_flash_attn_func on one backend, batch folded
into the packed sequence (each batch row's slices shifted by row * seqlen). The mask becomes a
FlexAttnPlan in ``prepare`` (validation, tile plans, FA4 tensors: untimed, reported as
build_ms), so a timed call only launches kernels, as in a training loop."""
from __future__ import annotations

import time

import torch

from bench.masks import Mask, convert
from magi_attention.functional import (BackendUnavailable, FlexAttnPlan, flex_flash_attn_func,
                                      load_backend)

from ._autograd import autograd_prepared
from .base import Inputs, Prepared, Shapes


def backend_reason(backend: str) -> str | None:
    """None when the FFA backend imports and reports itself available, else why not."""
    try:
        module = load_backend(backend)
    except BackendUnavailable as e:
        return str(e)
    if not getattr(module, "is_available", lambda: True)():
        return f"FFA backend {backend!r} is not available here"
    return None


def mask_reason(mask: Mask) -> str | None:
    if mask.head_slices is not None:
        return (f"flex_flash_attn_func takes one mask for all heads; {mask.name} has "
                f"{mask.num_mask_heads} per-head masks")
    return None


def ffa_prepared(mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs, backend: str
                 ) -> Prepared:
    """Raises BackendUnavailable (the runner records unsupported) when the backend cannot run."""
    q_ranges, k_ranges, types = convert.to_slices_tensors(mask, device=device)
    if shapes.batch > 1:
        offsets = (torch.arange(shapes.batch, device=device, dtype=torch.int32)
                   * shapes.seqlen).repeat_interleave(q_ranges.shape[0])[:, None]
        q_ranges = q_ranges.repeat(shapes.batch, 1) + offsets
        k_ranges = k_ranges.repeat(shapes.batch, 1) + offsets
        types = types.repeat(shapes.batch)
    scale = shapes.softmax_scale
    total = shapes.batch * shapes.seqlen
    start = time.perf_counter()
    plan = FlexAttnPlan.from_tensors(q_ranges, k_ranges, types, total, total)
    module = load_backend(backend)
    if hasattr(module, "prepare"):
        module.prepare(plan, shapes.head_dim, device,
                       group=shapes.num_heads_q // shapes.num_heads_kv)
    build_ms = (time.perf_counter() - start) * 1e3

    def attention(q, k, v):
        # no lse unless the backward needs it: the peers' inference calls write none either
        out, _ = flex_flash_attn_func(q, k, v, plan, softmax_scale=scale, backend=backend,
                                      return_lse=False)
        return out

    return autograd_prepared(attention, inputs, "thd", build_ms=build_ms,
                             extra={"backend": backend, "num_slices": str(len(mask.slices))})
