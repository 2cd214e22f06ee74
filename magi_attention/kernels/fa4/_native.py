"""Recognise masks FA4 expresses natively: documents (varlen) x a window (causal, local, full).

Where the slice union is exactly "independent documents, inside each a band k - q in
[-window_left, window_right]" (full, causal, full_document, causal_document, sliding windows),
FA4's own dense / varlen kernels with causal or window masking run it with cheap arithmetic masks
instead of per-cell bitmap lookups; the fa4 backend then calls those. Anything else goes through
the block-sparse path. Decided from the merged key intervals of every row, in O(seqlen), exactly:
a form is returned only if it reproduces every row's interval.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NativeForm:
    """cu_seqlens: document bounds (None: one sequence of seqlen rows); windows: None = unbounded
    (window_right 0 with window_left None is causal)."""

    cu_seqlens: tuple[int, ...] | None
    window_left: int | None
    window_right: int | None

    @property
    def causal(self) -> bool:
        return self.window_left is None and self.window_right == 0


def native_form(row: np.ndarray, lo: np.ndarray, hi: np.ndarray, seqlen_q: int, seqlen_k: int
                ) -> NativeForm | None:
    """The NativeForm of a mask given its merged row intervals (row, lo, hi), or None."""
    if seqlen_q != seqlen_k or seqlen_q == 0 or len(row) != seqlen_q:
        return None
    if not np.array_equal(row, np.arange(seqlen_q)):  # an empty row or a row of 2+ intervals
        return None
    q = row
    # document bounds: p splits when no row before p reaches past it and none after reaches before
    reach_right = np.maximum.accumulate(hi)            # max hi over rows < p+1
    reach_left = np.minimum.accumulate(lo[::-1])[::-1]  # min lo over rows >= p
    p = np.arange(1, seqlen_q)
    cuts = p[(reach_right[:-1] <= p) & (reach_left[1:] >= p)]
    bounds = np.concatenate([[0], cuts, [seqlen_q]])
    doc = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    start, end = bounds[doc], bounds[doc + 1]
    left = int((q - lo).max())
    right = int((hi - 1 - q).max())
    if left < 0 or right < 0:  # FA4 reads a negative window as unbounded
        return None
    if not (np.array_equal(lo, np.maximum(start, q - left))
            and np.array_equal(hi, np.minimum(end, q + right + 1))):
        return None
    unbounded_left = bool(np.array_equal(lo, start))
    unbounded_right = bool(np.array_equal(hi, end))
    return NativeForm(cu_seqlens=None if len(bounds) == 2 else tuple(int(b) for b in bounds),
                      window_left=None if unbounded_left else left,
                      window_right=None if unbounded_right else right)


def native_dense(form: NativeForm, seqlen: int):
    """bool [seqlen, seqlen] of a NativeForm (tests)."""
    bounds = np.array(form.cu_seqlens if form.cu_seqlens is not None else (0, seqlen))
    doc = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    q, k = np.arange(seqlen)[:, None], np.arange(seqlen)[None, :]
    keep = doc[:, None] == doc[None, :]
    if form.window_left is not None:
        keep &= k >= q - form.window_left
    if form.window_right is not None:
        keep &= k <= q + form.window_right
    return keep
