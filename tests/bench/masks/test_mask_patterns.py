"""Oracle 1 for every pattern: slices == the MASKS.md definition, and area == count of True."""
import pytest
import torch

from bench.masks import MASK_NAMES, STATIC_MASK_NAMES, build_mask, reference_dense
from bench.masks.convert import to_dense
from magi_attention.common import union_area

SMALL_CASES = [(s, seed) for s in (64, 257, 1000) for seed in (0, 1, 2)] + [(4096, 0)]


@pytest.mark.parametrize("seqlen,seed", SMALL_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("name", MASK_NAMES)
def test_slices_match_definition(make_mask, name, seqlen, seed):
    mask = make_mask(name, seqlen, seed)
    dense = to_dense(mask)
    assert torch.equal(dense, reference_dense(mask))
    per_head_count = dense.reshape(mask.num_mask_heads, -1).sum(-1)
    assert mask.area == per_head_count.double().mean().item()


@pytest.mark.parametrize("name", MASK_NAMES)
def test_area_matches_common_union_area(make_mask, name):
    mask = make_mask(name, 1000, 5)
    assert mask.area == sum(union_area(h) for h in mask.per_head_slices) / mask.num_mask_heads


@pytest.mark.parametrize("seqlen", [1, 2, 64, 257, 4096, 1 << 20])
def test_causal_area_is_exact(seqlen):
    assert build_mask("causal", seqlen).area == seqlen * (seqlen + 1) // 2
    assert build_mask("full", seqlen).area == seqlen * seqlen


@pytest.mark.parametrize("name", MASK_NAMES)
def test_same_seed_same_mask(make_mask, name):
    a, b = make_mask(name, 257, 4), make_mask(name, 257, 4)
    assert a == b and hash(a) == hash(b) and a is not b


@pytest.mark.parametrize("name", ["prefix_lm_causal", "qk_sparse", "hash_sparse", "block_sparse",
                                  "var_block_sparse"])
def test_seed_changes_random_patterns(name):
    assert build_mask(name, 1000, seed=0).slices != build_mask(name, 1000, seed=1).slices


def test_names_and_order():
    assert len(STATIC_MASK_NAMES) == 14
    assert MASK_NAMES == STATIC_MASK_NAMES + ("block_sparse", "var_block_sparse")


def test_sliding_window_causal_is_corner_plus_band():
    mask = build_mask("sliding_window_causal", 1 << 20, window=1024)
    assert [s.mask_type.name for s in mask.slices] == ["CAUSAL", "BICAUSAL"]


@pytest.mark.parametrize("name", ["block_sparse", "var_block_sparse"])
def test_block_masks_keep_the_requested_fraction(name):
    mask = build_mask(name, 4096, sparsity=0.25, num_heads_kv=3, seed=1)
    assert mask.num_mask_heads == 3 and mask.slices == mask.head_slices[0]
    assert mask.head_slices[0] != mask.head_slices[1]
    if name == "block_sparse":  # 64 x 64 key blocks, 16 of them kept per query block
        assert mask.area == 4096 * 16 * 64


def test_prefix_len_is_drawn_from_the_seed_and_recorded():
    docs = [100, 300, 200]
    a = build_mask("prefix_lm_document", 600, docs, seed=7)
    assert 1 <= a.params["prefix_len"] <= 100 and a.params["seed"] == 7
    again = build_mask("prefix_lm_document", 600, docs, **{k: v for k, v in a.params.items()})
    assert again == a


def test_doc_lens_kept_only_by_document_patterns():
    assert build_mask("causal", 8, doc_lens=[4, 4]).doc_lens is None
    assert build_mask("causal_document", 8, doc_lens=[4, 4]).doc_lens == (4, 4)
