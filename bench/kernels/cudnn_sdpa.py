"""cudnn_sdpa: torch SDPA's cuDNN backend (CUDNN_ATTENTION): full and causal only (SDPA's
cuDNN path takes no attn_mask here). For cuDNN on documents and windows see ``cudnn``, the
nvidia-cudnn-frontend graph adapter."""
from __future__ import annotations

import torch
from torch.nn.attention import SDPBackend

from bench.masks import Mask

from ._sdpa import backend_version, full_or_causal_reason, sdpa_prepared
from .base import Inputs, KernelAdapter, Prepared, Shapes

BACKEND = SDPBackend.CUDNN_ATTENTION
OTHER_MASKS = "; for cuDNN with document and window masks see the cudnn adapter"


class CudnnSdpa(KernelAdapter):
    name = "cudnn_sdpa"

    def version(self) -> str:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        return f"cuDNN {cudnn} via " + backend_version(BACKEND)

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        return full_or_causal_reason(mask, shapes, device, OTHER_MASKS)

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        return sdpa_prepared(mask, shapes, device, inputs, BACKEND, dense_allowed=False)
