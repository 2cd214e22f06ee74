"""AttnMaskType: the four shapes a slice's rectangle can take. The only int mapping in the project."""
from __future__ import annotations

import enum


class AttnMaskType(enum.IntEnum):
    """Shape of the mask inside a slice's rectangle ``q_range x k_range``.

    With q, k absolute token indices and ``[q_start, q_end) x [k_start, k_end)`` the rectangle:

    - FULL: every (q, k).
    - CAUSAL: lower triangle aligned to the bottom-right corner, ``q - q_end >= k - k_end``.
    - INVCAUSAL: upper triangle aligned to the top-left corner, ``q - q_start <= k - k_start``.
    - BICAUSAL: both at once (a band of width ``k_len - q_len + 1``).
    """

    FULL = 0
    CAUSAL = 1
    INVCAUSAL = 2
    BICAUSAL = 3

    @property
    def has_upper_diagonal(self) -> bool:
        """Keys are bounded above by a diagonal through the bottom-right corner."""
        return self in (AttnMaskType.CAUSAL, AttnMaskType.BICAUSAL)

    @property
    def has_lower_diagonal(self) -> bool:
        """Keys are bounded below by a diagonal through the top-left corner."""
        return self in (AttnMaskType.INVCAUSAL, AttnMaskType.BICAUSAL)

    @classmethod
    def from_diagonals(cls, lower: bool, upper: bool) -> "AttnMaskType":
        return {(False, False): cls.FULL, (False, True): cls.CAUSAL,
                (True, False): cls.INVCAUSAL, (True, True): cls.BICAUSAL}[(lower, upper)]

    @classmethod
    def parse(cls, value) -> "AttnMaskType":
        """Accept an AttnMaskType, its int value or its (case-insensitive) name."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls[value.upper()]
            except KeyError:
                raise ValueError(f"unknown mask type {value!r}; expected one of "
                                 f"{[m.name.lower() for m in cls]}") from None
        try:
            return cls(int(value))
        except ValueError:
            raise ValueError(f"unknown mask type {value!r}; expected 0..3") from None
