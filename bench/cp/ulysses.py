"""Ulysses (DeepSpeed): all-to-all from sequence-sharded to head-sharded, local attention over
the whole sequence with cp_size-th of the heads, all-to-all back."""
from __future__ import annotations

from ._head_context import HeadContextParallel, head_context_reason


class Ulysses(HeadContextParallel):
    """Sequence layout: contiguous, near-even. Needs num_heads_q % cp_size == 0; with GQA the
    KV heads are repeated up to a multiple of cp_size (MHA at worst), as the published
    benchmark does, and ``notes`` says so. Any shared-by-all-heads AttnSlice mask: the local
    kernel sees the whole sequence and the global mask. No knobs."""

    name = "ulysses"

    @classmethod
    def _check(cls, mask, num_heads_q, num_heads_kv, cp_size, **knobs):
        return head_context_reason(num_heads_q, cp_size, cp_size, None)

    def _degrees(self):
        return self.cp_size, 1
