"""USP (unified sequence parallel, yunchang): Ulysses inside groups of ulysses_degree ranks,
ring P2P across the ring_degree groups; ulysses_degree x ring_degree = cp_size."""
from __future__ import annotations

from ._head_context import HeadContextParallel, head_context_reason


def default_ulysses_degree(cp_size: int) -> int:
    """Largest divisor u of cp_size with u * u <= cp_size (2 x 2 at 4 ranks, 2 x 4 at 8)."""
    return max(u for u in range(1, cp_size + 1) if cp_size % u == 0 and u * u <= cp_size)


def resolve_degrees(cp_size: int, ulysses_degree: int | None, ring_degree: int | None) -> tuple[int, int] | str:
    """(ulysses_degree, ring_degree) from either or both knobs, or the reason they do not fit."""
    if ulysses_degree is None and ring_degree is None:
        ulysses_degree = default_ulysses_degree(cp_size)
    if ulysses_degree is None:
        if ring_degree < 1 or cp_size % ring_degree:
            return f"ring_degree={ring_degree} must divide cp_size={cp_size}"
        ulysses_degree = cp_size // ring_degree
    ring_degree = cp_size // ulysses_degree if ring_degree is None else ring_degree
    if ulysses_degree * ring_degree != cp_size:
        return (f"ulysses_degree={ulysses_degree} x ring_degree={ring_degree} != "
                f"cp_size={cp_size}")
    return ulysses_degree, ring_degree


class USP(HeadContextParallel):
    """Knobs: ``ulysses_degree`` and/or ``ring_degree`` (default: ulysses_degree the largest
    divisor u of cp_size with u^2 <= cp_size). Layout: zigzag over the ring groups (per
    document with doc_lens), contiguous inside a group. Needs num_heads_q % ulysses_degree == 0;
    GQA KV heads are repeated up to a multiple of it when needed (``notes``)."""

    name = "usp"
    knob_names = ("ulysses_degree", "ring_degree")

    @classmethod
    def _check(cls, mask, num_heads_q, num_heads_kv, cp_size, ulysses_degree=None,
               ring_degree=None):
        degrees = resolve_degrees(cp_size, ulysses_degree, ring_degree)
        if isinstance(degrees, str):
            return degrees
        return head_context_reason(num_heads_q, cp_size, degrees[0], None)

    def _degrees(self, ulysses_degree=None, ring_degree=None):
        ulysses_degree, ring_degree = resolve_degrees(self.cp_size, ulysses_degree, ring_degree)
        return ulysses_degree, ring_degree
