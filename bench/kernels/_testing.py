"""Test-only adapter (registry name ``testing_faulty``, absent from KERNEL_NAMES): the naive
kernel, except that named cells raise or give wrong gradients (the forward stays right), so
tests can check that a sweep records failures, gates the backward and goes on. Cells are named
``"<mask>:<seqlen>"``."""
from __future__ import annotations

import torch

from bench.masks import Mask

from .base import Inputs, Prepared, Shapes
from .naive import Naive


class FaultyKernel(Naive):
    name = "testing_faulty"
    RUN_OPTIONS = frozenset()

    def __init__(self, error_cells: tuple[str, ...] = (), oom_cells: tuple[str, ...] = (),
                 wrong_grad_cells: tuple[str, ...] = ()) -> None:
        self.error_cells = set(error_cells)
        self.oom_cells = set(oom_cells)
        self.wrong_grad_cells = set(wrong_grad_cells)

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
        if cell in self.wrong_grad_cells:
            grads_bshd = prepared.grads_bshd

            def wrong_grads():
                dq, dk, dv = grads_bshd()
                return dq, dk, dv * 1.01  # 1% off: far above the fp32 bound, below bf16 noise
            prepared.grads_bshd = wrong_grads
        return prepared
