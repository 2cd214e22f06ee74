"""Range gather and range scatter-add over the token dimension: torch on CPU, Triton on CUDA.

Both take the ranges as a flat int64 token index (``GroupCollectiveArgs.send_index``, built once
per device), so each is one pass over the moved rows.
"""
from __future__ import annotations

import torch

BACKENDS = ("auto", "torch", "triton")


def _use_triton(x: torch.Tensor, backend: str) -> bool:
    if backend not in BACKENDS:
        raise ValueError(f"unknown range-op backend {backend!r}; expected one of {BACKENDS}")
    if backend == "torch" or (backend == "auto" and x.device.type != "cuda"):
        return False
    try:
        from . import _range_triton  # noqa: F401
    except ImportError:
        if backend == "triton":
            raise
        return False
    return True


def range_gather(x: torch.Tensor, index: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """x: [seqlen, ...] -> x[index]: [len(index), ...]."""
    if _use_triton(x, backend):
        from ._range_triton import gather_rows
        return gather_rows(x, index)
    return x.index_select(0, index)


def range_scatter_add_(out: torch.Tensor, index: torch.Tensor, src: torch.Tensor,
                       backend: str = "auto") -> torch.Tensor:
    """out[index[i]] += src[i] for every row i (repeated indices accumulate); returns out."""
    if src.shape[0] != index.shape[0]:
        raise ValueError(f"src has {src.shape[0]} rows, index {index.shape[0]}")
    if _use_triton(out, backend):
        from ._range_triton import scatter_add_rows_
        return scatter_add_rows_(out, index, src)
    return out.index_add_(0, index, src.to(out.dtype))
