"""Vectorised slice geometry: every slice as arrays of bounds, so work is O(num_slices) numpy.

A slice keeps the cells (q, k) of ``[q_start, q_end) x [k_start, k_end)`` with
``k >= q + lower`` and ``k <= q + upper`` (see ``magi_attention.common.slice``). An unbounded
diagonal is stored as -UNBOUNDED / +UNBOUNDED so that one formula serves all four mask types.
The per-slice Python loops of ``AttnSlice.area`` cost ~15 us a slice; at S = 1M a block-sparse
mask has ~1e5 slices, hence these array forms.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from magi_attention.common import AttnMaskType, AttnSlice, union_area

UNBOUNDED = 1 << 40  # far past any seqlen, small enough that sums stay exact in int64


@dataclass(frozen=True)
class SliceArrays:
    """All slices of one mask as int64 arrays ``[num_slices]``."""

    q_start: np.ndarray
    q_end: np.ndarray
    k_start: np.ndarray
    k_end: np.ndarray
    lower: np.ndarray  # kept keys satisfy k >= q + lower
    upper: np.ndarray  # kept keys satisfy k <= q + upper

    @classmethod
    def from_slices(cls, slices: Sequence[AttnSlice]) -> "SliceArrays":
        raw = np.array([(s.q_range.start, s.q_range.end, s.k_range.start, s.k_range.end,
                         s.mask_type) for s in slices], dtype=np.int64).reshape(-1, 5)
        qs, qe, ks, ke, kind = (np.ascontiguousarray(raw[:, i]) for i in range(5))
        # the offsets of AttnSlice.lower_offset / upper_offset, for all slices at once
        has_lower = np.isin(kind, [t for t in AttnMaskType if t.has_lower_diagonal])
        has_upper = np.isin(kind, [t for t in AttnMaskType if t.has_upper_diagonal])
        return cls(qs, qe, ks, ke, np.where(has_lower, ks - qs, -UNBOUNDED),
                   np.where(has_upper, ke - qe, UNBOUNDED))

    def __len__(self) -> int:
        return len(self.q_start)

    def take(self, index: np.ndarray) -> "SliceArrays":
        return SliceArrays(*(a[index] for a in self._fields()))

    def _fields(self) -> tuple[np.ndarray, ...]:
        return self.q_start, self.q_end, self.k_start, self.k_end, self.lower, self.upper

    def transpose(self) -> "SliceArrays":
        """The same cells with the roles of q and k swapped (rows become key columns)."""
        # k >= q + lower  <=>  q <= k - lower;  k <= q + upper  <=>  q >= k - upper
        return SliceArrays(self.k_start, self.k_end, self.q_start, self.q_end,
                           -self.upper, -self.lower)

    def row_count(self, q: np.ndarray) -> np.ndarray:
        """Kept keys in row q of each slice (q broadcast against the slices), clipped at 0."""
        lo = np.maximum(self.k_start, q + self.lower)
        hi = np.minimum(self.k_end, q + self.upper + 1)
        inside = (q >= self.q_start) & (q < self.q_end)
        return np.where(inside, np.maximum(hi - lo, 0), 0)

    def nonempty_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """``[first, last)`` rows of each slice that keep at least one key (first >= last: empty)."""
        first = np.maximum(self.q_start, self.k_start - self.upper)
        last = np.minimum(self.q_end, self.k_end - self.lower)
        dead = (self.k_end <= self.k_start) | (self.upper < self.lower)
        last = np.where(dead, first, last)
        return first, last

    def areas(self) -> np.ndarray:
        """Exact kept cells of each slice, in closed form.

        The row count is ``max(0, min(ke - ks, ke - q - lower, q + upper + 1 - ks, upper + 1 - lower))``:
        piecewise linear in q with kinks where two terms cross or one crosses 0. Between sorted
        kinks it is linear, so each piece sums as an arithmetic series.
        """
        qs, qe, ks, ke, lo, up = self._fields()
        kinks = np.stack([qs, qe, ks - lo, ke - up - 1, ke - lo, ks - up - 1,
                          ks - lo + 1, ke - up], axis=1)
        kinks = np.sort(np.clip(kinks, qs[:, None], qe[:, None]), axis=1)
        a, b = kinks[:, :-1], kinks[:, 1:]
        first = self.row_count_at(a)
        last = self.row_count_at(b - 1)
        n = b - a
        return np.where(n > 0, n * (first + last) // 2, 0).sum(axis=1)

    def row_count_at(self, q: np.ndarray) -> np.ndarray:
        """Like ``row_count`` for q of shape ``[num_slices, m]`` without the row-range test."""
        lo = np.maximum(self.k_start[:, None], q + self.lower[:, None])
        hi = np.minimum(self.k_end[:, None], q + self.upper[:, None] + 1)
        return np.maximum(hi - lo, 0)


def fast_union_area(slices: Sequence[AttnSlice], arrays: SliceArrays | None = None) -> int:
    """Exact union area; closed form when rectangles are disjoint, else ``common.union_area``.

    Slices are grouped into bands that chain-overlap in q. A band whose k_ranges are pairwise
    disjoint has pairwise disjoint rectangles, so its area is the sum of slice areas; any other
    band is handed to ``union_area``, which resolves its overlaps exactly. ``arrays``, if
    given, must be ``SliceArrays.from_slices(slices)``.
    """
    if not slices:
        return 0
    arr = SliceArrays.from_slices(slices) if arrays is None else arrays
    areas = arr.areas()
    live = np.flatnonzero(areas > 0)
    arr, areas = arr.take(live), areas[live]
    if len(arr) == 0:
        return 0
    order = np.lexsort((arr.k_start, arr.q_start))
    qs, qe = arr.q_start[order], arr.q_end[order]
    reach = np.maximum.accumulate(qe)
    band = np.concatenate([[0], np.cumsum(qs[1:] >= reach[:-1])])
    # within each band, disjoint k_ranges sorted by start have every start >= the previous end
    by_k = np.lexsort((arr.k_start[order], band))
    ks, ke, bnd = arr.k_start[order][by_k], arr.k_end[order][by_k], band[by_k]
    clash = (bnd[1:] == bnd[:-1]) & (ks[1:] < ke[:-1])
    bad_bands = np.unique(bnd[1:][clash])
    is_bad = np.isin(band, bad_bands)
    total = int(areas[order][~is_bad].sum())
    if bad_bands.size:
        bad_idx = live[order[is_bad]]
        total += union_area([slices[i] for i in bad_idx])
    return total


def row_intervals(arr: SliceArrays, row_start: int, row_end: int, seqlen: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kept keys of rows ``[row_start, row_end)`` as disjoint sorted intervals.

    Returns ``(rows, lo, hi)``, int64 ``[num_intervals]``: row ``rows[i]`` keeps ``[lo[i], hi[i])``;
    overlapping or touching intervals of one row are merged. Cost: O(sum of rows per slice).
    """
    first, last = arr.nonempty_rows()
    first, last = np.maximum(first, row_start), np.minimum(last, row_end)
    sel = np.flatnonzero(last > first)
    counts = last[sel] - first[sel]
    total = int(counts.sum())
    if total == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    idx = np.repeat(sel, counts)
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    rows = first[idx] + offsets
    lo = np.maximum(arr.k_start[idx], rows + arr.lower[idx])
    hi = np.minimum(arr.k_end[idx], rows + arr.upper[idx] + 1)
    order = np.lexsort((lo, rows))
    rows, lo, hi = rows[order], lo[order], hi[order]
    # segmented running max of hi: rows dominate the key, so the max never leaks across rows
    stride = seqlen + 1
    reach = np.maximum.accumulate(rows * stride + hi) - rows * stride
    starts = np.ones(len(rows), dtype=bool)
    starts[1:] = (rows[1:] != rows[:-1]) | (lo[1:] > reach[:-1])
    start_idx = np.flatnonzero(starts)
    end_idx = np.append(start_idx[1:], len(rows)) - 1
    return rows[start_idx], lo[start_idx], reach[end_idx]
