"""fa2_sdpa: FlashAttention-2 as built into torch (SDPA's FLASH_ATTENTION backend). It takes no
attn_mask, so only full and causal masks; for document and window masks see ``fa2`` (the
flash-attn package)."""
from __future__ import annotations

import torch
from torch.nn.attention import SDPBackend

from bench.masks import Mask, UnsupportedMask

from ._autograd import half_dtype, needs_cuda
from ._sdpa import backend_version, mask_arguments, sdpa_prepared
from .base import Inputs, KernelAdapter, Prepared, Shapes

BACKEND = SDPBackend.FLASH_ATTENTION


class Fa2Sdpa(KernelAdapter):
    name = "fa2_sdpa"

    def version(self) -> str:
        return "FA2 via " + backend_version(BACKEND)

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        reason = needs_cuda(device) or half_dtype(shapes.dtype)
        if reason:
            return reason
        try:
            mask_arguments(mask, shapes, device, dense_allowed=False)
        except UnsupportedMask as e:
            return str(e)
        return None

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        return sdpa_prepared(mask, shapes, device, inputs, BACKEND, dense_allowed=False)
