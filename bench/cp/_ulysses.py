"""Ulysses all-to-all: sequence-sharded, all heads <-> whole group sequence, heads/U each.

Rank u of a Ulysses group of U ranks holds ``[lengths[u], H, D]``. ``seq_to_head`` sends head
chunk u' to rank u' and returns ``[sum(lengths), H / U, D]``: the group's tokens in member order
(the concatenation of the members' layouts) with this rank's heads. ``head_to_seq`` inverts it.
Both are autograd functions whose backward is the other one. Uneven lengths are fine
(``all_to_all_single`` with split sizes; gloo implements it too).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ._stats import CommStats, comm_range, nbytes


def _all_to_all(x: torch.Tensor, out_rows: list[int], in_rows: list[int], group,
                stats: CommStats, direction: str) -> torch.Tensor:
    out = x.new_empty((sum(out_rows),) + tuple(x.shape[1:]))
    me = dist.get_rank(group)
    with comm_range("all_to_all", nbytes(x), x.device):
        dist.all_to_all_single(out, x.contiguous(), out_rows, in_rows, group=group)
    row = nbytes(x) // max(x.shape[0], 1)
    stats.add(direction, row * (sum(in_rows) - in_rows[me]))
    return out


def _seq_to_head(x, lengths, group, stats, direction):
    size = len(lengths)
    seqlen, heads, dim = x.shape
    chunks = x.reshape(seqlen, size, heads // size, dim).transpose(0, 1).reshape(-1, heads // size, dim)
    return _all_to_all(chunks, lengths, [seqlen] * size, group, stats, direction)


def _head_to_seq(x, lengths, group, stats, direction):
    size, me = len(lengths), dist.get_rank(group)
    local_heads, dim = x.shape[1:]
    out = _all_to_all(x, [lengths[me]] * size, lengths, group, stats, direction)
    return out.reshape(size, lengths[me], local_heads, dim).transpose(0, 1).reshape(
        lengths[me], size * local_heads, dim)


class _AllToAll(torch.autograd.Function):
    """seq -> head (``to_head``) or head -> seq; the backward is the other direction."""

    @staticmethod
    def forward(ctx, x, to_head, lengths, group, stats):
        ctx.args = (not to_head, lengths, group, stats)
        return (_seq_to_head if to_head else _head_to_seq)(x, lengths, group, stats, "fwd")

    @staticmethod
    def backward(ctx, grad):
        to_head, lengths, group, stats = ctx.args
        grad = (_seq_to_head if to_head else _head_to_seq)(grad, lengths, group, stats, "bwd")
        return grad, None, None, None, None


def seq_to_head(x: torch.Tensor, lengths: list[int], group, stats: CommStats) -> torch.Tensor:
    """x: [lengths[me], H, D] -> [sum(lengths), H / U, D] (H divisible by U = len(lengths))."""
    return _AllToAll.apply(x, True, lengths, group, stats)


def head_to_seq(x: torch.Tensor, lengths: list[int], group, stats: CommStats) -> torch.Tensor:
    """x: [sum(lengths), H / U, D] -> [lengths[me], H, D]."""
    return _AllToAll.apply(x, False, lengths, group, stats)
