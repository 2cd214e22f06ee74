"""sdpa_math: torch SDPA's math backend (any device); masks other than full and causal go in as a
dense bool attn_mask."""
from __future__ import annotations

import torch
from torch.nn.attention import SDPBackend

from bench.masks import Mask

from ._sdpa import backend_version, sdpa_prepared
from .base import Inputs, KernelAdapter, Prepared, Shapes

BACKEND = SDPBackend.MATH


class SdpaMath(KernelAdapter):
    name = "sdpa_math"

    def version(self) -> str:
        return backend_version(BACKEND)

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        return None

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        return sdpa_prepared(mask, shapes, device, inputs, BACKEND, dense_allowed=True)
