"""The fused stage cut by rows, so that the remote KV exchange hides behind the rows needing none.

The fused kernel (one call over ``[own KV | received KV]``) waits for the whole cast. Most rows
of a document mask read only the rank's own keys; only a document cut between ranks reads
received ones. So the fused mask is cut along q into

- the *local* rows: no slice of theirs touches a received key; they run first, while the cast is
  in flight, over the fused buffer (whose own part is already in place);
- a few *remote blocks*: row ranges that hold every row touching a received key, with all of
  those rows' slices; each runs once the cast has landed, over its key range of the buffer, and
  writes its rows of out / lse (forward) and dq (backward) over the local call's.

No row is in both, so nothing is merged. In the backward the blocks run first: the received
keys' dK/dV come from the blocks alone and go back to their owners while the local rows'
kernel runs. All of it is planned here once; a call only slices with the ints recorded.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .comm_meta import merge_ranges
from .slice_array import SliceArray

# A launch each; rows touching received keys that lie scattered (min_heap's chunks) are joined
# into this many blocks, the rows between them moving to the blocks.
MAX_REMOTE_BLOCKS = 4
# Below this share of the fused area the local call hides too little to pay for its launch.
MIN_LOCAL_SHARE = 0.1

Piece = tuple[int, int, int]  # (offset in the block's keys, offset elsewhere, tokens)


@dataclass(frozen=True)
class BlockGeometry:
    """Rows ``[q_start, q_end)`` of the local shard against keys ``[k_start, k_end)`` of the
    fused buffer; ``slices`` on the block (q and k shifted to start at 0). ``recv_pieces``: its
    keys that were received, as (block key offset, offset in the cast's received buffer,
    tokens); ``own_pieces``: its own keys, as (block key offset, local shard offset, tokens)."""

    q_start: int
    q_end: int
    k_start: int
    k_end: int
    slices: SliceArray
    recv_pieces: tuple[Piece, ...]
    own_pieces: tuple[Piece, ...]


@dataclass(frozen=True)
class RowSplit:
    local: SliceArray          # on (local q, fused buffer keys), rows of the blocks left out
    blocks: tuple[BlockGeometry, ...]


def meets(start: np.ndarray, end: np.ndarray, regions: np.ndarray) -> np.ndarray:
    """Whether each non-empty range [start, end) meets one of the disjoint ``regions``
    [(start, end)]."""
    regions = np.asarray(regions, dtype=np.int64).reshape(-1, 2)
    regions = regions[np.argsort(regions[:, 0], kind="stable")]
    if len(regions) == 0 or len(start) == 0:
        return np.zeros(len(start), dtype=bool)
    first = np.searchsorted(regions[:, 1], start, side="right")  # first region ending after
    safe = np.minimum(first, len(regions) - 1)
    return (first < len(regions)) & (regions[safe, 0] < end) & (end > start)


def touches(slices: SliceArray, regions: np.ndarray) -> np.ndarray:
    """Whether each slice's key range meets one of the disjoint ``regions`` [(start, end)]."""
    return meets(slices.k_start, slices.k_end, regions)


def split_rows(slices: SliceArray, seqlen_q: int, recv_copies, own_copies
               ) -> RowSplit | None:
    """The row split of a fused mask (``slices`` tight, on local q and fused-buffer keys; the
    layout's copies place the received and own keys), or None where it does not pay: no local
    rows, or their area under ``MIN_LOCAL_SHARE`` of the mask."""
    recv_regions = np.array([(dst, dst + m) for _, dst, m in recv_copies], dtype=np.int64)
    remote = touches(slices, recv_regions)
    _, starts, ends = merge_ranges(np.zeros(int(remote.sum()), dtype=np.int64),
                                   slices.q_start[remote], slices.q_end[remote])
    rows = _join_closest(np.stack([starts, ends], axis=1), MAX_REMOTE_BLOCKS)
    outside = _complement(rows, seqlen_q)
    local = _clip_to_rows(slices, outside)
    total = int(slices.areas().sum())
    if len(local) == 0 or int(local.areas().sum()) < MIN_LOCAL_SHARE * total:
        return None
    blocks = []
    for q0, q1 in rows.tolist():
        part = _clip_to_rows(slices, np.array([[q0, q1]]))
        if len(part) == 0:
            continue
        k0, k1 = int(part.k_start.min()), int(part.k_end.max())
        blocks.append(BlockGeometry(q0, q1, k0, k1, part.shift(-q0, -k0),
                                    _pieces(recv_copies, k0, k1), _pieces(own_copies, k0, k1)))
    return RowSplit(local, tuple(blocks))


def _join_closest(ranges: np.ndarray, limit: int) -> np.ndarray:
    """Sorted disjoint ranges, neighbours with the smallest gap joined until ``limit`` remain."""
    ranges = ranges.reshape(-1, 2).copy()
    while len(ranges) > limit:
        i = int(np.argmin(ranges[1:, 0] - ranges[:-1, 1]))
        ranges[i, 1] = ranges[i + 1, 1]
        ranges = np.delete(ranges, i + 1, axis=0)
    return ranges


def _complement(ranges: np.ndarray, n: int) -> np.ndarray:
    bounds = np.concatenate([[0], ranges.reshape(-1), [n]]).reshape(-1, 2)
    return bounds[bounds[:, 1] > bounds[:, 0]]


def _clip_to_rows(slices: SliceArray, rows: np.ndarray) -> SliceArray:
    """The cells of ``slices`` in the row ranges ``rows`` [(start, end)], as tight slices."""
    if len(rows) == 0 or len(slices) == 0:
        return SliceArray.empty()
    src = np.repeat(np.arange(len(slices)), len(rows))
    rect = np.tile(rows, (len(slices), 1))
    pieces, _ = slices.take(src).clip(rect[:, 0], rect[:, 1], -(1 << 40), 1 << 40)
    return pieces.take(np.flatnonzero(pieces.areas() > 0))


def _pieces(copies, k0: int, k1: int) -> tuple[Piece, ...]:
    """The parts of (source offset, buffer offset, tokens) copies inside buffer keys [k0, k1),
    as (offset from k0, source offset, tokens)."""
    out = []
    for src, dst, m in copies:
        lo, hi = max(dst, k0), min(dst + m, k1)
        if hi > lo:
            out.append((lo - k0, src + lo - dst, hi - lo))
    return tuple(out)
