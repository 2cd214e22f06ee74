"""Half-open token ranges ``[start, end)``, the unit every mask and solver speaks in."""
from __future__ import annotations

from dataclasses import dataclass


class RangeError(ValueError):
    """A range that is negative, inverted, or outside the sequence it indexes."""


@dataclass(frozen=True, order=True)
class AttnRange:
    """A half-open range of token indices ``[start, end)`` with ``0 <= start <= end``."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if not isinstance(self.start, int) or not isinstance(self.end, int):
            raise RangeError(f"range {self!r} must have int bounds, got "
                             f"{type(self.start).__name__}, {type(self.end).__name__}")
        if self.start < 0:
            raise RangeError(f"range [{self.start}, {self.end}) starts below 0")
        if self.start > self.end:
            raise RangeError(f"range [{self.start}, {self.end}) is inverted (start > end)")

    @classmethod
    def from_pair(cls, pair) -> "AttnRange":
        start, end = (int(x) for x in pair)
        return cls(start, end)

    @property
    def seqlen(self) -> int:
        return self.end - self.start

    def is_empty(self) -> bool:
        return self.start == self.end

    def intersect(self, other: "AttnRange") -> "AttnRange":
        start, end = max(self.start, other.start), min(self.end, other.end)
        return AttnRange(start, max(start, end))

    def shift(self, offset: int) -> "AttnRange":
        return AttnRange(self.start + offset, self.end + offset)

    def check_within(self, bound: int, what: str = "range") -> None:
        """Raise RangeError if this range ends past ``bound``."""
        if self.end > bound:
            raise RangeError(f"{what} [{self.start}, {self.end}) ends past seqlen={bound}")

    def __repr__(self) -> str:
        return f"[{self.start}, {self.end})"
