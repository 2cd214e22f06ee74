"""Layouts partition the sequence; local sub-masks equal the dense mask restricted to them."""
from __future__ import annotations

import pytest
import torch

from bench.cp._sharding import (doc_ranges, layout_index, layout_len, local_slices, split_contiguous,
                                two_level_layout, zigzag_layout)
from bench.masks import STATIC_MASK_NAMES, build_mask
from magi_attention.common import AttnRange, to_dense

SEQLEN = 97
DOC_LENS = [40, 1, 30, 26]


def _covers_once(layouts, seqlen):
    index = torch.cat([layout_index(layout) for layout in layouts])
    return torch.equal(index.sort().values, torch.arange(seqlen))


@pytest.mark.parametrize("docs", [None, DOC_LENS], ids=["whole", "documents"])
@pytest.mark.parametrize("num_parts", [1, 2, 3, 4])
def test_zigzag_partitions_and_balances(docs, num_parts):
    layouts = zigzag_layout(doc_ranges(SEQLEN, docs), num_parts)
    assert _covers_once(layouts, SEQLEN)
    lengths = [layout_len(layout) for layout in layouts]
    # each document adds 2 chunks of near-even size to every part
    assert max(lengths) - min(lengths) <= 2 * len(docs or [SEQLEN])


def test_zigzag_pairs_mirror_chunks():
    layouts = zigzag_layout([AttnRange(0, 16)], 4)
    assert layouts[0] == [AttnRange(0, 2), AttnRange(14, 16)]
    assert layouts[3] == [AttnRange(6, 10)]  # chunks 3 and 4 touch: fused


@pytest.mark.parametrize("ring_degree,ulysses_degree", [(1, 4), (2, 2), (4, 1), (3, 2)])
def test_two_level_layout_groups_are_their_members(ring_degree, ulysses_degree):
    ranks, groups = two_level_layout(doc_ranges(SEQLEN, DOC_LENS), ring_degree, ulysses_degree)
    assert len(ranks) == ring_degree * ulysses_degree and len(groups) == ring_degree
    assert _covers_once(ranks, SEQLEN)
    for i, group in enumerate(groups):
        members = ranks[i * ulysses_degree:(i + 1) * ulysses_degree]
        assert torch.equal(torch.cat([layout_index(m) for m in members]), layout_index(group))


def test_split_contiguous_keeps_order():
    parts = split_contiguous([AttnRange(10, 13), AttnRange(0, 4)], 3)
    assert [layout_index(p).tolist() for p in parts] == [[10, 11, 12], [0, 1], [2, 3]]


MASK_PARAMS = {"sliding_window": {"window": 9}, "sliding_window_causal": {"window": 9},
               "global_sliding_window": {"window": 9, "num_global": 5},
               "block_causal_document": {"block_size": 7},
               "hash_sparse": {"run_len": 4, "num_buckets": 3}}


@pytest.mark.parametrize("mask_name", STATIC_MASK_NAMES)
def test_local_slices_equal_the_dense_mask_restricted(mask_name):
    mask = build_mask(mask_name, SEQLEN, doc_lens=DOC_LENS, **MASK_PARAMS.get(mask_name, {}))
    dense = to_dense(mask.slices, SEQLEN)
    layouts = zigzag_layout(doc_ranges(SEQLEN, DOC_LENS), 3)
    for q_layout in layouts:
        for k_layout in layouts + [[AttnRange(0, SEQLEN)]]:
            qi, ki = layout_index(q_layout), layout_index(k_layout)
            got = to_dense(local_slices(mask.slices, q_layout, k_layout), len(qi), len(ki))
            assert torch.equal(got, dense[qi][:, ki]), (mask_name, q_layout, k_layout)
