"""fa2_sdpa: FlashAttention-2 as built into torch (SDPA's FLASH_ATTENTION backend). It takes no
attn_mask, so only full and causal masks; for document and window masks see ``fa2`` (the
flash-attn package)."""
from __future__ import annotations

import torch
from torch.nn.attention import SDPBackend

from bench.masks import Mask

from ._sdpa import backend_version, full_or_causal_reason, sdpa_prepared
from .base import Inputs, KernelAdapter, Prepared, Shapes

BACKEND = SDPBackend.FLASH_ATTENTION


class Fa2Sdpa(KernelAdapter):
    name = "fa2_sdpa"

    def version(self) -> str:
        return "FA2 via " + backend_version(BACKEND)

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        return full_or_causal_reason(mask, shapes, device)

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        return sdpa_prepared(mask, shapes, device, inputs, BACKEND, dense_allowed=False)
