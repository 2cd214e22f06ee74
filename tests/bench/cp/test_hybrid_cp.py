"""HybridCP's sub-group sizing and load-balanced placement (pure host logic)."""
from __future__ import annotations

import pytest

from bench.cp.hybrid_cp import (place_documents, place_samples, place_samples_capped,
                                slices_by_doc, sub_group_size, token_share_note)
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


def _tokens(lengths, sizes, blocks, cp_size):
    tokens = [0.0] * cp_size
    for n, g, b in zip(lengths, sizes, blocks):
        for r in range(b * g, (b + 1) * g):
            tokens[r] += n / g
    return tokens


def test_capped_placement_keeps_the_even_share_where_work_alone_would_not():
    """One heavy document and eight light ones, S = 12 over 2 ranks: balancing work alone puts
    the heavy one alone on a rank (4 tokens against 8); capped at 6 tokens a rank, no rank
    holds more (the heavy one spreads over both, which lowers its rank's load, and so do the
    light ones while the ranks are even: Megatron's work model has no communication term)."""
    lengths, works = [4] + [1] * 8, [16] + [1] * 8
    free = place_samples([1] * 9, works, 2)
    assert sorted(_tokens(lengths, [1] * 9, free, 2)) == [4, 8]
    sizes, blocks = place_samples_capped(lengths, works, [1] * 9, 2, capacity=6)
    assert _tokens(lengths, sizes, blocks, 2) == [6, 6] and sizes[0] == 2


def test_capped_placement_takes_a_larger_group_where_the_smallest_does_not_fit():
    # S = 8 over 2 ranks, 4 tokens each: the 6-token document spans both (3 + 3), so the
    # 2-token one can only fit spread over both as well
    sizes, blocks = place_samples_capped([6, 2], [36, 4], [2, 1], 2, capacity=4)
    assert sizes == [2, 2] and blocks == [0, 0]


def test_a_sample_that_fits_nowhere_spreads_over_every_rank():
    sizes, blocks = place_samples_capped([3, 3, 3], [9, 9, 9], [1, 1, 1], 2, capacity=4)
    assert sizes[2] == 2 and blocks[2] == 0  # the third finds no rank with room for 3


def test_capped_documents_hold_the_even_share_on_a_real_mask():
    mask = build_mask("causal_document", 4096, doc_lens=[1024] + [256] * 12)
    docs, _, free_sizes, free_blocks = place_documents(mask, 2)
    lengths = [d.seqlen for d in docs]
    assert sorted(_tokens(lengths, free_sizes, free_blocks, 2)) == [1024, 3072]
    _, _, sizes, blocks = place_documents(mask, 2, token_capacity=1.0)
    assert _tokens(lengths, sizes, blocks, 2) == [2048, 2048]
