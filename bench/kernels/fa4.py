"""fa4: FlashAttention-4 (the flash-attn-4 package, ``flash_attn.cute.interface``; CuTe DSL,
Hopper and Blackwell): dense full / causal / sliding window, and varlen documents. ``sink=True``
passes FA4's ``learnable_sink`` (one logit a q head: the logsumexp of the cell's sink logits,
which is the same softmax denominator)."""
from __future__ import annotations

import importlib.metadata

import torch

from bench.masks import Mask

from ._autograd import half_dtype, needs_cuda, sink_reason
from ._flash import flash_plan, flash_prepared, import_error, plan_reason
from .base import Inputs, KernelAdapter, Prepared, Shapes

MODULE = "flash_attn.cute.interface"
SUPPORTED_ARCH_MAJOR = (9, 10, 11)  # interface.py asserts arch // 10 in [9, 10, 11]
SUPPORTED_HEAD_DIMS = (64, 96, 128)


def _fa4_window(window: tuple[int, int]) -> tuple[int | None, int | None]:
    # FA4 spells "unbounded" None where FA2 uses -1
    return tuple(None if w < 0 else w for w in window)


class Fa4(KernelAdapter):
    name = "fa4"
    RUN_OPTIONS = frozenset({"sink"})

    def __init__(self, sink: bool = False) -> None:
        self.sink = bool(sink)

    def version(self) -> str:
        for dist in ("flash-attn-4", "flash_attn_4"):
            try:
                return f"flash-attn-4 {importlib.metadata.version(dist)}"
            except importlib.metadata.PackageNotFoundError:
                continue
        return "flash-attn-4 (not installed)"

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        reason = needs_cuda(device) or half_dtype(shapes.dtype) or import_error(MODULE)
        if reason:
            return reason
        major = torch.cuda.get_device_capability(device)[0]
        if major not in SUPPORTED_ARCH_MAJOR:
            return f"FA4 needs sm90/sm100/sm110, got sm{major}x"
        if shapes.head_dim not in SUPPORTED_HEAD_DIMS:
            return f"FA4 head_dim must be one of {SUPPORTED_HEAD_DIMS}, got {shapes.head_dim}"
        if self.sink:
            import inspect
            from flash_attn.cute.interface import flash_attn_func
            if "learnable_sink" not in inspect.signature(flash_attn_func).parameters:
                return "no attention sink (this flash-attn-4 has no learnable_sink)"
        return sink_reason(self.sink, shapes) or plan_reason(mask)

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        from flash_attn.cute.interface import flash_attn_func, flash_attn_varlen_func

        plan = flash_plan(mask, shapes.batch, device)
        scale = shapes.softmax_scale
        sink = {"learnable_sink": torch.logsumexp(inputs.sink, dim=0)} if self.sink else {}

        def dense(q, k, v, causal, window):
            return (flash_attn_func(q, k, v, softmax_scale=scale, causal=True, **sink) if causal
                    else flash_attn_func(q, k, v, softmax_scale=scale,
                                         window_size=_fa4_window(window), **sink))

        def varlen(q, k, v, cu, m, causal):
            return flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=m,
                                          max_seqlen_k=m, softmax_scale=scale, causal=causal,
                                          **sink)

        return flash_prepared(plan, inputs, dense, varlen)
