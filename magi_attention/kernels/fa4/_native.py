"""Recognise masks FA4 expresses natively: a staircase of (q segment, key segment) entries x a
window (causal, local, full), FA4's varlen semantics.

Where the slice union is exactly "batch entry b: q rows [cu_q[b], cu_q[b+1]) against keys
[cu_k[b], cu_k[b+1]), inside each a band around the entry's bottom-right-aligned diagonal"
(full, causal, full_document, causal_document, sliding windows; and a CP rank's slice of a
document mask, whose rows of a cut document see that document's keys of several ranks), FA4's
own dense / varlen kernels with causal or window masking run it with cheap arithmetic masks
instead of per-cell bitmap lookups; the fa4 backend then calls those. Anything else goes through
the block-sparse path. Decided from the merged key intervals of every row, in O(seqlen),
exactly: a form is returned only if it reproduces every row's interval.

FA4's varlen semantics when an entry has Lq rows and Lk keys: its diagonal is aligned
bottom-right, row i keeps key j iff ``i + Lk - Lq - left <= j <= i + Lk - Lq + right`` (a bound
None is unbounded; causal is left None, right 0), clipped to [0, Lk). Entries with no keys
(rows that keep nothing: FA4 writes out 0, lse -inf) and entries with no rows (keys nothing
reads) fill the gaps, so both axes are tiled.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NativeForm:
    """cu_seqlens_q / cu_seqlens_k: entry bounds on each axis (both None: one entry, the whole
    q x k, FA4's dense kernel); windows: None = unbounded (window_right 0 with window_left None
    is causal), relative to each entry's bottom-right-aligned diagonal."""

    cu_seqlens_q: tuple[int, ...] | None
    cu_seqlens_k: tuple[int, ...] | None
    window_left: int | None
    window_right: int | None

    @property
    def causal(self) -> bool:
        return self.window_left is None and self.window_right == 0

    @property
    def varlen(self) -> bool:
        return self.cu_seqlens_q is not None

    @property
    def max_seqlen_q(self) -> int | None:
        return _longest(self.cu_seqlens_q)

    @property
    def max_seqlen_k(self) -> int | None:
        return _longest(self.cu_seqlens_k)


def _longest(cu: tuple[int, ...] | None) -> int | None:
    return None if cu is None else int(np.diff(cu).max())


def native_form(row: np.ndarray, lo: np.ndarray, hi: np.ndarray, seqlen_q: int, seqlen_k: int
                ) -> NativeForm | None:
    """The NativeForm of a mask given its merged row intervals (row ascending, lo, hi), or None."""
    if seqlen_q == 0 or seqlen_k == 0 or len(row) == 0:
        return None
    if np.any(row[1:] == row[:-1]):  # a row of 2+ intervals
        return None
    has = np.zeros(seqlen_q, dtype=bool)
    has[row] = True
    # entry cuts between rows p-1 and p: no kept row before p reaches past a key that a kept row
    # from p on starts before (empty rows reach nothing); never inside a run of empty rows
    row_hi = np.zeros(seqlen_q, dtype=np.int64)
    row_lo = np.full(seqlen_q, seqlen_k, dtype=np.int64)
    row_hi[row], row_lo[row] = hi, lo
    reach_right = np.maximum.accumulate(row_hi)[:-1]           # over rows < p
    reach_left = np.minimum.accumulate(row_lo[::-1])[::-1][1:]  # over rows >= p
    p = np.arange(1, seqlen_q)
    cut = (reach_right <= reach_left) & (has[:-1] | has[1:])
    q_bounds = np.concatenate([[0], p[cut], [seqlen_q]])
    kept = has[q_bounds[:-1]]
    kept_rows = np.add.reduceat(has.astype(np.int64), q_bounds[:-1])
    if not np.array_equal(kept_rows, np.where(kept, np.diff(q_bounds), 0)):
        return None  # an entry mixes rows that keep keys with rows that keep none
    # key segments: a kept entry spans [min lo, max hi) of its rows (its last row reaches the
    # end: windows are >= 0); an empty entry none; unread keys between become entries of no rows
    entry_lo = np.minimum.reduceat(row_lo, q_bounds[:-1])
    entry_hi = np.maximum.reduceat(row_hi, q_bounds[:-1])
    cq, ck, prev = [0], [0], 0
    for b in range(len(kept)):
        k0, k1 = (int(entry_lo[b]), int(entry_hi[b])) if kept[b] else (prev, prev)
        if k0 < prev:
            return None
        if k0 > prev:  # keys no row reads
            cq.append(cq[-1])
            ck.append(k0)
        cq.append(int(q_bounds[b + 1]))
        ck.append(k1)
        prev = k1
    if prev < seqlen_k:
        cq.append(seqlen_q)
        ck.append(seqlen_k)
    cq, ck = np.array(cq), np.array(ck)
    # every kept row's entry, its key segment and its bottom-right-aligned diagonal
    entry = np.searchsorted(cq, row, side="right") - 1
    start, end = ck[entry], ck[entry + 1]
    diag = row + (end - cq[entry + 1])
    left = int((diag - lo).max())
    right = int((hi - 1 - diag).max())
    if left < 0 or right < 0:  # FA4 reads a negative window as unbounded
        return None
    if not (np.array_equal(lo, np.maximum(start, diag - left))
            and np.array_equal(hi, np.minimum(end, diag + right + 1))):
        return None
    unbounded_left = bool(np.array_equal(lo, start))
    unbounded_right = bool(np.array_equal(hi, end))
    one = len(cq) == 2
    return NativeForm(cu_seqlens_q=None if one else tuple(int(b) for b in cq),
                      cu_seqlens_k=None if one else tuple(int(b) for b in ck),
                      window_left=None if unbounded_left else left,
                      window_right=None if unbounded_right else right)


