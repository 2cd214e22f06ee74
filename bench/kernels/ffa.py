"""ffa: the project's Flex-Flash-Attention, Triton backend on CUDA; on CPU the pure-torch
reference backend (labelled so in the row's message; a correctness baseline, not a kernel).
Run-level options ``sink`` and ``compile``: see ``_ffa``."""
from __future__ import annotations

import torch

import magi_attention
from bench.masks import Mask

from ._ffa import backend_reason, ffa_prepared, mask_reason
from .base import Inputs, KernelAdapter, Prepared, Shapes


def _backend(device: torch.device) -> str:
    return "triton" if device.type == "cuda" else "reference"


class Ffa(KernelAdapter):
    name = "ffa"
    RUN_OPTIONS = frozenset({"sink", "compile"})

    def __init__(self, sink: bool = False, compile: bool = False) -> None:
        self.sink, self.compile = bool(sink), bool(compile)

    def version(self) -> str:
        return f"magi_attention {getattr(magi_attention, '__version__', 'dev')}"

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        return backend_reason(_backend(device)) or mask_reason(mask, shapes, self.sink,
                                                               self.compile)

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        return ffa_prepared(mask, shapes, device, inputs, _backend(device), self.sink,
                            self.compile)
