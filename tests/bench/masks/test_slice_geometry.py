"""The vectorised geometry agrees with magi_attention.common on random (overlapping) slices."""
import numpy as np
import pytest
import torch

from bench.masks._geometry import SliceArrays, fast_union_area, row_intervals
from magi_attention.common import AttnMaskType, AttnSlice, to_dense, union_area


def random_slices(seed: int, seqlen: int, count: int) -> list[AttnSlice]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        q0, q1 = sorted(rng.integers(0, seqlen + 1, size=2).tolist())
        k0, k1 = sorted(rng.integers(0, seqlen + 1, size=2).tolist())
        out.append(AttnSlice.make(q0, q1, k0, k1, AttnMaskType(int(rng.integers(0, 4)))))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_areas_match_attn_slice_area(seed):
    slices = random_slices(seed, 97, 30)
    assert SliceArrays.from_slices(slices).areas().tolist() == [s.area() for s in slices]


@pytest.mark.parametrize("seed", range(20))
def test_fast_union_area_matches_union_area(seed):
    slices = random_slices(100 + seed, 97, int(np.random.default_rng(seed).integers(1, 12)))
    assert fast_union_area(slices) == union_area(slices) == int(to_dense(slices, 97).sum())


@pytest.mark.parametrize("seed", range(10))
def test_row_intervals_rebuild_dense(seed):
    slices = random_slices(200 + seed, 61, 8)
    rows, lo, hi = row_intervals(SliceArrays.from_slices(slices), 0, 61, 61)
    rebuilt = torch.zeros(61, 61, dtype=torch.bool)
    for r, a, b in zip(rows.tolist(), lo.tolist(), hi.tolist()):
        assert not rebuilt[r, a:b].any() and a < b  # disjoint, non-empty
        rebuilt[r, a:b] = True
    assert torch.equal(rebuilt, to_dense(slices, 61))
    assert all(b < c for r, b, c, r2 in zip(rows, hi, lo[1:], rows[1:]) if r == r2)  # merged
