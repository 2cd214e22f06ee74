"""all_to_all_v: every rank sends a different number of rows to every other rank (NCCL or gloo)."""
from __future__ import annotations

from typing import Sequence

import torch
import torch.distributed as dist

from .work import WorkHandle, nvtx_range, on_stream


def all_to_all_v(send: torch.Tensor, send_split_sizes: Sequence[int],
                 recv_split_sizes: Sequence[int], group=None, stream=None,
                 name: str = "all_to_all_v", out: torch.Tensor | None = None) -> WorkHandle:
    """Send ``send[rows of split d]`` to group rank d; receive ``recv_split_sizes[s]`` rows from s.

    send: [sum(send_split_sizes), *row_shape]. ``wait()`` returns
    recv: [sum(recv_split_sizes), *row_shape], the parts in source-rank order (written into
    ``out`` when given: a contiguous buffer of that shape, e.g. the tail of a larger one). Runs
    asynchronously (gloo's all_to_all_single takes uneven splits, as NCCL's does); with a CUDA
    ``stream`` the collective is issued there.
    """
    if send.shape[0] != sum(send_split_sizes):
        raise ValueError(f"send has {send.shape[0]} rows but send_split_sizes sum to "
                         f"{sum(send_split_sizes)}")
    comm_bytes = send.numel() * send.element_size()
    with nvtx_range(f"{name} send_bytes={comm_bytes}"), on_stream(stream):
        shape = (sum(recv_split_sizes),) + tuple(send.shape[1:])
        if out is not None and (tuple(out.shape) != shape or not out.is_contiguous()):
            raise ValueError(f"out must be contiguous {shape}, got {tuple(out.shape)}")
        recv = send.new_empty(shape) if out is None else out
        work = dist.all_to_all_single(recv, send.contiguous(), list(recv_split_sizes),
                                      list(send_split_sizes), group=group, async_op=True)

    def finish() -> torch.Tensor:
        if stream is not None:  # recv was allocated on the side stream; the caller uses it here
            recv.record_stream(torch.cuda.current_stream(stream.device))
        return recv

    return WorkHandle(work, finish, comm_bytes, name, keep_alive=(send,))
