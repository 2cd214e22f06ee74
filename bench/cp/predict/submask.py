"""The global mask restricted to a rank's rows and a block of keys, on whole columns at once.

``bench.cp._sharding.local_slices`` builds each ring step's mask slice by slice (AttnSlice
objects, exact); a ring of 64 ranks has 4096 such masks and a document mask hundreds of slices,
so the predictor clips the same way on numpy columns (``SliceArray.clip``). Same cells, same
local coordinates: tests/bench/cp/predict/test_submask.py holds the two equal.
"""
from __future__ import annotations

import numpy as np

from magi_attention.common.slice_array import SliceArray

from .._sharding import Layout

__all__ = ["local_mask", "sorted_ranges"]


def sorted_ranges(layout: Layout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, local offsets) of a layout's ranges, sorted by global start."""
    if not layout:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    starts = np.array([r.start for r in layout], dtype=np.int64)
    ends = np.array([r.end for r in layout], dtype=np.int64)
    offsets = np.cumsum(ends - starts) - (ends - starts)
    order = np.argsort(starts, kind="stable")
    return starts[order], ends[order], offsets[order]


def _overlaps(starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """For each [lo, hi): the first range index it meets and how many (ranges are disjoint)."""
    first = np.searchsorted(ends, lo, side="right")
    last = np.searchsorted(starts, hi, side="left")
    return first, np.maximum(last - first, 0)


def local_mask(slices: SliceArray, q_layout, k_layout) -> SliceArray:
    """The cells of ``slices`` (global coordinates) in ``q_layout`` rows x ``k_layout`` keys,
    as slices in local coordinates: local row i is the i-th token of ``q_layout``'s ranges
    concatenated, likewise for keys (``local_slices``' convention). Either layout may be
    given as its ``sorted_ranges`` (a caller clipping against one layout many times)."""
    qs, qe, qo = q_layout if isinstance(q_layout, tuple) else sorted_ranges(q_layout)
    ks, ke, ko = k_layout if isinstance(k_layout, tuple) else sorted_ranges(k_layout)
    if len(slices) == 0 or len(qs) == 0 or len(ks) == 0:
        return SliceArray.empty()
    q_first, q_count = _overlaps(qs, qe, slices.q_start, slices.q_end)
    k_first, k_count = _overlaps(ks, ke, slices.k_start, slices.k_end)
    pairs = q_count * k_count
    src = np.repeat(np.arange(len(slices)), pairs)
    if len(src) == 0:
        return SliceArray.empty()
    within = np.arange(len(src)) - np.repeat(np.cumsum(pairs) - pairs, pairs)
    qi = q_first[src] + within // k_count[src]
    ki = k_first[src] + within % k_count[src]
    pieces, which = slices.take(src).clip(qs[qi], qe[qi], ks[ki], ke[ki])
    qi, ki = qi[which], ki[which]
    return pieces.shift(qo[qi] - qs[qi], ko[ki] - ks[ki])
