"""Test-only adapter (registry name ``testing_faulty``, absent from KERNEL_NAMES): the naive
kernel, except that named cells raise, so tests can check that a sweep records failures and
goes on. Cells are named ``"<mask>:<seqlen>"``."""
from __future__ import annotations

import torch

from bench.masks import Mask

from .base import Inputs, Prepared, Shapes
from .naive import Naive


class FaultyKernel(Naive):
    name = "testing_faulty"

    def __init__(self, error_cells: tuple[str, ...] = (), oom_cells: tuple[str, ...] = ()) -> None:
        self.error_cells = set(error_cells)
        self.oom_cells = set(oom_cells)

    def version(self) -> str:
        return "testing"

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        cell = f"{mask.name}:{shapes.seqlen}"
        if cell in self.error_cells:
            raise RuntimeError(f"injected failure in {cell}")
        prepared = super().prepare(mask, shapes, device, inputs)
        if cell in self.oom_cells:
            def fwd():
                raise torch.cuda.OutOfMemoryError(f"injected OOM in {cell}")
            prepared.fwd = fwd
        return prepared
