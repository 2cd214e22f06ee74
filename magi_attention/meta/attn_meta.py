"""Attention args of one rank: its slices re-expressed on local coordinates, one set per stage.

q rows are local shard positions. Keys are positions in the stage's KV buffer: the rank's own
shard for the host stage, the received buffer of a remote stage. A key buffer is described by
runs ``(global start, global end, buffer offset)`` sorted by global start; each slice piece is
clipped to every run it crosses and shifted.
"""
from __future__ import annotations

import numpy as np

from .comm_meta import RowPieces
from .dispatch import DispatchMeta
from .slice_array import SliceArray


def host_runs(dispatch: DispatchMeta, rank: int) -> np.ndarray:
    """The rank's own chunks as key runs, neighbouring chunks fused: int64 [n, 3]."""
    cs = dispatch.chunk_size
    chunks = np.asarray(dispatch.chunks_of(rank), dtype=np.int64)
    new = np.ones(len(chunks), dtype=bool)
    new[1:] = chunks[1:] != chunks[:-1] + 1
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(chunks)) - 1
    return np.stack([chunks[first] * cs, (chunks[last] + 1) * cs,
                     dispatch.local_offset[chunks[first]]], axis=1)


def local_row_pieces(rows: RowPieces, dispatch: DispatchMeta, rank: int) -> SliceArray:
    """The rank's pieces with q moved to local shard positions (k still global)."""
    mine = rows.pieces.take(rows.rank == rank)
    chunk = mine.q_start // dispatch.chunk_size
    return mine.shift(dispatch.local_offset[chunk] - chunk * dispatch.chunk_size, 0)


def map_keys(pieces: SliceArray, runs: np.ndarray) -> SliceArray:
    """Clip each piece (q local, k global) to the key runs it crosses; k -> buffer positions."""
    runs = np.asarray(runs, dtype=np.int64).reshape(-1, 3)
    if len(pieces) == 0 or len(runs) == 0:
        return SliceArray.empty()
    lo = np.searchsorted(runs[:, 1], pieces.k_start, side="right")
    hi = np.searchsorted(runs[:, 0], pieces.k_end, side="left")
    counts = np.maximum(hi - lo, 0)
    src = np.repeat(np.arange(len(pieces)), counts)
    run = lo[src] + np.arange(len(src)) - np.repeat(np.cumsum(counts) - counts, counts)
    clipped, sub = pieces.take(src).clip(-1 << 40, 1 << 40, runs[run, 0], runs[run, 1])
    run = run[sub]
    return clipped.shift(0, runs[run, 2] - runs[run, 0])
