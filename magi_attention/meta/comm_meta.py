"""Comm meta: which remote KV token ranges each rank's queries need, grouped into stages.

Only the keys a rank's query rows actually touch are moved (never the whole sequence): the
k-extent of every slice piece inside the rank's q chunks, merged, minus the keys the rank holds.
Each needed range is cut where its owner changes and the ranges of one destination are split into
``num_stages`` stages of about equal token count (in global order). The result, one table for the
whole group, is computed identically on every rank, so senders know what receivers expect.
The functions that place keys (``remote_ranges``, ``build_transfer_table``, ``cast_args``,
``to_local``) take the keys' DispatchMeta: q's under self-attention, the kv sequence's own
under cross-attention; ``row_pieces`` takes q's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..comm.args import GroupCollectiveArgs
from .dispatch import DispatchMeta
from .slice_array import SliceArray, clip_rows

_GROUP_STRIDE = 1 << 42  # > any token index: (group, position) packed into one sortable int64


@dataclass(frozen=True)
class TransferTable:
    """Row i moves global KV tokens ``[start[i], end[i])`` from rank src[i] to dst[i] in stage[i].

    Rows are sorted by (stage, dst, src, start); the ranges of one (dst, src, stage) are disjoint.
    """

    dst: np.ndarray
    src: np.ndarray
    stage: np.ndarray
    start: np.ndarray
    end: np.ndarray
    num_stages: int
    cp_size: int

    @property
    def lengths(self) -> np.ndarray:
        return self.end - self.start

    def tokens_received(self) -> np.ndarray:
        """Remote KV tokens each rank receives, int64 [cp_size]."""
        return np.bincount(self.dst, weights=self.lengths, minlength=self.cp_size).astype(np.int64)

    def total_tokens(self) -> int:
        return int(self.lengths.sum())


@dataclass(frozen=True)
class RowPieces:
    """The mask cut along q at chunk boundaries: each piece lies inside one q chunk, owned by rank."""

    pieces: SliceArray
    rank: np.ndarray


def row_pieces(slices: SliceArray, dispatch: DispatchMeta) -> RowPieces:
    pieces, _ = clip_rows(slices, dispatch.chunk_size, dispatch.num_chunks)
    return RowPieces(pieces, dispatch.owner[pieces.q_start // dispatch.chunk_size])


def needed_ranges(rows: RowPieces, cp_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rank, start, end): the merged key extents each rank's query rows touch, sorted."""
    return merge_ranges(rows.rank, rows.pieces.k_start, rows.pieces.k_end)


