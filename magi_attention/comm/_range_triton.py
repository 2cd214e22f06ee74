"""Triton kernels for range gather / scatter-add: one program per (row, block of the row)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024  # elements of a row per program; a KV row is 2 * num_heads_kv * head_dim elements


@triton.jit
def _gather_rows_kernel(x_ptr, out_ptr, index_ptr, row_numel, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    keep = cols < row_numel
    src_row = tl.load(index_ptr + row).to(tl.int64)
    vals = tl.load(x_ptr + src_row * row_numel + cols, mask=keep)
    tl.store(out_ptr + row.to(tl.int64) * row_numel + cols, vals, mask=keep)


@triton.jit
def _scatter_add_rows_kernel(out_ptr, src_ptr, index_ptr, row_numel, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    keep = cols < row_numel
    dst_row = tl.load(index_ptr + row).to(tl.int64)
    vals = tl.load(src_ptr + row.to(tl.int64) * row_numel + cols, mask=keep)
    # repeated destination rows (a KV range needed by several ranks) must accumulate
    tl.atomic_add(out_ptr + dst_row * row_numel + cols, vals.to(out_ptr.dtype.element_ty), mask=keep)


def _grid(num_rows: int, row_numel: int):
    return (num_rows, triton.cdiv(row_numel, BLOCK))


def gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = x.new_empty((index.shape[0],) + tuple(x.shape[1:]))
    row_numel = x[0].numel() if x.shape[0] else 0
    if index.shape[0] and row_numel:
        _gather_rows_kernel[_grid(index.shape[0], row_numel)](x, out, index, row_numel,
                                                               BLOCK_SIZE=BLOCK)
    return out


def scatter_add_rows_(out: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    if not out.is_contiguous():
        raise ValueError("scatter_add_rows_ needs a contiguous output")
    src = src.to(out.dtype).contiguous()
    row_numel = out[0].numel() if out.shape[0] else 0
    if index.shape[0] and row_numel:
        _scatter_add_rows_kernel[_grid(index.shape[0], row_numel)](out, src, index, row_numel,
                                                                    BLOCK_SIZE=BLOCK)
    return out
