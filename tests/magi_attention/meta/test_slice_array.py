"""SliceArray's vectorised clip / area against AttnSlice.clip and the dense mask."""
import random

import numpy as np
import pytest

from magi_attention.common import AttnMaskType, AttnRange, AttnSlice, to_dense
from magi_attention.meta.slice_array import SliceArray, chunk_areas


def random_slices(rng, seqlen, n):
    out = []
    for _ in range(n):
        a, b = sorted(rng.sample(range(seqlen + 1), 2))
        c, d = sorted(rng.sample(range(seqlen + 1), 2))
        out.append(AttnSlice.make(a, b, c, d, rng.choice(list(AttnMaskType))))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_clip_matches_attnslice_clip_cell_for_cell(seed):
    rng = random.Random(seed)
    seqlen = 40
    slices = random_slices(rng, seqlen, 6)
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


@pytest.mark.parametrize("seed", range(10))
def test_chunk_areas_match_dense_row_counts(seed):
    rng = random.Random(seed)
    seqlen, chunk_size = 48, 8
    slices = random_slices(rng, seqlen, 5)
    areas = chunk_areas(SliceArray.from_slices(slices), seqlen, chunk_size)
    per_row = sum(to_dense([s], seqlen).sum(dim=1).numpy() for s in slices)
    np.testing.assert_array_equal(areas, per_row.reshape(-1, chunk_size).sum(axis=1))
