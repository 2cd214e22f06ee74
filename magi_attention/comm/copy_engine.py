"""Block copies of rows by the GPU's copy engines (the driver's cuMemcpy2DAsync), not by a kernel.

Why: the fused forward copies the own KV into its buffer while the cast is in flight, and the
cast's NCCL kernel started only when the copy kernel ended, whatever the copy's grid. A copy
engine moves the rows with no SM. Measured (session 45, 2 H100s): under the driver's eight
hardware queues the NCCL kernel waited for these copies just the same (the wait is in the
queues, not for SMs); under one queue it ran beside them and the prologue was shortest.

A copy is one 2-D transfer: ``height`` rows of ``width`` contiguous bytes, each side with its own
row pitch (e.g. rows of k into the k half of the fused k|v rows). Issued on the current CUDA
stream; nothing is synchronised.
"""
from __future__ import annotations

import ctypes
import functools
import math
from dataclasses import dataclass

import torch

from ._driver import check, driver_reason, libcuda

_MEMORYTYPE_DEVICE = 2  # CU_MEMORYTYPE_DEVICE


class _Memcpy2D(ctypes.Structure):
    """The driver's CUDA_MEMCPY2D."""
    _fields_ = [("srcXInBytes", ctypes.c_size_t), ("srcY", ctypes.c_size_t),
                ("srcMemoryType", ctypes.c_int), ("srcHost", ctypes.c_void_p),
                ("srcDevice", ctypes.c_uint64), ("srcArray", ctypes.c_void_p),
                ("srcPitch", ctypes.c_size_t),
                ("dstXInBytes", ctypes.c_size_t), ("dstY", ctypes.c_size_t),
                ("dstMemoryType", ctypes.c_int), ("dstHost", ctypes.c_void_p),
                ("dstDevice", ctypes.c_uint64), ("dstArray", ctypes.c_void_p),
                ("dstPitch", ctypes.c_size_t),
                ("WidthInBytes", ctypes.c_size_t), ("Height", ctypes.c_size_t)]


@dataclass(frozen=True)
class RowBlock:
    """One 2-D copy: ``height`` rows of ``width`` bytes from ``src`` (pitch ``src_pitch``) to
    ``dst`` (pitch ``dst_pitch``); addresses in bytes."""
    dst: int
    dst_pitch: int
    src: int
    src_pitch: int
    width: int
    height: int


def rows_contiguous(t: torch.Tensor) -> bool:
    """Whether each row t[i] is one contiguous run of memory (strides past dim 0 are those of a
    contiguous tensor; dims of size 1 take any stride)."""
    expected = 1
    for size, stride in zip(reversed(t.shape[1:]), reversed(t.stride()[1:])):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def row_block(dst: torch.Tensor, src: torch.Tensor) -> RowBlock:
    """The 2-D copy that makes ``dst[:] = src``: both [rows, ...] of one shape and dtype, each
    row contiguous in memory (any stride between rows). A clear error where they are not."""
    if dst.shape != src.shape or dst.dtype != src.dtype:
        raise ValueError(f"copy of {src.dtype} {tuple(src.shape)} into {dst.dtype} "
                         f"{tuple(dst.shape)}: shapes and dtypes must match")
    if dst.dim() < 1:
        raise ValueError("a row copy needs at least one dimension")
    for name, t in (("dst", dst), ("src", src)):
        if not rows_contiguous(t):
            raise ValueError(f"{name}'s rows are not contiguous (strides {t.stride()})")
    width = dst.element_size() * math.prod(dst.shape[1:])

    def pitch(t: torch.Tensor) -> int:  # one row: its width (the stride is then anything)
        return t.stride(0) * t.element_size() if t.shape[0] > 1 else width

    block = RowBlock(dst=dst.data_ptr(), dst_pitch=pitch(dst), src=src.data_ptr(),
                     src_pitch=pitch(src), width=width, height=dst.shape[0])
    if min(block.dst_pitch, block.src_pitch) < width:
        raise ValueError(f"rows overlap: a row stride below the row's {width} bytes")
    return block


@functools.lru_cache(maxsize=None)
def _memcpy_2d():
    """The driver's cuMemcpy2DAsync with its argument types set."""
    fn = libcuda().cuMemcpy2DAsync_v2
    fn.argtypes = [ctypes.POINTER(_Memcpy2D), ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def copy_engine_reason(t: torch.Tensor) -> str | None:
    """Why copy engines cannot copy ``t``'s rows here (None when they can)."""
    if t.device.type != "cuda":
        return f"copy engines copy CUDA memory, not {t.device.type}"
    return driver_reason()


def copy_rows_(dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """``dst[:] = src`` by a copy engine, on the current stream of ``dst``'s device (rows as
    ``row_block`` takes them). Returns dst."""
    reason = copy_engine_reason(dst) or copy_engine_reason(src)
    if reason is not None:
        raise ValueError(reason)
    if src.device != dst.device:
        raise ValueError(f"src on {src.device}, dst on {dst.device}")
    block = row_block(dst, src)
    if block.height == 0 or block.width == 0:
        return dst
    params = _Memcpy2D(srcMemoryType=_MEMORYTYPE_DEVICE, srcDevice=block.src,
                       srcPitch=block.src_pitch, dstMemoryType=_MEMORYTYPE_DEVICE,
                       dstDevice=block.dst, dstPitch=block.dst_pitch,
                       WidthInBytes=block.width, Height=block.height)
    with torch.cuda.device(dst.device):  # the driver copies in the current context
        stream = torch.cuda.current_stream(dst.device).cuda_stream
        code = _memcpy_2d()(ctypes.byref(params), ctypes.c_void_p(stream))
    check(code, "cuMemcpy2DAsync")
    return dst
