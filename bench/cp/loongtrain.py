"""LoongTrain: 2D head x context parallel with the double ring. The context ring of
cp_size / head_parallel_degree ranks is cut into windows of window_size ranks; KV turns around
the inner ring of a window (fast links) while the outer ring moves it to the next window, both
overlapped with compute; dk, dv take both rings back in the backward."""
from __future__ import annotations

from ._head_context import HeadContextParallel, head_context_reason
from .usp import default_ulysses_degree


def default_window_size(ring_degree: int) -> int:
    """Largest divisor w of the ring degree with w * w <= ring_degree (2 of 4, 2 of 8)."""
    return default_ulysses_degree(ring_degree)


class LoongTrain(HeadContextParallel):
    """Knobs: ``head_parallel_degree`` (Ulysses degree, default as USP's) and ``window_size``
    (inner ring size; must divide the context ring size; default its largest divisor w with
    w^2 <= it). Layout and head constraints as USP."""

    name = "loongtrain"
    knob_names = ("head_parallel_degree", "window_size")

    @classmethod
    def _check(cls, mask, num_heads_q, num_heads_kv, cp_size, head_parallel_degree=None,
               window_size=None):
        hp = default_ulysses_degree(cp_size) if head_parallel_degree is None else head_parallel_degree
        return head_context_reason(num_heads_q, cp_size, hp, window_size)

    def _degrees(self, head_parallel_degree=None, window_size=None):
        hp = default_ulysses_degree(self.cp_size) if head_parallel_degree is None else head_parallel_degree
        ring_degree = self.cp_size // hp
        return hp, default_window_size(ring_degree) if window_size is None else window_size
