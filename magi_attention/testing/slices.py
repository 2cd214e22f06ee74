"""Random AttnSlices for property tests of the mask algebra, the solvers and the kernels."""
from __future__ import annotations

import random

from ..common import AttnMaskType, AttnSlice


def document_slices(lens, mask_type: AttnMaskType = AttnMaskType.FULL) -> list[AttnSlice]:
    """One slice a document, the documents of ``lens`` tokens back to back, each attending
    only to itself with ``mask_type`` (a varlen batch's mask)."""
    out, start = [], 0
    for n in lens:
        out.append(AttnSlice.make(start, start + n, start, start + n, mask_type))
        start += n
    return out


def random_slices(rng: random.Random, seqlen_q: int, seqlen_k: int, n: int) -> list[AttnSlice]:
    """``n`` slices with uniform random (possibly empty) q_range in ``[0, seqlen_q]``, k_range in
    ``[0, seqlen_k]`` and mask type; they may overlap, be loose or keep no cell."""
    out = []
    for _ in range(n):
        a, b = sorted(rng.sample(range(seqlen_q + 1), 2))
        c, d = sorted(rng.sample(range(seqlen_k + 1), 2))
        out.append(AttnSlice.make(a, b, c, d, rng.choice(list(AttnMaskType))))
    return out
