"""Ring attention with P2P (ring-flash-attention style): KV blocks go around the ring by
isend/irecv overlapped with attention on the block in hand, partial outputs merged by lse;
dk, dv travel the ring with the KV in the backward."""
from __future__ import annotations

from ._head_context import HeadContextParallel


class RingP2P(HeadContextParallel):
    """Layout: zigzag (2 * cp_size chunks, rank r holds chunks r and 2 * cp_size - 1 - r), per
    document when the mask has doc_lens. Each step's sub-mask is the global mask clipped to
    (local q) x (KV block in hand), so any shared AttnSlice mask is exact. No knobs."""

    name = "ring_p2p"

    def _degrees(self):
        return 1, self.cp_size
