"""ffa_fa4: the project's Flex-Flash-Attention on its FA4 backend (AttnSlices -> FA4 block
sparsity + mask_mod); CUDA only. Run-level options ``sink`` and ``compile``: see ``_ffa``."""
from __future__ import annotations

import torch

import magi_attention
from bench.masks import Mask

from ._autograd import half_dtype, needs_cuda
from ._ffa import backend_reason, ffa_prepared, mask_reason
from .base import Inputs, KernelAdapter, Prepared, Shapes

BACKEND = "fa4"


class FfaFa4(KernelAdapter):
    name = "ffa_fa4"
    RUN_OPTIONS = frozenset({"sink", "compile"})

    def __init__(self, sink: bool = False, compile: bool = False) -> None:
        self.sink, self.compile = bool(sink), bool(compile)

    def version(self) -> str:
        return f"magi_attention {getattr(magi_attention, '__version__', 'dev')} (fa4 backend)"

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        return (needs_cuda(device) or half_dtype(shapes.dtype) or backend_reason(BACKEND)
                or mask_reason(mask, shapes, self.sink, self.compile))

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        return ffa_prepared(mask, shapes, device, inputs, BACKEND, self.sink, self.compile)
