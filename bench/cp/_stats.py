"""Bytes each rank sends, per direction, and the NVTX range that names them."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch


@dataclass
class CommStats:
    """Bytes sent by this rank since the last ``reset``, keyed by direction ("fwd" / "bwd")."""

    sent_bytes: dict = field(default_factory=lambda: {"fwd": 0, "bwd": 0})

    def add(self, direction: str, nbytes: int) -> None:
        self.sent_bytes[direction] += int(nbytes)

    def reset(self) -> None:
        self.sent_bytes = {"fwd": 0, "bwd": 0}


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


@contextlib.contextmanager
def comm_range(name: str, num_bytes: int, device: torch.device):
    """An NVTX range ``"{name} {num_bytes}B"`` on CUDA (visible in nsys), nothing on CPU."""
    if device.type != "cuda":
        yield
        return
    torch.cuda.nvtx.range_push(f"{name} {num_bytes}B")
    try:
        yield
    finally:
        torch.cuda.nvtx.range_pop()
