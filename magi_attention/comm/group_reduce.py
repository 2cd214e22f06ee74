"""group_reduce: send partial results on received ranges back to their owners and sum them in."""
from __future__ import annotations

import torch

from .all_to_all_v import all_to_all_v
from .args import GroupCollectiveArgs
from .range_ops import range_scatter_add_
from .work import WorkHandle


def group_reduce(partial: torch.Tensor, out: torch.Tensor, args: GroupCollectiveArgs, group=None,
                 stream=None, range_backend: str = "auto") -> WorkHandle:
    """The transpose of ``group_cast(x, args)``: owners receive every partial and add it in place.

    partial: [args.recv_seqlen, *row_shape], laid out like group_cast's received buffer.
    out: [local_seqlen, *row_shape], the owner's accumulator. ``wait()`` adds what arrived into
    ``out`` at ``args.send_ranges`` (a range sent to several ranks gets all their partials) and
    returns ``out``.
    """
    if partial.shape[0] != args.recv_seqlen:
        raise ValueError(f"partial has {partial.shape[0]} rows; the cast received "
                         f"{args.recv_seqlen}")
    handle = all_to_all_v(partial, args.recv_split_sizes, args.send_split_sizes, group, stream,
                          name="group_reduce")

    def finish() -> torch.Tensor:
        recv = handle.wait()
        return range_scatter_add_(out, args.send_index(out.device), recv, range_backend)

    return WorkHandle(None, finish, handle.comm_bytes, "group_reduce")
