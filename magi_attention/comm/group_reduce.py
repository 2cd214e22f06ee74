"""group_reduce: send partial results on received ranges back to their owners and sum them in."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from .all_to_all_v import all_to_all_v
from .args import GroupCollectiveArgs
from .range_ops import range_add_, range_scatter_add_
from .work import WorkHandle


def group_reduce(partial: torch.Tensor,
                 out: torch.Tensor | Sequence[torch.Tensor] | Callable[[], Any],
                 args: GroupCollectiveArgs, group=None, stream=None, range_backend: str = "auto",
                 deterministic: bool = False) -> WorkHandle:
    """The transpose of ``group_cast(x, args)``: owners receive every partial and add it in place.

    partial: [args.recv_seqlen, *row_shape], laid out like group_cast's received buffer.
    out: [local_seqlen, *row_shape], the owner's accumulator, or a tuple (dk, dv) of
    [local_seqlen, h_i, ...] that ``partial``'s dim 1 holds side by side, each added in its
    own dtype (only where ``args.sends_each_token_once``: one partial per row, summed in fp32
    and rounded once, as an fp32 accumulator converted back would give). ``wait()`` adds what
    arrived into ``out`` at ``args.send_ranges`` (a range sent to several ranks gets all their
    partials) and returns ``out``. ``out`` may also be a function returning either, called at
    ``wait()``: the partial can then be sent before the accumulator exists (the cut backward
    sends the received keys' dK/dV while the own keys' kernel makes dk, dv).

    ``deterministic``: a row that several ranks return is summed in source-rank order, the same
    order every run (``ordered_scatter_add_``), instead of by one scatter-add whose CUDA atomics
    add in arrival order. It costs one launch per source rank instead of one, and only where
    some token went to several ranks: else each row receives one partial and the single
    scatter-add is already repeatable.
    """
    if not callable(out):
        _check_out(out, args)
    if partial.shape[0] != args.recv_seqlen:
        raise ValueError(f"partial has {partial.shape[0]} rows; the cast received "
                         f"{args.recv_seqlen}")
    handle = all_to_all_v(partial, args.recv_split_sizes, args.send_split_sizes, group, stream,
                          name="group_reduce")

    def finish():
        recv = handle.wait()
        acc = out
        if callable(out):
            acc = out()
            _check_out(acc, args)
        if isinstance(acc, torch.Tensor):
            index = args.send_index(acc.device)
            if deterministic and not args.sends_each_token_once:
                return ordered_scatter_add_(acc, index, recv, args.send_split_sizes,
                                            range_backend)
            return range_scatter_add_(acc, index, recv, range_backend)
        outs = tuple(acc)
        index, at = args.send_index(outs[0].device), 0
        for o in outs:
            range_add_(o, index, recv[:, at:at + o.shape[1]], range_backend)
            at += o.shape[1]
        return outs

    return WorkHandle(None, finish, handle.comm_bytes, "group_reduce")


def ordered_scatter_add_(out: torch.Tensor, index: torch.Tensor, src: torch.Tensor,
                         sizes: Sequence[int], range_backend: str = "auto") -> torch.Tensor:
    """out[index[i]] += src[i], one block of ``sizes`` (one source rank's rows, distinct within
    the block) after the other: a row in several blocks is summed in block order, each block
    a plain read-add-write (no atomics). Returns out."""
    at = 0
    for n in sizes:
        if n:
            range_add_(out, index[at:at + n], src[at:at + n], range_backend)
        at += n
    return out


def _check_out(out, args: GroupCollectiveArgs) -> None:
    if not isinstance(out, torch.Tensor) and not args.sends_each_token_once:
        raise ValueError("group_reduce into (dk, dv) needs each token sent once; reduce into "
                         "one fp32 accumulator instead")
