"""The predictor's vectorised sub-masks against bench.cp._sharding.local_slices, cell by cell."""
from __future__ import annotations

import numpy as np
import pytest

from bench.cp._sharding import doc_ranges, local_slices, two_level_layout, zigzag_layout
from bench.cp.predict.submask import local_mask
from bench.data import sample_doc_lens
from bench.masks import MASK_NAMES, build_mask
from magi_attention.common import AttnRange
from magi_attention.common.slice_array import SliceArray

SEQLEN = 250
DOC_LENS = sample_doc_lens(SEQLEN, seed=8, cap_ratio=0.5)
SMALL = {"sliding_window": {"window": 24}, "sliding_window_causal": {"window": 24},
         "global_sliding_window": {"window": 24, "num_global": 8},
         "block_causal_document": {"block_size": 16}, "hash_sparse": {"run_len": 8, "num_buckets": 4},
         "block_sparse": {"block_q": 32, "block_k": 32},
         "var_block_sparse": {"min_block": 16, "max_block": 64}}


def _dense(slices, seqlen_q: int, seqlen_k: int) -> np.ndarray:
    """bool [seqlen_q, seqlen_k] from AttnSlices, row by row from each slice's definition."""
    out = np.zeros((seqlen_q, seqlen_k), dtype=bool)
    rows = np.arange(seqlen_q)
    for s in slices:
        lo, hi = s.row_bounds(rows)
        for q in range(s.q_range.start, s.q_range.end):
            out[q, max(lo[q], 0):max(hi[q], 0)] = True
    return out


def _layouts(cp_size: int):
    docs = doc_ranges(SEQLEN, DOC_LENS)
    ranks, groups = two_level_layout(docs, cp_size // 2, 2)
    return zigzag_layout(docs, cp_size) + ranks + groups + [[AttnRange(0, SEQLEN)]]


@pytest.mark.parametrize("name", [m for m in MASK_NAMES if m != "block_sparse"] )
def test_local_mask_equals_local_slices(name):
    mask = build_mask(name, SEQLEN, doc_lens=DOC_LENS, **SMALL.get(name, {}))
    arr = SliceArray.from_slices(mask.slices)
    layouts = _layouts(4)
    for q_layout in layouts[:6]:
        for k_layout in layouts:
            nq = sum(r.seqlen for r in q_layout)
            nk = sum(r.seqlen for r in k_layout)
            want = _dense(local_slices(list(mask.slices), q_layout, k_layout), nq, nk)
            got = _dense(local_mask(arr, q_layout, k_layout).to_slices(), nq, nk)
            np.testing.assert_array_equal(got, want)


def test_empty_layout_gives_no_slices():
    mask = build_mask("causal", SEQLEN)
    assert len(local_mask(SliceArray.from_slices(mask.slices), [], [AttnRange(0, 10)])) == 0
