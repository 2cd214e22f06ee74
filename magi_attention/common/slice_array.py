"""SliceArray: many AttnSlices as numpy columns, with vectorised clip, areas and row intervals.

A 1M-token mask has up to ~1e5 slices, and the solvers clip thousands of slices against thousands
of rectangles; one ``AttnSlice`` call at a time (~15 us each) costs seconds. Here the geometry of
``magi_attention/common/slice.py`` (a slice keeps ``k >= q + lower_offset`` and
``k <= q + upper_offset``) runs on whole columns at once. Ranges are half-open ``[start, end)``.
An unbounded diagonal is stored as an offset of +-``UNBOUNDED``, which no cut point can reach, so
one formula serves all four mask types.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .mask_type import AttnMaskType
from .slice import AttnSlice

# An offset far outside any sequence (2^40 tokens): "no diagonal" without a separate flag column,
# and small enough that sums of a few offsets stay exact in int64.
UNBOUNDED = 1 << 40

_LOWER = np.array([t.has_lower_diagonal for t in AttnMaskType])
_UPPER = np.array([t.has_upper_diagonal for t in AttnMaskType])
# AttnMaskType value from (has_lower, has_upper), as in AttnMaskType.from_diagonals
_TYPE_OF = np.array([[int(AttnMaskType.from_diagonals(lo, up)) for up in (False, True)]
                     for lo in (False, True)], dtype=np.int64)


@dataclass
class SliceArray:
    """Columns q_start, q_end, k_start, k_end, mask_type (int64 ``[num_slices]`` each)."""

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

    # -- geometry ---------------------------------------------------------------------------
    @property
    def lower_offset(self) -> np.ndarray:
        """Kept keys satisfy ``k >= q + lower_offset`` (-UNBOUNDED: no lower diagonal)."""
        return np.where(_LOWER[self.mask_type], self.k_start - self.q_start, -UNBOUNDED)

    @property
    def upper_offset(self) -> np.ndarray:
        """Kept keys satisfy ``k <= q + upper_offset`` (+UNBOUNDED: no upper diagonal)."""
        return np.where(_UPPER[self.mask_type], self.k_end - self.q_end, UNBOUNDED)

    def shift(self, q_offset, k_offset) -> "SliceArray":
        return SliceArray(self.q_start + q_offset, self.q_end + q_offset,
                          self.k_start + k_offset, self.k_end + k_offset, self.mask_type)

    def areas(self) -> np.ndarray:
        """Exact kept cells of each slice, in closed form (tight or not)."""
        rows = np.maximum(self.q_end - self.q_start, 0)
        cols = np.maximum(self.k_end - self.k_start, 0)
        lower, upper = _LOWER[self.mask_type], _UPPER[self.mask_type]
        # with rows <= cols every row keeps a key and the counts are cols - rows + 1 (band),
        # cols - rows + 1 .. cols (triangle) or cols (full); clip's pieces are all like this
        out = np.where(lower & upper, rows * (cols - rows + 1),
                       np.where(lower | upper, rows * (2 * cols - rows + 1) // 2, rows * cols))
        loose = (lower | upper) & (rows > cols)
        if loose.any():
            out[loose] = self.take(loose)._areas_by_kinks()
        return out

    def _areas_by_kinks(self) -> np.ndarray:
        """``areas`` for any slice.

        The row count is ``max(0, min(ke - ks, ke - q - lower, q + upper + 1 - ks, upper + 1 - lower))``:
        piecewise linear in q with kinks where two terms cross or one crosses 0. Between sorted
        kinks it is linear, so each piece sums as an arithmetic series.
        """
        qs, qe, ks, ke = self.q_start, self.q_end, self.k_start, self.k_end
        lo, up = self.lower_offset, self.upper_offset
        kinks = np.stack([qs, qe, ks - lo, ke - up - 1, ke - lo, ks - up - 1,
                          ks - lo + 1, ke - up], axis=1)
        kinks = np.sort(np.clip(kinks, qs[:, None], qe[:, None]), axis=1)
        a, b = kinks[:, :-1], kinks[:, 1:]

        def row_count(q: np.ndarray) -> np.ndarray:
            row_lo = np.maximum(ks[:, None], q + lo[:, None])
            row_hi = np.minimum(ke[:, None], q + up[:, None] + 1)
            return np.maximum(row_hi - row_lo, 0)

        n = b - a
        return np.where(n > 0, n * (row_count(a) + row_count(b - 1)) // 2, 0).sum(axis=1)

    def nonempty_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """``[first, last)`` rows of each slice that keep at least one key (first >= last: empty).
        Every row in between keeps a key."""
        lo, up = self.lower_offset, self.upper_offset
        first = np.maximum(self.q_start, self.k_start - up)
        last = np.minimum(self.q_end, self.k_end - lo)
        dead = (self.k_end <= self.k_start) | (up < lo)
        return first, np.where(dead, first, last)

    def nonempty_cols(self) -> tuple[np.ndarray, np.ndarray]:
        """``[first, last)`` key columns of each slice that keep at least one row.

        A row's kept keys ``[max(ks, q + lower), min(ke, q + upper + 1))`` move right with q and
        never leave a gap, so the columns run from the first kept row's start to the last's end.
        """
        q_first, q_last = self.nonempty_rows()
        first = np.maximum(self.k_start, q_first + self.lower_offset)
        last = np.minimum(self.k_end, q_last + self.upper_offset)
        return first, np.where(q_last > q_first, last, first)

    def clip(self, q_start, q_end, k_start, k_end) -> tuple["SliceArray", np.ndarray]:
        """Cells of slice i inside rectangle i, as tight slices, and for each the row i it came from.

        Rectangles broadcast against the slices. Vectorised twin of ``AttnSlice.clip``.
        """
        n = len(self)
        q0, q1, k0, k1 = (np.broadcast_to(x, (n,)).astype(np.int64) for x in (
            np.maximum(self.q_start, q_start), np.minimum(self.q_end, q_end),
            np.maximum(self.k_start, k_start), np.minimum(self.k_end, k_end)))
        return regions_to_slices(q0, q1, k0, k1, self.lower_offset, self.upper_offset)

    def transpose(self) -> "SliceArray":
        """The same cells with the roles of q and k swapped, as tight slices (rows become key columns)."""
        # k >= q + lower  <=>  q <= k - lower;  k <= q + upper  <=>  q >= k - upper
        pieces, _ = regions_to_slices(self.k_start, self.k_end, self.q_start, self.q_end,
                                      -self.upper_offset, -self.lower_offset)
        return pieces

    def row_intervals(self, row_start: int, row_end: int, seqlen_k: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Kept keys of rows ``[row_start, row_end)`` of the union, as disjoint sorted intervals.

        Returns ``(rows, lo, hi)``, int64 ``[num_intervals]``: row ``rows[i]`` keeps ``[lo[i], hi[i])``;
        overlapping or touching intervals of one row are merged. Cost: O(sum of rows per slice).
        """
        lower, upper = self.lower_offset, self.upper_offset
        first, last = self.nonempty_rows()
        first, last = np.maximum(first, row_start), np.minimum(last, row_end)
        sel = np.flatnonzero(last > first)
        counts = last[sel] - first[sel]
        total = int(counts.sum())
        if total == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        idx = np.repeat(sel, counts)
        rows = first[idx] + ranks_within(counts)
        lo = np.maximum(self.k_start[idx], rows + lower[idx])
        hi = np.minimum(self.k_end[idx], rows + upper[idx] + 1)
        order = np.lexsort((lo, rows))
        rows, lo, hi = rows[order], lo[order], hi[order]
        # segmented running max of hi: rows dominate the key, so the max never leaks across rows
        stride = seqlen_k + 1
        reach = np.maximum.accumulate(rows * stride + hi) - rows * stride
        starts = np.ones(len(rows), dtype=bool)
        starts[1:] = (rows[1:] != rows[:-1]) | (lo[1:] > reach[:-1])
        start_idx = np.flatnonzero(starts)
        end_idx = np.append(start_idx[1:], len(rows)) - 1
        return rows[start_idx], lo[start_idx], reach[end_idx]


def regions_to_slices(q_start, q_end, k_start, k_end, lower_offset, upper_offset
                      ) -> tuple[SliceArray, np.ndarray]:
    """Vectorised ``region_to_slices``: region i is ``{(q, k) in rect i : q + lower_offset[i] <= k
    <= q + upper_offset[i]}`` (offsets +-UNBOUNDED when absent). Returns tight slices and, for
    each, the region it came from. Each row band where the binding constraints do not change
    becomes one slice; neighbouring bands are not fused, so there may be more pieces than the
    scalar version returns (same cells)."""
    q0, q1, k0, k1, lo, up = (np.asarray(x, dtype=np.int64) for x in (
        q_start, q_end, k_start, k_end, lower_offset, upper_offset))
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


def ranks_within(counts: np.ndarray) -> np.ndarray:
    """[0..c0-1, 0..c1-1, ...] for counts [c0, c1, ...]."""
    total = int(counts.sum())
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(total, dtype=np.int64) - starts
