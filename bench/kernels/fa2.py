"""fa2: FlashAttention-2 from the flash-attn package: flash_attn_func (full, causal, sliding
window) and flash_attn_varlen_func (documents). flash-attn is a source distribution only; the
FA2 kernels built into torch are ``fa2_torch`` (dense, windows, documents) and ``fa2_sdpa``
(the same kernels behind SDPA: full and causal)."""
from __future__ import annotations

import torch

from bench.masks import Mask

from ._autograd import half_dtype, needs_cuda
from ._flash import fa2_style_prepared, flash_plan, import_error, plan_reason
from .base import Inputs, KernelAdapter, Prepared, Shapes

MODULE = "flash_attn"
NO_WHEEL = ("flash-attn is a source distribution only (no wheel on PyPI; its CUDA build takes "
            "long); the same FA2 kernels run as bundled in torch under fa2_torch")


class Fa2(KernelAdapter):
    name = "fa2"

    def version(self) -> str:
        try:
            import flash_attn
        except ImportError:
            return "flash-attn (not installed)"
        return f"flash-attn {getattr(flash_attn, '__version__', '?')}"

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        reason = needs_cuda(device) or half_dtype(shapes.dtype)
        if reason:
            return reason
        missing = import_error(MODULE)
        if missing:
            return f"{missing}; {NO_WHEEL}"
        import flash_attn
        if not hasattr(flash_attn, "flash_attn_varlen_func"):
            return (f"the installed flash_attn ({getattr(flash_attn, '__version__', '?')}) has no "
                    f"FA2 flash_attn_varlen_func (only the FA4 cute namespace?)")
        if shapes.head_dim > 256:
            return f"FA2 head_dim must be <= 256, got {shapes.head_dim}"
        return plan_reason(mask)

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        from flash_attn import flash_attn_func, flash_attn_varlen_func

        return fa2_style_prepared(flash_plan(mask, shapes.batch, device), inputs,
                                  shapes.softmax_scale, flash_attn_func, flash_attn_varlen_func)
