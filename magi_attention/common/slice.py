"""AttnSlice: a rectangle q_range x k_range shaped by an AttnMaskType; a mask is a list of them.

Geometry used throughout: a slice keeps the cells (q, k) of its rectangle with

    k >= q + lower_offset   (INVCAUSAL, BICAUSAL; lower_offset = k_start - q_start)
    k <= q + upper_offset   (CAUSAL, BICAUSAL;    upper_offset = k_end - q_end)

so every query row keeps one contiguous run of keys. That makes areas closed-form and lets any
slice be clipped to any rectangle and re-expressed exactly as a few slices (``clip``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .mask_type import AttnMaskType
from .range import AttnRange


@dataclass(frozen=True)
class AttnSlice:
    """One mask piece: ``q_range x k_range`` shaped by ``mask_type`` (ranges half-open)."""

    q_range: AttnRange
    k_range: AttnRange
    mask_type: AttnMaskType = AttnMaskType.FULL

    def __post_init__(self) -> None:
        if not isinstance(self.q_range, AttnRange):
            object.__setattr__(self, "q_range", AttnRange.from_pair(self.q_range))
        if not isinstance(self.k_range, AttnRange):
            object.__setattr__(self, "k_range", AttnRange.from_pair(self.k_range))
        object.__setattr__(self, "mask_type", AttnMaskType.parse(self.mask_type))

    @classmethod
    def make(cls, q_start: int, q_end: int, k_start: int, k_end: int,
             mask_type: AttnMaskType | str | int = AttnMaskType.FULL) -> "AttnSlice":
        return cls(AttnRange(q_start, q_end), AttnRange(k_start, k_end), AttnMaskType.parse(mask_type))

    # -- geometry ---------------------------------------------------------------------------
    @property
    def lower_offset(self) -> int | None:
        """d such that kept keys satisfy k >= q + d, or None when unbounded below."""
        if self.mask_type.has_lower_diagonal:
            return self.k_range.start - self.q_range.start
        return None

    @property
    def upper_offset(self) -> int | None:
        """d such that kept keys satisfy k <= q + d, or None when unbounded above."""
        if self.mask_type.has_upper_diagonal:
            return self.k_range.end - self.q_range.end
        return None

    def row_bounds(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Kept keys of each query row q as ``[lo, hi)`` (hi <= lo means none); q absolute, any int array."""
        q = np.asarray(q, dtype=np.int64)
        lo = np.full(q.shape, self.k_range.start, dtype=np.int64)
        hi = np.full(q.shape, self.k_range.end, dtype=np.int64)
        if self.lower_offset is not None:
            lo = np.maximum(lo, q + self.lower_offset)
        if self.upper_offset is not None:
            hi = np.minimum(hi, q + self.upper_offset + 1)
        outside = (q < self.q_range.start) | (q >= self.q_range.end)
        hi = np.where(outside, lo, hi)
        return lo, hi

    def _row_count(self, q: int) -> int:
        lo, hi = self.row_bounds(np.array([q]))
        return max(0, int(hi[0] - lo[0]))

    def is_empty(self) -> bool:
        return self.area() == 0

    def area(self) -> int:
        """Exact number of kept cells, in closed form (no per-cell work)."""
        total = 0
        for piece in self.tight_pieces():
            n = piece.q_range.seqlen
            first = piece._row_count(piece.q_range.start)
            last = piece._row_count(piece.q_range.end - 1)
            # counts are linear in q within a tight piece, so the sum is an arithmetic series
            total += n * (first + last) // 2
        return total

    def tight_pieces(self) -> list["AttnSlice"]:
        """This slice as slices whose every row is non-empty and whose row count is linear in q."""
        return self.clip(self.q_range, self.k_range)

    def clip(self, q_range: AttnRange, k_range: AttnRange) -> list["AttnSlice"]:
        """The cells of this slice inside ``q_range x k_range``, exactly, as at most four slices."""
        return region_to_slices(
            max(self.q_range.start, q_range.start), min(self.q_range.end, q_range.end),
            max(self.k_range.start, k_range.start), min(self.k_range.end, k_range.end),
            self.lower_offset, self.upper_offset,
        )

    def shift(self, q_offset: int = 0, k_offset: int = 0) -> "AttnSlice":
        return AttnSlice(self.q_range.shift(q_offset), self.k_range.shift(k_offset), self.mask_type)

    def __repr__(self) -> str:
        return f"AttnSlice(q={self.q_range!r}, k={self.k_range!r}, {self.mask_type.name})"


def region_to_slices(q_start: int, q_end: int, k_start: int, k_end: int,
                     lower_offset: int | None, upper_offset: int | None) -> list[AttnSlice]:
    """Express ``{(q, k) in rect : k >= q + lower_offset, k <= q + upper_offset}`` as AttnSlices.

    The diagonals may sit anywhere relative to the rectangle; each row band in which the set of
    binding constraints is constant becomes one FULL / CAUSAL / INVCAUSAL / BICAUSAL slice.
    """
    if q_start >= q_end or k_start >= k_end:
        return []
    lo_d, up_d = lower_offset, upper_offset
    cuts = {q_start, q_end}
    # a diagonal "binds" from the row where it reaches the rectangle's edge (inclusive), so a
    # slice that is already tight comes back as one piece rather than split at its corners
    if lo_d is not None:
        cuts |= {k_start - lo_d, k_end - lo_d}  # lower diagonal starts binding / empties rows
    if up_d is not None:
        cuts |= {k_end - up_d, k_start - up_d}  # upper diagonal stops binding / empties rows
    bounds = sorted(c for c in cuts if q_start <= c <= q_end)
    pieces: list[AttnSlice] = []
    for u, v in zip(bounds[:-1], bounds[1:]):
        if u >= v:
            continue
        lower = lo_d is not None and u + lo_d >= k_start
        upper = up_d is not None and u + up_d <= k_end - 1
        lo = u + lo_d if lower else k_start
        hi = u + up_d + 1 if upper else k_end
        if hi <= lo or (lower and upper and lo_d > up_d):
            continue
        k_lo = u + lo_d if lower else k_start
        k_hi = v + up_d if upper else k_end
        piece = AttnSlice(AttnRange(u, v), AttnRange(k_lo, k_hi),
                          AttnMaskType.from_diagonals(lower, upper))
        if pieces and _continues(pieces[-1], piece):
            prev = pieces.pop()
            piece = AttnSlice(AttnRange(prev.q_range.start, v),
                              AttnRange(prev.k_range.start, k_hi), piece.mask_type)
        pieces.append(piece)
    return pieces


def _continues(prev: AttnSlice, nxt: AttnSlice) -> bool:
    """True when ``nxt`` is the same shape as ``prev`` continued downwards (mergeable)."""
    if prev.mask_type != nxt.mask_type or prev.q_range.end != nxt.q_range.start:
        return False
    same_lower = (prev.lower_offset == nxt.lower_offset if prev.mask_type.has_lower_diagonal
                  else prev.k_range.start == nxt.k_range.start)
    same_upper = (prev.upper_offset == nxt.upper_offset if prev.mask_type.has_upper_diagonal
                  else prev.k_range.end == nxt.k_range.end)
    return same_lower and same_upper
