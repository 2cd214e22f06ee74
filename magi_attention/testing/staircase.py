"""Random staircase masks (FA4 varlen with separate q and key segments x one window) as slices,
for the native-form tests: each row's keys written out from FA4's bottom-right rule."""
from __future__ import annotations

import random

from ..common import AttnMaskType, AttnSlice

WINDOWS = ("full", "causal", "window")


def random_staircase(rng: random.Random, num_entries: int, max_len: int, kind: str
                     ) -> tuple[list[AttnSlice], int, int]:
    """(slices, seqlen_q, seqlen_k): ``num_entries`` entries of 0..max_len q rows and keys (some
    with no rows or no keys), ``kind`` in WINDOWS; full and causal entries come as one typed
    slice half the time, otherwise (and for windows) one FULL slice per row."""
    left = right = None
    if kind == "causal":
        right = 0
    elif kind == "window":
        left, right = rng.randint(0, max_len // 2), rng.randint(0, max_len // 2)
    slices, q0, k0 = [], 0, 0
    for _ in range(num_entries):
        lq, lk = rng.randint(0, max_len), rng.randint(0, max_len)
        if rng.random() < 0.15:
            lq = 0
        elif rng.random() < 0.15:
            lk = 0
        if kind != "window" and lq and lk and rng.random() < 0.5:
            mask_type = AttnMaskType.FULL if kind == "full" else AttnMaskType.CAUSAL
            slices.append(AttnSlice.make(q0, q0 + lq, k0, k0 + lk, mask_type))
        else:
            for i in range(lq):
                shift = i + lk - lq  # FA4 varlen: the diagonal ends at the entry's last cell
                lo = 0 if left is None else max(0, shift - left)
                hi = lk if right is None else min(lk, shift + right + 1)
                if lo < hi:
                    slices.append(AttnSlice.make(q0 + i, q0 + i + 1, k0 + lo, k0 + hi))
        q0, k0 = q0 + lq, k0 + lk
    return slices, max(q0, 1), max(k0, 1)
