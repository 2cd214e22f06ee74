"""Long key walks cut into parts for the Triton forward.

One call whose rows walk 128k keys ran 5-6% below two calls over 64k keys each and their lse
merge (one H200, GQA 64:8, head_dim 128, bf16, 64k rows: full 553 against 582 TFLOPs/s, causal
550 against 585; docs/design/ffa_kernels.md); over 32k keys
one call was 1% ahead. So a plan whose rows may walk more than SPLIT_ABOVE keys runs as calls
over equal key ranges of at most PART_KEYS keys, merged by lse. The cut is planned once per
plan (host work, cached in it); a call launches the parts' kernels and the merges only. The
backward needs no cut: it runs over the whole mask from the merged out and lse (measured within
1% of the cut backward at 128k keys).
"""
from __future__ import annotations

import numpy as np

from ...common.slice_array import SliceArray
from ..plan import FlexAttnPlan

PART_KEYS = 65536
# between the measured points (32k keys: one call ahead; 128k: the parts 5-6% ahead), where
# the K and V of one KV head (512 bytes a key at head_dim 128, bf16) pass the L2's 50 MB
SPLIT_ABOVE = 98304

KeyPart = tuple[int, int, FlexAttnPlan]  # (key start, key end, the part's plan over its keys)


def longest_walk(slices: SliceArray, seqlen_q: int) -> int:
    """An upper bound of the keys any row visits: the summed key ranges of the slices it meets."""
    if not len(slices):
        return 0
    width = slices.k_end - slices.k_start
    per_row = np.zeros(seqlen_q + 1, dtype=np.int64)
    np.add.at(per_row, slices.q_start, width)
    np.add.at(per_row, slices.q_end, -width)
    return int(np.cumsum(per_row[:-1]).max())


def key_parts(plan: FlexAttnPlan) -> tuple[KeyPart, ...] | None:
    """The plan's mask cut into equal key ranges of at most PART_KEYS keys, each part's slices
    shifted onto its own keys; None where no row may walk more than SPLIT_ABOVE keys (or one
    part would hold every slice)."""
    walk = min(longest_walk(plan.slices, plan.seqlen_q), plan.seqlen_k)
    if walk <= SPLIT_ABOVE:
        return None
    n = -(-plan.seqlen_k // PART_KEYS)
    bounds = np.linspace(0, plan.seqlen_k, n + 1).round().astype(np.int64)
    parts = []
    for k0, k1 in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        clipped, _ = plan.slices.clip(0, plan.seqlen_q, k0, k1)
        if len(clipped):
            parts.append((k0, k1, FlexAttnPlan(clipped.shift(0, -k0), plan.seqlen_q, k1 - k0)))
    return tuple(parts) if len(parts) > 1 else None
