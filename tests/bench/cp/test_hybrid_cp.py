"""HybridCP's sub-group sizing and load-balanced placement (pure host logic)."""
from __future__ import annotations

import pytest

from bench.cp.hybrid_cp import place_samples, slices_by_doc, sub_group_size, token_share_note
from bench.cp._sharding import doc_ranges
from bench.masks import build_mask


@pytest.mark.parametrize("sample_len,expect", [(1, 1), (256, 1), (257, 2), (512, 2), (513, 4),
                                               (1024, 4), (2048, 8), (4096, 8)])
def test_sub_group_size_fits_rank_capacity(sample_len, expect):
    # S = 2048 over 8 ranks: 256 tokens a rank
    assert sub_group_size(2048, sample_len, 8) == expect


def test_placement_balances_equal_samples():
    blocks = place_samples([1] * 8, [10] * 8, 4)
    assert sorted(blocks) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_placement_keeps_blocks_aligned_and_fills_the_lightest():
    sizes, works = [2, 1, 1, 1, 1], [40, 10, 10, 10, 10]
    blocks = place_samples(sizes, works, 4)
    assert blocks[0] in (0, 1)  # a 2-rank sub-group sits on ranks {0,1} or {2,3}
    load = [0.0] * 4
    for g, w, b in zip(sizes, works, blocks):
        for r in range(b * g, (b + 1) * g):
            load[r] += w / g
    assert max(load) - min(load) <= 10


def test_cross_document_slice_is_named():
    mask = build_mask("share_question", 64, doc_lens=[16, 48])
    reason = slices_by_doc(mask.slices, doc_ranges(64, mask.doc_lens))
    assert isinstance(reason, str) and "across documents" in reason


def test_empty_slice_does_not_decide_support():
    """q [5, 5) x k [4, 5) lies at a document border but covers nothing."""
    from magi_attention.common import AttnMaskType, AttnSlice
    docs = doc_ranges(10, [5, 5])
    inside = AttnSlice.make(0, 5, 0, 5, AttnMaskType.CAUSAL)
    empty = AttnSlice.make(5, 5, 4, 5, AttnMaskType.FULL)
    assert slices_by_doc([inside, empty], docs) == [[inside], []]
    across = AttnSlice.make(5, 6, 4, 6, AttnMaskType.FULL)
    assert "across documents" in slices_by_doc([inside, across], docs)


def test_unequal_token_shares_are_noted():
    """Rows say when the work-balanced placement left ranks unequal token counts (one long
    document alone on a rank, the short ones on the other): readers compare magi's equal
    shards against it."""
    assert token_share_note([4096, 4096]) == ""
    assert token_share_note([8192, 24576]) == "tokens_per_rank=8192-24576"