def native_dense(form: NativeForm, seqlen_q: int, seqlen_k: int | None = None):
    """bool [seqlen_q, seqlen_k] of a NativeForm, cell by cell from FA4's semantics (tests)."""
    seqlen_k = seqlen_q if seqlen_k is None else seqlen_k
    cq = np.array(form.cu_seqlens_q if form.varlen else (0, seqlen_q))
    ck = np.array(form.cu_seqlens_k if form.varlen else (0, seqlen_k))
    keep = np.zeros((seqlen_q, seqlen_k), dtype=bool)
    for b in range(len(cq) - 1):
        lq, lk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        i, j = np.arange(lq)[:, None], np.arange(lk)[None, :]
        block = np.ones((lq, lk), dtype=bool)
        if form.window_left is not None:
            block &= j >= i + lk - lq - form.window_left
        if form.window_right is not None:
            block &= j <= i + lk - lq + form.window_right
        keep[cq[b]:cq[b + 1], ck[b]:ck[b + 1]] = block
    return keep


@dataclass(frozen=True)
class NativeGroup:
    """Rows [q_start, q_end) against keys [k_start, k_end): a block of rows whose mask, on that
    key span alone, FA4 expresses as ``form`` (bounds relative to the span)."""

    q_start: int
    q_end: int
    k_start: int
    k_end: int
    form: NativeForm


# Each group is one more FA4 launch (and, in the backward, one more add of its dK/dV); a mask
# needing more is left to the block-sparse path. Two cover a CP rank's two runs of causal.
MAX_NATIVE_GROUPS = 4
# Bound on the blocks tried for merging (each try is O(rows) on the host, at plan time).
MAX_CANDIDATE_BLOCKS = 64


