"""AttnRanges: an ordered list of AttnRange with set-like helpers (merge, total length)."""
from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import torch

from .range import AttnRange


class AttnRanges:
    """An ordered collection of half-open ranges; may overlap unless ``merge()``-d."""

    def __init__(self, ranges: Iterable[AttnRange | Sequence[int]] = ()) -> None:
        self._ranges = [r if isinstance(r, AttnRange) else AttnRange.from_pair(r) for r in ranges]

    @classmethod
    def from_tensor(cls, t: torch.Tensor) -> "AttnRanges":
        if t.dim() != 2 or t.shape[1] != 2:
            raise ValueError(f"ranges tensor must be [num_ranges, 2], got shape {tuple(t.shape)}")
        return cls(AttnRange(int(a), int(b)) for a, b in t.tolist())

    @classmethod
    def from_cu_seqlens(cls, cu_seqlens: Sequence[int]) -> "AttnRanges":
        cu = [int(x) for x in cu_seqlens]
        return cls(AttnRange(a, b) for a, b in zip(cu[:-1], cu[1:]))

    def to_tensor(self, device="cpu") -> torch.Tensor:
        data = [[r.start, r.end] for r in self._ranges]
        return torch.tensor(data, dtype=torch.int32, device=device).reshape(-1, 2)

    def __iter__(self) -> Iterator[AttnRange]:
        return iter(self._ranges)

    def __len__(self) -> int:
        return len(self._ranges)

    def __getitem__(self, i):
        return self._ranges[i]

    def __eq__(self, other) -> bool:
        return isinstance(other, AttnRanges) and self._ranges == other._ranges

    def __repr__(self) -> str:
        return f"AttnRanges({self._ranges})"

    def append(self, r: AttnRange) -> None:
        self._ranges.append(r)

    @property
    def total_seqlen(self) -> int:
        """Sum of lengths, counting overlaps more than once."""
        return sum(r.seqlen for r in self._ranges)

    def merge(self) -> "AttnRanges":
        """Sorted union: overlapping or touching ranges fused, empty ones dropped."""
        out: list[AttnRange] = []
        for r in sorted(r for r in self._ranges if not r.is_empty()):
            if out and r.start <= out[-1].end:
                out[-1] = AttnRange(out[-1].start, max(out[-1].end, r.end))
            else:
                out.append(r)
        return AttnRanges(out)

    def intersect(self, other: "AttnRanges") -> "AttnRanges":
        """Sorted, merged intersection of two range sets."""
        a, b = self.merge()._ranges, other.merge()._ranges
        out, i, j = [], 0, 0
        while i < len(a) and j < len(b):
            start, end = max(a[i].start, b[j].start), min(a[i].end, b[j].end)
            if start < end:
                out.append(AttnRange(start, end))
            if a[i].end < b[j].end:
                i += 1
            else:
                j += 1
        return AttnRanges(out)

    def check_within(self, bound: int, what: str = "range") -> None:
        for r in self._ranges:
            r.check_within(bound, what)
