"""SliceArray's vectorised geometry against AttnSlice and the dense mask, on random (overlapping,
loose, empty) slices."""
import random

import pytest
import torch

from magi_attention.common import AttnRange, SliceArray, to_dense, union_area
from magi_attention.common.mask import _overlapping_union_area
from magi_attention.testing import random_slices


@pytest.mark.parametrize("seed", range(20))
def test_clip_matches_attnslice_clip_cell_for_cell(seed):
    rng = random.Random(seed)
    seqlen = 40
    slices = random_slices(rng, seqlen, seqlen, 6)
    arr = SliceArray.from_slices(slices)
    for _ in range(5):
        q0, q1 = sorted(rng.sample(range(seqlen + 1), 2))
        k0, k1 = sorted(rng.sample(range(seqlen + 1), 2))
        pieces, src = arr.clip(q0, q1, k0, k1)
        for i, s in enumerate(slices):
            mine = pieces.take(src == i)
            expect = s.clip(AttnRange(q0, q1), AttnRange(k0, k1))
            got_dense = to_dense(mine.to_slices(), seqlen, seqlen)
            assert (got_dense == to_dense(expect, seqlen, seqlen)).all()
            assert int(mine.areas().sum()) == sum(p.area() for p in expect)
            # pieces are disjoint, so their areas add up to the dense count
            assert int(mine.areas().sum()) == int(got_dense.sum())


@pytest.mark.parametrize("seed", range(20))
def test_areas_match_attn_slice_area(seed):
    slices = random_slices(random.Random(seed), 97, 97, 30)
    assert SliceArray.from_slices(slices).areas().tolist() == [s.area() for s in slices]


@pytest.mark.parametrize("seed", range(20))
def test_union_area_fast_path_matches_slice_by_slice_and_dense(seed):
    rng = random.Random(100 + seed)
    slices = random_slices(rng, 97, 97, rng.randint(1, 12))
    assert (union_area(slices) == _overlapping_union_area(slices)
            == int(to_dense(slices, 97).sum()))


@pytest.mark.parametrize("seed", range(10))
def test_row_intervals_rebuild_dense(seed):
    slices = random_slices(random.Random(200 + seed), 61, 61, 8)
    rows, lo, hi = SliceArray.from_slices(slices).row_intervals(0, 61, 61)
    rebuilt = torch.zeros(61, 61, dtype=torch.bool)
    for r, a, b in zip(rows.tolist(), lo.tolist(), hi.tolist()):
        assert not rebuilt[r, a:b].any() and a < b  # disjoint, non-empty
        rebuilt[r, a:b] = True
    assert torch.equal(rebuilt, to_dense(slices, 61))
    assert all(b < c for r, b, c, r2 in zip(rows, hi, lo[1:], rows[1:]) if r == r2)  # merged


@pytest.mark.parametrize("seed", range(10))
def test_transpose_and_spans_match_dense(seed):
    seqlen = 50
    slices = random_slices(random.Random(300 + seed), seqlen, seqlen, 8)
    arr = SliceArray.from_slices(slices)
    assert torch.equal(to_dense(arr.transpose().to_slices(), seqlen), to_dense(slices, seqlen).T)
    (q_first, q_last), (k_first, k_last) = arr.nonempty_rows(), arr.nonempty_cols()
    for i, s in enumerate(slices):
        one = to_dense([s], seqlen)
        rows, cols = one.any(dim=1).nonzero().flatten(), one.any(dim=0).nonzero().flatten()
        if rows.numel() == 0:
            assert q_last[i] <= q_first[i] and k_last[i] <= k_first[i]
            continue
        # kept rows and kept columns are each one contiguous run
        assert (q_first[i], q_last[i]) == (rows[0], rows[-1] + 1) and len(rows) == q_last[i] - q_first[i]
        assert (k_first[i], k_last[i]) == (cols[0], cols[-1] + 1) and len(cols) == k_last[i] - k_first[i]
