"""Shared by ffa and ffa_fa4: the project's flex_flash_attn_func on one backend, batch folded
into the packed sequence (each batch row's slices shifted by row * seqlen). The mask becomes a
FlexAttnPlan in ``prepare`` (validation, tile plans, FA4 tensors: untimed, reported as
build_ms), so a timed call only launches kernels, as in a training loop. A per-KV-head mask
(block_sparse, var_block_sparse) runs through flex_flash_attn_per_kv_head: one plan per KV head,
the heads' kernels on side streams, one out and one set of gradients (no slice and cat).

Run-level options: ``sink`` passes the cell's sink logits (``Inputs.sink``) to every call;
``compile`` times ``torch.compile(fullgraph=True)`` of the call (FFA is one custom op under
compile), compiled and warmed up in ``prepare``. Neither applies to per-KV-head masks."""
from __future__ import annotations

import time

import torch

from bench.masks import Mask, convert
from magi_attention.functional import (BackendUnavailable, FlexAttnPlan, flex_flash_attn_func,
                                      flex_flash_attn_per_kv_head, load_backend)

from ._autograd import autograd_prepared, sink_reason
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


def mask_reason(mask: Mask, shapes: Shapes, sink: bool = False, compile: bool = False
                ) -> str | None:
    if mask.head_slices is not None and mask.num_mask_heads != shapes.num_heads_kv:
        return (f"{mask.name} has {mask.num_mask_heads} per-head masks for "
                f"{shapes.num_heads_kv} KV heads")
    if mask.head_slices is not None and sink:
        return "no attention sink on per-KV-head masks (flex_flash_attn_per_kv_head)"
    if mask.head_slices is not None and compile:
        return "compile=true: per-KV-head masks run one call a head on side streams, no custom op"
    return sink_reason(sink, shapes)


def _slices_tensors(mask: Mask, shapes: Shapes, device: torch.device, head: int | None):
    """(q_ranges, k_ranges, types) of KV head ``head``'s mask (None: the shared one), batch
    rows folded into the packed sequence."""
    q_ranges, k_ranges, types = convert.to_slices_tensors(mask, device=device, head=head)
    if shapes.batch > 1:
        offsets = (torch.arange(shapes.batch, device=device, dtype=torch.int32)
                   * shapes.seqlen).repeat_interleave(q_ranges.shape[0])[:, None]
        q_ranges = q_ranges.repeat(shapes.batch, 1) + offsets
        k_ranges = k_ranges.repeat(shapes.batch, 1) + offsets
        types = types.repeat(shapes.batch)
    return q_ranges, k_ranges, types


def ffa_prepared(mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs, backend: str,
                 sink: bool = False, compile: bool = False) -> Prepared:
    """Raises BackendUnavailable (the runner records unsupported) when the backend cannot run."""
    scale = shapes.softmax_scale
    total = shapes.batch * shapes.seqlen
    group = shapes.num_heads_q // shapes.num_heads_kv
    per_head = mask.head_slices is not None
    start = time.perf_counter()
    module = load_backend(backend)
    plans = []
    for head in range(mask.num_mask_heads) if per_head else [None]:
        plan = FlexAttnPlan.from_tensors(*_slices_tensors(mask, shapes, device, head), total, total)
        if hasattr(module, "prepare"):  # a per-head call has the same group: one KV head's
            module.prepare(plan, shapes.head_dim, device, group=group)
        plans.append(plan)
    build_ms = (time.perf_counter() - start) * 1e3

    sink_logits = inputs.sink if sink else None

    def attention(q, k, v):
        # no lse unless the backward needs it: the peers' inference calls write none either
        if per_head:
            out, _ = flex_flash_attn_per_kv_head(q, k, v, plans, softmax_scale=scale,
                                                 backend=backend, return_lse=False)
        else:
            out, _ = flex_flash_attn_func(q, k, v, plans[0], softmax_scale=scale,
                                          backend=backend, return_lse=False, sink=sink_logits)
        return out

    extra = {"backend": backend, "num_slices": str(len(mask.slices))}
    if per_head:
        streams = ", side streams" if device.type == "cuda" else ""
        extra["calls"] = f"{len(plans)} (one a KV head{streams})"
    if sink:
        extra["sink"] = f"{inputs.sink.shape[0]} a head"
    if compile:
        extra["compiled"] = "torch.compile(fullgraph=True)"
        attention = torch.compile(attention, fullgraph=True)
    prepared = autograd_prepared(attention, inputs, "thd", build_ms=build_ms, extra=extra)
    if compile:  # both graphs compiled here, untimed (the inference one and the training one)
        prepared.fwd()
        prepared.bwd()
    return prepared
