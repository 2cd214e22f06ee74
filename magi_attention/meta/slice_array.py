"""Solver helpers over ``common.SliceArray``: cut slices at q-chunk boundaries and sum each chunk's load.

``SliceArray`` itself lives in ``magi_attention.common.slice_array``; it is re-exported here for
the solvers and callers that import it from ``magi_attention.meta``.
"""
from __future__ import annotations

import numpy as np

from ..common.slice_array import UNBOUNDED, SliceArray, ranks_within

__all__ = ["SliceArray", "chunk_areas", "clip_rows"]


def chunk_areas(slices: SliceArray, total_seqlen: int, chunk_size: int) -> np.ndarray:
    """Load of each q chunk ``[c * chunk_size, (c + 1) * chunk_size)``: the summed area of every
    slice's cells in those rows (overlapping slices count twice, as the kernel computes both)."""
    num_chunks = total_seqlen // chunk_size
    pieces, _ = clip_rows(slices, chunk_size, num_chunks)
    return np.bincount(pieces.q_start // chunk_size, weights=pieces.areas(),
                       minlength=num_chunks).astype(np.int64)


def clip_rows(slices: SliceArray, chunk_size: int, num_chunks: int
              ) -> tuple[SliceArray, np.ndarray]:
    """Cut every slice at chunk boundaries along q: pieces each inside one q chunk (and source ids)."""
    first = slices.q_start // chunk_size
    last = np.maximum((slices.q_end - 1) // chunk_size, first)
    counts = np.where(slices.q_end > slices.q_start, last - first + 1, 0)
    src = np.repeat(np.arange(len(slices)), counts)
    chunk = first[src] + ranks_within(counts)
    pieces, sub = slices.take(src).clip(chunk * chunk_size, (chunk + 1) * chunk_size,
                                        0, UNBOUNDED)
    return pieces, src[sub]
