"""Triton kernels for range gather / scatter-add: one program per (row, block of the row).

A row is the contiguous block of one token (``x[i]``); the row strides of the source and the
output are arguments, so a column slice of a wider buffer (k's heads of a stacked k|v buffer)
is read or written in place.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..kernels.triton.launch import cached_launch

BLOCK = 1024  # elements of a row per program; a KV row is 2 * num_heads_kv * head_dim elements


@triton.jit
def _program_rows(index_ptr, row_numel, BLOCK_SIZE: tl.constexpr):
    """This program's (moved row, indexed row, its columns, their mask)."""
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    return row.to(tl.int64), tl.load(index_ptr + row).to(tl.int64), cols, cols < row_numel


@triton.jit
def _gather_rows_kernel(x_ptr, out_ptr, index_ptr, row_numel, x_stride, out_stride,
                        BLOCK_SIZE: tl.constexpr):
    row, src_row, cols, keep = _program_rows(index_ptr, row_numel, BLOCK_SIZE)
    vals = tl.load(x_ptr + src_row * x_stride + cols, mask=keep)
    tl.store(out_ptr + row * out_stride + cols, vals, mask=keep)


@triton.jit
def _scatter_add_rows_kernel(out_ptr, src_ptr, index_ptr, row_numel, BLOCK_SIZE: tl.constexpr):
    row, dst_row, cols, keep = _program_rows(index_ptr, row_numel, BLOCK_SIZE)
    vals = tl.load(src_ptr + row * row_numel + cols, mask=keep)
    # repeated destination rows (a KV range needed by several ranks) must accumulate
    tl.atomic_add(out_ptr + dst_row * row_numel + cols, vals.to(out_ptr.dtype.element_ty), mask=keep)


@triton.jit
def _add_rows_kernel(out_ptr, src_ptr, index_ptr, row_numel, out_stride, src_stride,
                     BLOCK_SIZE: tl.constexpr):
    row, dst_row, cols, keep = _program_rows(index_ptr, row_numel, BLOCK_SIZE)
    dst = out_ptr + dst_row * out_stride + cols
    vals = tl.load(src_ptr + row * src_stride + cols, mask=keep).to(tl.float32)
    # distinct destination rows: a plain read-add-write, summed in fp32 and rounded once
    total = tl.load(dst, mask=keep).to(tl.float32) + vals
    tl.store(dst, total.to(out_ptr.dtype.element_ty), mask=keep)


@triton.jit
def _copy_rows_pair_kernel(a_ptr, b_ptr, out_ptr, index_ptr, out_index_ptr, row_numel, a_stride,
                           b_stride, out_stride, BLOCK_SIZE: tl.constexpr):
    row, src_row, cols, keep = _program_rows(index_ptr, row_numel, BLOCK_SIZE)
    dst = out_ptr + tl.load(out_index_ptr + row).to(tl.int64) * out_stride + cols
    tl.store(dst, tl.load(a_ptr + src_row * a_stride + cols, mask=keep), mask=keep)
    tl.store(dst + row_numel, tl.load(b_ptr + src_row * b_stride + cols, mask=keep), mask=keep)


_launch_gather = cached_launch(_gather_rows_kernel)
_launch_copy_pair = cached_launch(_copy_rows_pair_kernel)
_launch_scatter_add = cached_launch(_scatter_add_rows_kernel)
_launch_add = cached_launch(_add_rows_kernel)


def _key(*tensors: torch.Tensor, strides: tuple = ()):
    """What fixes every integer argument and dtype of a row kernel (cached_launch): the first
    tensor's row shape, the strides passed, every tensor's dtype; None off the GPU."""
    if not tensors[0].is_cuda:
        return None
    return (tuple(tensors[0].shape[1:]), strides, *(t.dtype for t in tensors))


def _grid(num_rows: int, row_numel: int):
    return (num_rows, triton.cdiv(row_numel, BLOCK))


def _rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` itself when each token's row is one contiguous block (any row stride), else a
    contiguous copy."""
    return x if x.shape[0] == 0 or x[0].is_contiguous() else x.contiguous()


def gather_rows(x: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None = None
                ) -> torch.Tensor:
    """x[index] into a new tensor, or into ``out`` (rows of ``x``'s row shape, any row stride)."""
    x = _rows(x)
    if out is None:
        out = x.new_empty((index.shape[0],) + tuple(x.shape[1:]))
    row_numel = x[0].numel() if x.shape[0] else 0
    if index.shape[0] and row_numel:
        _launch_gather(_grid(index.shape[0], row_numel),
                       _key(x, out, index, strides=(x.stride(0), out.stride(0))),
                       x, out, index, row_numel, x.stride(0), out.stride(0), BLOCK_SIZE=BLOCK)
    return out


def copy_rows_pair_(out: torch.Tensor, out_index: torch.Tensor, a: torch.Tensor,
                    b: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """out[out_index[i]] = a[index[i]] | b[index[i]] side by side (a and b of one row shape,
    each row of ``out`` one contiguous block of both, any row stride): both halves of a row in
    one program, so one launch writes whole rows. Returns out."""
    a, b = _rows(a), _rows(b)
    row_numel = a[0].numel() if a.shape[0] else 0
    if _rows(out) is not out or (out.shape[0] and out[0].numel() != 2 * row_numel):
        raise ValueError(f"copy_rows_pair_ needs contiguous output rows of 2 x {row_numel} "
                         f"elements, got {tuple(out.shape)} with strides {out.stride()}")
    if index.shape[0] and row_numel:
        _launch_copy_pair(_grid(index.shape[0], row_numel),
                          _key(a, b, out, index, strides=(a.stride(0), b.stride(0),
                                                          out.stride(0))),
                          a, b, out, index, out_index, row_numel, a.stride(0), b.stride(0),
                          out.stride(0), BLOCK_SIZE=BLOCK)
    return out


def scatter_add_rows_(out: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    if not out.is_contiguous():
        raise ValueError("scatter_add_rows_ needs a contiguous output")
    src = src.to(out.dtype).contiguous()
    row_numel = out[0].numel() if out.shape[0] else 0
    if index.shape[0] and row_numel:
        _launch_scatter_add(_grid(index.shape[0], row_numel), _key(out, src, index),
                            out, src, index, row_numel, BLOCK_SIZE=BLOCK)
    return out


def add_rows_(out: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """out[index[i]] += src[i] for distinct ``index`` values (any row strides of both)."""
    if _rows(out) is not out:
        raise ValueError("add_rows_ needs each row of the output contiguous")
    src = _rows(src)
    row_numel = out[0].numel() if out.shape[0] else 0
    if index.shape[0] and row_numel:
        _launch_add(_grid(index.shape[0], row_numel),
                    _key(out, src, index, strides=(out.stride(0), src.stride(0))),
                    out, src, index, row_numel, out.stride(0), src.stride(0), BLOCK_SIZE=BLOCK)
    return out
