"""fa3: FlashAttention-3 (Hopper; the ``flash_attn_interface`` module built from flash-attention's
hopper/ folder): dense full / causal / sliding window, and varlen documents."""
from __future__ import annotations

import importlib.metadata

import torch

from bench.masks import Mask

from ._autograd import half_dtype, needs_cuda
from ._flash import fa2_style_prepared, flash_plan, import_error, plan_reason
from .base import Inputs, KernelAdapter, Prepared, Shapes

MODULE = "flash_attn_interface"


class Fa3(KernelAdapter):
    name = "fa3"

    def version(self) -> str:
        for dist in ("flash_attn_3", "flash-attn-3", "flashattn-hopper"):
            try:
                return f"flash-attn-3 {importlib.metadata.version(dist)}"
            except importlib.metadata.PackageNotFoundError:
                continue
        return "flash-attn-3 (not installed)"

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        reason = needs_cuda(device) or half_dtype(shapes.dtype) or import_error(MODULE)
        if reason:
            return reason
        if torch.cuda.get_device_capability(device)[0] != 9:
            return "FA3 is built for sm90 (Hopper) only"
        return plan_reason(mask)

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        from flash_attn_interface import flash_attn_func, flash_attn_varlen_func

        return fa2_style_prepared(flash_plan(mask, shapes.batch, device), inputs,
                                  shapes.softmax_scale, flash_attn_func, flash_attn_varlen_func)
