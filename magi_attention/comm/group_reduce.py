"""group_reduce: send partial results on received ranges back to their owners and sum them in."""
from __future__ import annotations

from typing import Sequence

import torch

from .all_to_all_v import all_to_all_v
from .args import GroupCollectiveArgs
from .range_ops import range_add_, range_scatter_add_
from .work import WorkHandle


def group_reduce(partial: torch.Tensor, out: torch.Tensor | Sequence[torch.Tensor],
                 args: GroupCollectiveArgs, group=None, stream=None, range_backend: str = "auto"
                 ) -> WorkHandle:
    """The transpose of ``group_cast(x, args)``: owners receive every partial and add it in place.

    partial: [args.recv_seqlen, *row_shape], laid out like group_cast's received buffer.
    out: [local_seqlen, *row_shape], the owner's accumulator, or a tuple (dk, dv) of
    [local_seqlen, h_i, ...] that ``partial``'s dim 1 holds side by side, each added in its
    own dtype (only where ``args.sends_each_token_once``: one partial per row, summed in fp32
    and rounded once, as an fp32 accumulator converted back would give). ``wait()`` adds what
    arrived into ``out`` at ``args.send_ranges`` (a range sent to several ranks gets all their
    partials) and returns ``out``.
    """
    outs = None if isinstance(out, torch.Tensor) else tuple(out)
    if outs is not None and not args.sends_each_token_once:
        raise ValueError("group_reduce into (dk, dv) needs each token sent once; reduce into "
                         "one fp32 accumulator instead")
    if partial.shape[0] != args.recv_seqlen:
        raise ValueError(f"partial has {partial.shape[0]} rows; the cast received "
                         f"{args.recv_seqlen}")
    handle = all_to_all_v(partial, args.recv_split_sizes, args.send_split_sizes, group, stream,
                          name="group_reduce")

    def finish():
        recv = handle.wait()
        if outs is None:
            return range_scatter_add_(out, args.send_index(out.device), recv, range_backend)
        index, at = args.send_index(outs[0].device), 0
        for o in outs:
            range_add_(o, index, recv[:, at:at + o.shape[1]], range_backend)
            at += o.shape[1]
        return outs

    return WorkHandle(None, finish, handle.comm_bytes, "group_reduce")
