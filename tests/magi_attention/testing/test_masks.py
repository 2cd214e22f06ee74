"""magi_attention.testing.masks: each builder's slices give the dense mask of its definition,
written here from token positions alone (q, k indices and document ids), never from slices."""
import numpy as np
import pytest
import torch

from magi_attention.common import to_dense
from magi_attention.testing import masks

S = 300
DOCS = [70, 20, 130, 80]


def _grid(seqlen=S):
    q = torch.arange(seqlen)[:, None]
    k = torch.arange(seqlen)[None, :]
    return q, k


def _doc_ids(doc_lens):
    """(document id, position within it) of every token."""
    doc = torch.repeat_interleave(torch.arange(len(doc_lens)), torch.tensor(doc_lens))
    starts = torch.tensor([0, *np.cumsum(doc_lens)[:-1].tolist()])
    return doc, torch.arange(sum(doc_lens)) - starts[doc]


def _same(slices, want, seqlen=S):
    assert torch.equal(to_dense(slices, seqlen, seqlen), want.expand(seqlen, seqlen))


def test_single_sequence_patterns_match_their_definitions():
    q, k = _grid()
    _same(masks.full(S), torch.ones(S, S, dtype=torch.bool))
    _same(masks.causal(S), k <= q)
    _same(masks.sliding_window(S, 25), (q - k).abs() <= 25)
    _same(masks.sliding_window_causal(S, 25), (q - k >= 0) & (q - k <= 25))
    _same(masks.global_sliding_window(S, 25, 7), ((q - k).abs() <= 25) | (q < 7) | (k < 7))
    _same(masks.prefix_lm_causal(S, 40), (k <= q) | ((q < 40) & (k < 40)))
    assert len(masks.sliding_window_causal(S, 25)) == 2  # a corner and a band


def test_document_patterns_match_their_definitions():
    q, k = _grid()
    doc, pos = _doc_ids(DOCS)
    same_doc = doc[:, None] == doc[None, :]
    _same(masks.full_document(DOCS), same_doc)
    _same(masks.causal_document(DOCS), same_doc & (k <= q))
    _same(masks.block_causal_document(DOCS, 16),
          same_doc & (pos[None, :] // 16 <= pos[:, None] // 16))
    _same(masks.share_question(DOCS),
          (same_doc & (k <= q)) | ((doc[:, None] > 0) & (doc[None, :] == 0)))


@pytest.mark.parametrize("seed", range(3))
def test_random_doc_lens_sum_to_the_sequence_within_the_cap(seed):
    for seqlen in (256, 1531, 16384):
        lens = masks.random_doc_lens(seqlen, seed)
        assert sum(lens) == seqlen and min(lens) >= 1 and max(lens) <= seqlen // 4
        assert lens == masks.random_doc_lens(seqlen, seed)  # a pure function of the seed
    assert masks.random_doc_lens(16384, 0) != masks.random_doc_lens(16384, 1)


def test_block_sparse_keeps_exactly_the_kept_blocks():
    q, k = _grid(12)
    kept = np.array([[1, 1, 0], [0, 0, 1], [1, 0, 1]], dtype=bool)
    edges = [0, 4, 8, 12]
    want = torch.from_numpy(kept)[q // 4, k // 4]
    slices = masks.block_sparse(edges, edges, kept)
    _same(slices, want, 12)
    assert len(slices) == 4  # a run of kept key blocks is one slice


@pytest.mark.parametrize("seed", range(3))
def test_random_block_sparse_keeps_a_fixed_share_of_each_q_blocks_keys(seed):
    dense = to_dense(masks.random_block_sparse(1024, seed, block=64, density=0.25), 1024, 1024)
    per_block = dense.reshape(16, 64, 16, 64).any(3).any(1)
    assert (per_block.sum(1) == 4).all()  # round(0.25 * 16) key blocks each q block
    full = dense.reshape(16, 64, 16, 64).all(3).all(1)
    assert torch.equal(per_block, full)  # whole blocks


def test_qk_sparse_is_causal_on_the_kept_rows_and_keys():
    q, k = _grid()
    rows, cols = [(10, 30), (200, 240)], [(0, 5), (100, 150), (290, 300)]
    kept = torch.ones(S, dtype=torch.bool)
    kept_rows, kept_cols = kept.clone(), kept.clone()
    for a, b in rows:
        kept_rows[a:b] = False
    for a, b in cols:
        kept_cols[a:b] = False
    _same(masks.qk_sparse(S, rows, cols), (k <= q) & kept_rows[:, None] & kept_cols[None, :])


@pytest.mark.parametrize("seed", range(3))
def test_random_spans_are_disjoint_and_cover_the_ratio(seed):
    spans = masks.random_spans(1000, 4, 0.1, seed)
    assert len(spans) == 4 and sum(b - a for a, b in spans) == 100
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))


def test_hash_sparse_sees_the_earlier_keys_of_its_bucket():
    q, k = _grid()
    buckets = [0, 1, 0, 2, 1, 0, 0, 2, 1, 1]  # runs of 30 tokens
    bucket = torch.tensor(buckets)[torch.arange(S) // 30]
    _same(masks.hash_sparse(S, buckets, 30), (k <= q) & (bucket[:, None] == bucket[None, :]))


@pytest.mark.parametrize("name", masks.MASK_NAMES)
def test_named_masks_fit_the_sequence(name):
    slices = masks.named_mask(name, 1531, seed=1)
    dense = to_dense(slices, 1531, 1531)
    assert dense.any()
    assert slices == masks.named_mask(name, 1531, seed=1)


def test_named_mask_names_bad_arguments():
    with pytest.raises(ValueError, match="name must be one of"):
        masks.named_mask("causal_blockwise", 256)
    with pytest.raises(ValueError, match="window"):
        masks.named_mask("causal", 256, window=3)
    with pytest.raises(ValueError, match="doc_lens must sum"):
        masks.named_mask("full_document", 256, doc_lens=[100, 100])
