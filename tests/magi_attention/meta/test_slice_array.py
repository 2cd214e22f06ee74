"""chunk_areas (q-chunk loads for the dispatch solver) against dense row counts."""
import random

import numpy as np
import pytest

from magi_attention.common import to_dense
from magi_attention.meta.slice_array import SliceArray, chunk_areas
from magi_attention.testing import random_slices


@pytest.mark.parametrize("seed", range(10))
def test_chunk_areas_match_dense_row_counts(seed):
    rng = random.Random(seed)
    seqlen, chunk_size = 48, 8
    slices = random_slices(rng, seqlen, seqlen, 5)
    areas = chunk_areas(SliceArray.from_slices(slices), seqlen, chunk_size)
    per_row = sum(to_dense([s], seqlen).sum(dim=1).numpy() for s in slices)
    np.testing.assert_array_equal(areas, per_row.reshape(-1, chunk_size).sum(axis=1))