def merge_ranges(group: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Union of ranges within each group: (group, start, end) sorted, overlapping/touching fused."""
    keep = end > start
    group, start, end = group[keep], start[keep], end[keep]
    if len(group) == 0:
        return group, start, end
    order = np.lexsort((start, group))
    group, start, end = group[order], start[order], end[order]
    reach = np.maximum.accumulate(group * _GROUP_STRIDE + end)
    new = np.ones(len(group), dtype=bool)
    new[1:] = group[1:] * _GROUP_STRIDE + start[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(group)) - 1
    return group[first], start[first], reach[last] - group[first] * _GROUP_STRIDE


def remote_ranges(dst: np.ndarray, start: np.ndarray, end: np.ndarray, dispatch: DispatchMeta):
    """Cut needed ranges where the owning rank changes and drop what dst holds itself.

    Returns (dst, src, start, end), runs of one owner fused, sorted by (dst, start).
    """
    cs = dispatch.chunk_size
    first = start // cs
    counts = np.where(end > start, (end - 1) // cs - first + 1, 0)
    row = np.repeat(np.arange(len(dst)), counts)
    chunk = first[row] + _ranks_within(counts)
    seg_start = np.maximum(start[row], chunk * cs)
    seg_end = np.minimum(end[row], (chunk + 1) * cs)
    seg_dst, seg_src = dst[row], dispatch.owner[chunk]
    keep = seg_src != seg_dst
    seg_dst, seg_src, seg_start, seg_end = (x[keep] for x in (seg_dst, seg_src, seg_start, seg_end))
    if len(seg_dst) == 0:
        return seg_dst, seg_src, seg_start, seg_end
    new = np.ones(len(seg_dst), dtype=bool)  # fuse touching segments of one (dst, src)
    new[1:] = ((seg_dst[1:] != seg_dst[:-1]) | (seg_src[1:] != seg_src[:-1])
               | (seg_start[1:] != seg_end[:-1]))
    first_seg = np.flatnonzero(new)
    last_seg = np.append(first_seg[1:], len(seg_dst)) - 1
    return seg_dst[first_seg], seg_src[first_seg], seg_start[first_seg], seg_end[last_seg]


def assign_stages(dst, src, start, end, num_stages: int, cp_size: int) -> TransferTable:
    """Split each destination's remote ranges (in global order) into num_stages stages of about
    equal token count; a range crossing a stage boundary is cut there."""
    n = max(num_stages, 1)
    lengths = end - start
    total = np.bincount(dst, weights=lengths, minlength=cp_size).astype(np.int64)
    cum_end = np.cumsum(lengths)
    group_base = np.repeat(np.cumsum(total) - total, np.bincount(dst, minlength=cp_size))
    c0 = cum_end - lengths - group_base  # position of each range in its destination's stream
    c1 = c0 + lengths
    # stage j of destination d covers stream positions [bounds[d, j], bounds[d, j + 1])
    bounds = (total[:, None] * np.arange(n + 1)[None, :]) // n
    inner = (np.arange(cp_size)[:, None] * _GROUP_STRIDE + bounds[:, 1:-1]).reshape(-1)
    first = np.searchsorted(inner, dst * _GROUP_STRIDE + c0, side="right") - dst * (n - 1)
    last = np.searchsorted(inner, dst * _GROUP_STRIDE + c1 - 1, side="right") - dst * (n - 1)
    counts = np.where(lengths > 0, last - first + 1, 0)
    row = np.repeat(np.arange(len(dst)), counts)
    stage = first[row] + _ranks_within(counts)
    p0 = np.maximum(c0[row], bounds[dst[row], stage])
    p1 = np.minimum(c1[row], bounds[dst[row], stage + 1])
    s = start[row] + (p0 - c0[row])
    e = s + (p1 - p0)
    d, r = dst[row], src[row]
    order = np.lexsort((s, r, d, stage))
    # nothing remote anywhere (cp 1, or documents that never cross ranks): no stage at all, so
    # calc_attn is the local kernel alone, with no empty collective and no merge
    num = n if len(dst) else 0
    return TransferTable(d[order], r[order], stage[order], s[order], e[order], num, cp_size)


def build_transfer_table(rows: RowPieces, dispatch: DispatchMeta, num_stages: int
                         ) -> TransferTable:
    dst, start, end = needed_ranges(rows, dispatch.cp_size)
    return assign_stages(*remote_ranges(dst, start, end, dispatch), num_stages, dispatch.cp_size)


def cast_args(table: TransferTable, dispatch: DispatchMeta, rank: int, stage: int
              ) -> tuple[GroupCollectiveArgs, np.ndarray]:
    """Rank's group_cast args for one stage, and its received ranges as int64 [n, 3]
    (global start, global end, offset in the received buffer), sorted by global start."""
    in_stage = table.stage == stage
    send = np.flatnonzero(in_stage & (table.src == rank))  # sorted by (dst, start) already
    local = to_local(table.start[send], dispatch)
    send_ranges = np.stack([local, local + table.lengths[send]], axis=1)
    send_sizes = np.bincount(table.dst[send], weights=table.lengths[send],
                             minlength=table.cp_size).astype(np.int64)
    recv = np.flatnonzero(in_stage & (table.dst == rank))  # sorted by (src, start)
    recv_sizes = np.bincount(table.src[recv], weights=table.lengths[recv],
                             minlength=table.cp_size).astype(np.int64)
    lens = table.lengths[recv]
    recv_runs = np.stack([table.start[recv], table.end[recv], np.cumsum(lens) - lens], axis=1)
    recv_runs = recv_runs[np.argsort(recv_runs[:, 0], kind="stable")]
    args = GroupCollectiveArgs(send_ranges.reshape(-1, 2), tuple(send_sizes.tolist()),
                               tuple(recv_sizes.tolist()))
    return args, recv_runs.reshape(-1, 3)


def to_local(global_pos: np.ndarray, dispatch: DispatchMeta) -> np.ndarray:
    """Global token index -> index in its owner's shard."""
    cs = dispatch.chunk_size
    return dispatch.local_offset[global_pos // cs] + global_pos % cs


def _ranks_within(counts: np.ndarray) -> np.ndarray:
    total = int(counts.sum())
    return np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
