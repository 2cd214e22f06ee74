"""Random AttnSlices for property tests of the mask algebra, the solvers and the kernels."""
from __future__ import annotations

import random

from ..common import AttnMaskType, AttnSlice


def random_slices(rng: random.Random, seqlen_q: int, seqlen_k: int, n: int) -> list[AttnSlice]:
    """``n`` slices with uniform random (possibly empty) q_range in ``[0, seqlen_q]``, k_range in
    ``[0, seqlen_k]`` and mask type; they may overlap, be loose or keep no cell."""
    out = []
    for _ in range(n):
        a, b = sorted(rng.sample(range(seqlen_q + 1), 2))
        c, d = sorted(rng.sample(range(seqlen_k + 1), 2))
        out.append(AttnSlice.make(a, b, c, d, rng.choice(list(AttnMaskType))))
    return out
