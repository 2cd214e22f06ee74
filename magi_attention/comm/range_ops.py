"""Range gather and range scatter-add over the token dimension: torch on CPU, Triton on CUDA.

Both take the ranges as a flat int64 token index (``GroupCollectiveArgs.send_index``, built once
per device), so each is one pass over the moved rows.
"""
from __future__ import annotations

from typing import Sequence

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


def range_gather_stacked(xs: Sequence[torch.Tensor], index: torch.Tensor,
                         backend: str = "auto") -> torch.Tensor:
    """xs [seqlen, h_i, ...] -> [len(index), sum h_i, ...]: the rows ``index`` of each, side by
    side along dim 1 (k and v gathered straight into a k|v send buffer, with no k|v copy of
    the whole shard first)."""
    x0 = xs[0]
    out = x0.new_empty((index.shape[0], sum(x.shape[1] for x in xs)) + tuple(x0.shape[2:]))
    at = 0
    for x in xs:
        part = out[:, at:at + x.shape[1]]
        if _use_triton(x, backend):
            from ._range_triton import gather_rows
            gather_rows(x, index, out=part)
        else:
            part.copy_(x.index_select(0, index))
        at += x.shape[1]
    return out


def range_copy_stacked_(out: torch.Tensor, out_index: torch.Tensor, xs: Sequence[torch.Tensor],
                        index: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """out[out_index[i]] = the rows ``index[i]`` of each of ``xs`` side by side along dim 1 (the
    own k and v copied straight into the fused k|v buffer: on CUDA one pass writing whole rows
    where there are two of one shape). Returns out."""
    if index.shape[0] != out_index.shape[0]:
        raise ValueError(f"index has {index.shape[0]} rows, out_index {out_index.shape[0]}")
    if _use_triton(out, backend) and len(xs) == 2 and xs[0].shape[1:] == xs[1].shape[1:]:
        from ._range_triton import copy_rows_pair_
        return copy_rows_pair_(out, out_index, xs[0], xs[1], index)
    at = 0
    for x in xs:
        out[out_index, at:at + x.shape[1]] = x.index_select(0, index)
        at += x.shape[1]
    return out


def range_scatter_add_(out: torch.Tensor, index: torch.Tensor, src: torch.Tensor,
                       backend: str = "auto") -> torch.Tensor:
    """out[index[i]] += src[i] for every row i (repeated indices accumulate); returns out."""
    if src.shape[0] != index.shape[0]:
        raise ValueError(f"src has {src.shape[0]} rows, index {index.shape[0]}")
    if _use_triton(out, backend):
        from ._range_triton import scatter_add_rows_
        return scatter_add_rows_(out, index, src)
    return out.index_add_(0, index, src.to(out.dtype))


def range_add_(out: torch.Tensor, index: torch.Tensor, src: torch.Tensor,
               backend: str = "auto") -> torch.Tensor:
    """out[index[i]] += src[i] for *distinct* indices, summed in fp32 and rounded once to
    out's dtype (as an fp32 accumulator converted back would give); ``out`` and ``src`` may be
    column slices of wider buffers. Returns out."""
    if src.shape[0] != index.shape[0]:
        raise ValueError(f"src has {src.shape[0]} rows, index {index.shape[0]}")
    if _use_triton(out, backend) and out.dtype != torch.float64:
        from ._range_triton import add_rows_
        return add_rows_(out, index, src)
    acc = torch.promote_types(out.dtype, torch.float32)
    out[index] = (out[index].to(acc) + src.to(acc)).to(out.dtype)
    return out