def native_groups(row: np.ndarray, lo: np.ndarray, hi: np.ndarray, seqlen_q: int, seqlen_k: int,
                  max_groups: int = MAX_NATIVE_GROUPS) -> tuple[NativeGroup, ...] | None:
    """Disjoint blocks of rows covering all rows, each native on its own key span, fewest first
    found greedily; None when the mask needs more than ``max_groups`` or a block is not native.

    For masks no single form expresses because key segments of different rows overlap without
    continuing one band: a CP rank holding two runs of a causal mask (its later run's rows see
    every key its earlier run's rows see, on another diagonal). Rows are cut wherever a band
    edge jumps (the next kept row starts a new entry or a new group), and adjacent blocks are
    merged while the merge stays native."""
    if seqlen_q == 0 or seqlen_k == 0 or len(row) == 0 or np.any(row[1:] == row[:-1]):
        return None
    step = row[1:] - row[:-1]
    d_lo, d_hi = lo[1:] - lo[:-1], hi[1:] - hi[:-1]
    band = ((d_lo == 0) | (d_lo == step)) & ((d_hi == 0) | (d_hi == step))
    cuts = row[1:][~band]  # a jump: a new entry (kept inside a merged group) or a new group
    if len(cuts) + 1 > MAX_CANDIDATE_BLOCKS:
        return None
    bounds = [*(int(c) for c in cuts), seqlen_q]
    groups: list[NativeGroup] = []
    q0 = 0
    while q0 < seqlen_q:
        best = None
        for end in (b for b in bounds if b > q0):  # the longest run of whole blocks
            merged = _group(row, lo, hi, q0, end, seqlen_k)
            if merged is None:
                break
            best = merged
        if best is None:  # the edges changed without a jump: the longest native prefix
            best = _longest_prefix(row, lo, hi, q0, next(b for b in bounds if b > q0), seqlen_k)
        if best is None or len(groups) == max_groups:
            return None
        groups.append(best)
        q0 = best.q_end
    return tuple(groups)


def _longest_prefix(row, lo, hi, q0: int, q1: int, seqlen_k: int) -> NativeGroup | None:
    """The native group [q0, r) with the largest kept-row cut r in (q0, q1), by bisection."""
    kept = row[(row > q0) & (row < q1)]
    best, a, b = None, 0, len(kept) - 1
    while a <= b:
        mid = (a + b) // 2
        group = _group(row, lo, hi, q0, int(kept[mid]), seqlen_k)
        if group is None:
            b = mid - 1
        else:
            best, a = group, mid + 1
    return best


def _group(row, lo, hi, q0: int, q1: int, seqlen_k: int) -> NativeGroup | None:
    """Rows [q0, q1) as one NativeGroup on the key span of its kept rows, or None."""
    a, b = np.searchsorted(row, q0), np.searchsorted(row, q1)
    if a == b:  # no kept row: cannot happen between cuts (cuts sit on kept rows)
        return None
    k0, k1 = int(lo[a:b].min()), int(hi[a:b].max())
    form = native_form(row[a:b] - q0, lo[a:b] - k0, hi[a:b] - k0, q1 - q0, k1 - k0)
    return None if form is None else NativeGroup(q0, q1, k0, k1, form)


def native_tiles(form: NativeForm, seqlen_q: int, seqlen_k: int, block_m: int, block_n: int
                 ) -> tuple[int, int]:
    """(key tiles, q tiles) FA4 runs for ``form``: each entry tiled from its own start, each q
    tile visiting the key tiles between its first row's first kept key and its last row's last
    (causal and window tiles past the band are skipped). Entries without keys still run their
    q tiles (they write out 0)."""
    cq = np.asarray(form.cu_seqlens_q or (0, seqlen_q), dtype=np.int64)
    ck = np.asarray(form.cu_seqlens_k or (0, seqlen_k), dtype=np.int64)
    lq, lk = np.diff(cq), np.diff(ck)
    n_qt = -(-lq // block_m)
    entry = np.repeat(np.arange(len(lq)), n_qt)
    t = np.arange(len(entry)) - np.repeat(np.cumsum(n_qt) - n_qt, n_qt)
    first = t * block_m
    last = np.minimum(first + block_m, lq[entry]) - 1
    shift = lk[entry] - lq[entry]  # bottom-right alignment: row i's diagonal is key i + shift
    lo = np.zeros(len(entry), dtype=np.int64) if form.window_left is None else \
        np.maximum(0, first + shift - form.window_left)
    hi = lk[entry] if form.window_right is None else \
        np.minimum(lk[entry], last + shift + form.window_right + 1)
    tiles = np.where(hi > lo, -(-hi // block_n) - lo // block_n, 0)
    return int(tiles.sum()), int(len(entry))
