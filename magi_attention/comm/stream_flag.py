"""A flag in device memory written by a CUDA stream itself (the driver's cuStreamWriteValue32),
not by a kernel.

Why: the fused forward may start before the cast's keys have landed, its programs waiting on a
flag only where they reach those keys (kernels.triton.gluon_forward.Arrival). A kernel that set
the flag would need an SM, which the waiting forward may hold: a stream memory operation needs
none. The write happens once everything issued before it on its stream has finished, with the
memory barrier that makes that work's writes visible first (the driver's default).
"""
from __future__ import annotations

import ctypes
import functools

import torch

from ._driver import check, driver_reason, libcuda


@functools.lru_cache(maxsize=None)
def _write_value_32():
    """The driver's cuStreamWriteValue32 with its argument types set."""
    fn = libcuda().cuStreamWriteValue32_v2
    fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def stream_flag_reason(device: torch.device) -> str | None:
    """Why a stream cannot write a flag on ``device`` here (None when it can)."""
    if torch.device(device).type != "cuda":
        return f"stream memory writes need a CUDA device, not {torch.device(device).type}"
    return driver_reason()


def new_flag(device: torch.device) -> torch.Tensor:
    """A zeroed int32 [1] flag on ``device``."""
    return torch.zeros(1, dtype=torch.int32, device=device)


def write_flag(flag: torch.Tensor, value: int, stream: torch.cuda.Stream | None = None) -> None:
    """Set ``flag`` (int32 [1] on a CUDA device) to ``value`` on ``stream`` (default: the
    device's current one) once the work issued there before it is done. Nothing synchronises."""
    if flag.dtype != torch.int32 or flag.numel() != 1:
        raise ValueError(f"a flag is one int32, got {flag.dtype} {tuple(flag.shape)}")
    reason = stream_flag_reason(flag.device)
    if reason is not None:
        raise ValueError(reason)
    if stream is None:
        stream = torch.cuda.current_stream(flag.device)
    with torch.cuda.device(flag.device):  # the driver writes in the current context
        code = _write_value_32()(ctypes.c_void_p(stream.cuda_stream), flag.data_ptr(),
                                 value & 0xFFFFFFFF, 0)
    check(code, "cuStreamWriteValue32")
