"""SliceArray: many AttnSlices as numpy columns, with vectorised clip, shift and area.

The solvers of a 1M-token mask clip thousands of slices against thousands of rectangles; doing
that one ``AttnSlice.clip`` call at a time costs seconds. Here the same geometry (see
``magi_attention/common/slice.py``: a slice keeps ``k >= q + lower_offset`` and
``k <= q + upper_offset``) runs on whole columns at once. Ranges are half-open ``[start, end)``.
An unbounded diagonal is stored as an offset of +-``UNBOUNDED``, which no cut point can reach.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..common import AttnMaskType, AttnSlice

# An offset far outside any sequence (2^40 tokens): "no diagonal" without a separate flag column.
UNBOUNDED = 1 << 40

_LOWER = np.array([t.has_lower_diagonal for t in AttnMaskType])
_UPPER = np.array([t.has_upper_diagonal for t in AttnMaskType])
# AttnMaskType value from (has_lower, has_upper), as in AttnMaskType.from_diagonals
_TYPE_OF = np.array([[int(AttnMaskType.from_diagonals(lo, up)) for up in (False, True)]
                     for lo in (False, True)], dtype=np.int64)


@dataclass
class SliceArray:
    """Columns q_start, q_end, k_start, k_end, mask_type (int64 [n] each)."""

    q_start: np.ndarray
    q_end: np.ndarray
    k_start: np.ndarray
    k_end: np.ndarray
    mask_type: np.ndarray

    @classmethod
    def from_slices(cls, slices: Sequence[AttnSlice]) -> "SliceArray":
        data = np.array([[s.q_range.start, s.q_range.end, s.k_range.start, s.k_range.end,
                          int(s.mask_type)] for s in slices], dtype=np.int64).reshape(-1, 5)
        return cls(*data.T.copy())

    @classmethod
    def empty(cls) -> "SliceArray":
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, z, z)

    def to_slices(self) -> list[AttnSlice]:
        return [AttnSlice.make(int(a), int(b), int(c), int(d), int(t)) for a, b, c, d, t in
                zip(self.q_start, self.q_end, self.k_start, self.k_end, self.mask_type)]

    def to_tensors(self, device="cpu"):
        """(q_ranges int32 [n, 2], k_ranges int32 [n, 2], attn_type_map int32 [n])."""
        import torch
        q = np.stack([self.q_start, self.q_end], axis=1).astype(np.int32)
        k = np.stack([self.k_start, self.k_end], axis=1).astype(np.int32)
        return (torch.from_numpy(q).to(device), torch.from_numpy(k).to(device),
                torch.from_numpy(self.mask_type.astype(np.int32)).to(device))

    def __len__(self) -> int:
        return len(self.q_start)

    def take(self, idx) -> "SliceArray":
        return SliceArray(self.q_start[idx], self.q_end[idx], self.k_start[idx], self.k_end[idx],
                          self.mask_type[idx])

    @staticmethod
    def concat(parts: Sequence["SliceArray"]) -> "SliceArray":
        if not parts:
            return SliceArray.empty()
        return SliceArray(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                            ("q_start", "q_end", "k_start", "k_end", "mask_type")))

    @property
    def lower_offset(self) -> np.ndarray:
        return np.where(_LOWER[self.mask_type], self.k_start - self.q_start, -UNBOUNDED)

    @property
    def upper_offset(self) -> np.ndarray:
        return np.where(_UPPER[self.mask_type], self.k_end - self.q_end, UNBOUNDED)

    def shift(self, q_offset, k_offset) -> "SliceArray":
        return SliceArray(self.q_start + q_offset, self.q_end + q_offset,
                          self.k_start + k_offset, self.k_end + k_offset, self.mask_type)

    def areas(self) -> np.ndarray:
        """Cells of each slice, exact, assuming tight slices (every row non-empty), as ``clip`` returns."""
        rows = self.q_end - self.q_start
        cols = self.k_end - self.k_start
        t = self.mask_type
        full = rows * cols
        tri = rows * (2 * cols - rows + 1) // 2   # widths cols - rows + 1 .. cols
        band = rows * (cols - rows + 1)
        return np.where(_LOWER[t] & _UPPER[t], band, np.where(_LOWER[t] | _UPPER[t], tri, full))

    def clip(self, q_start, q_end, k_start, k_end) -> tuple["SliceArray", np.ndarray]:
        """Cells of slice i inside rectangle i, as tight slices, and for each the row i it came from.

        Rectangles broadcast against the slices. Vectorised twin of ``AttnSlice.clip``
        (``region_to_slices``): each row band where the binding constraints do not change becomes
        one slice; neighbouring bands are not fused, so there may be more pieces (same cells).
        """
        n = len(self)
        q0 = np.maximum(self.q_start, q_start)
        q1 = np.minimum(self.q_end, q_end)
        k0 = np.maximum(self.k_start, k_start)
        k1 = np.minimum(self.k_end, k_end)
        q0, q1, k0, k1 = (np.broadcast_to(x, (n,)).astype(np.int64) for x in (q0, q1, k0, k1))
        lo, up = self.lower_offset, self.upper_offset
        q1 = np.where((q0 < q1) & (k0 < k1), q1, q0)  # empty rectangles yield no band
        cuts = np.stack([q0, q1, k0 - lo + 1, k1 - lo, k1 - 1 - up, k0 - up], axis=1)
        cuts = np.sort(np.clip(cuts, q0[:, None], q1[:, None]), axis=1)
        u, v = cuts[:, :-1], cuts[:, 1:]
        lo_, up_ = lo[:, None], up[:, None]
        k0_, k1_ = k0[:, None], k1[:, None]
        lower = u + lo_ > k0_
        upper = u + up_ < k1_ - 1
        row_lo = np.where(lower, u + lo_, k0_)
        row_hi = np.where(upper, u + up_ + 1, k1_)
        keep = (u < v) & (row_hi > row_lo) & ~(lower & upper & (lo_ > up_))
        src, band = np.nonzero(keep)
        u, v, lower, upper = u[src, band], v[src, band], lower[src, band], upper[src, band]
        ks = np.where(lower, u + lo[src], k0[src])
        ke = np.where(upper, v + up[src], k1[src])
        pieces = SliceArray(u, v, ks, ke, _TYPE_OF[lower.astype(np.int64), upper.astype(np.int64)])
        return pieces, src


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
    chunk = first[src] + _ranks_within(counts)
    pieces, sub = slices.take(src).clip(chunk * chunk_size, (chunk + 1) * chunk_size,
                                        0, UNBOUNDED)
    return pieces, src[sub]


def _ranks_within(counts: np.ndarray) -> np.ndarray:
    """[0..c0-1, 0..c1-1, ...] for counts [c0, c1, ...]."""
    total = int(counts.sum())
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(total) - starts
