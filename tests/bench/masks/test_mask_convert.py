"""Converters are exact where they accept a mask and raise UnsupportedMask where they cannot."""
import pytest
import torch

from bench.masks import KERNEL_MASK_NAMES, MASK_NAMES, UnsupportedMask, build_mask
from bench.masks.convert import (from_flashmask, to_block_sparse, to_cu_seqlens, to_dense,
                                 to_flashmask, to_mask_mod, to_slices_tensors, to_window)
from bench.masks.document import cu_seqlens
from magi_attention.common import AttnMaskType, slices_from_tensors

# the patterns whose kept rows in every key column are "all but one interval" per diagonal side
FLASHMASK_OK = {"full", "causal", "full_document", "causal_document", "share_question",
                "causal_blockwise", "prefix_lm_causal", "prefix_lm_document", "sliding_window",
                "sliding_window_causal", "global_sliding_window", "block_causal_document"}


def flashmask_expressible(mask) -> bool:
    # qk_sparse: each dropped row span is one masked interval in a column; one span fits
    return mask.name in FLASHMASK_OK or (mask.name == "qk_sparse"
                                         and mask.params["num_drop_spans"] == 1)


def test_cu_seqlens_of_document_masks():
    docs = [5, 17, 40, 2]
    assert to_cu_seqlens(build_mask("full_document", 64, docs)) == (cu_seqlens(docs), False)
    assert to_cu_seqlens(build_mask("causal_document", 64, docs)) == (cu_seqlens(docs), True)
    assert to_cu_seqlens(build_mask("full", 64)) == ([0, 64], False)
    assert to_cu_seqlens(build_mask("causal", 64)) == ([0, 64], True)
    # detected from the slices, not the name: a window covering everything is full
    assert to_cu_seqlens(build_mask("sliding_window", 64, window=63)) == ([0, 64], False)
    assert to_cu_seqlens(build_mask("block_causal_document", 64, docs, block_size=1)) == (
        cu_seqlens(docs), True)


@pytest.mark.parametrize("name,kw", [
    ("share_question", {}), ("causal_blockwise", {}), ("sliding_window", {"window": 3}),
    ("prefix_lm_causal", {"prefix_len": 9}), ("qk_sparse", {}),
    ("block_sparse", {"block_q": 16, "block_k": 16}),
    ("block_causal_document", {"block_size": 4})])
def test_cu_seqlens_unsupported(name, kw):
    # three documents: with two, share_question and causal_blockwise are plain causal
    with pytest.raises(UnsupportedMask):
        to_cu_seqlens(build_mask(name, 64, [16, 24, 24], **kw))


@pytest.mark.parametrize("name,kw,expected", [
    ("full", {}, (-1, -1)), ("causal", {}, (-1, 0)),
    ("sliding_window_causal", {"window": 9}, (9, 0)), ("sliding_window", {"window": 9}, (9, 9)),
    ("sliding_window", {"window": 0}, (0, 0)), ("sliding_window", {"window": 5000}, (-1, -1)),
    ("sliding_window_causal", {"window": 299}, (-1, 0)),
])
def test_window(name, kw, expected):
    assert to_window(build_mask(name, 300, **kw)) == expected


@pytest.mark.parametrize("name", ["causal_document", "full_document", "global_sliding_window",
                                  "prefix_lm_causal", "block_sparse", "qk_sparse"])
def test_window_unsupported(name):
    with pytest.raises(UnsupportedMask):
        to_window(build_mask(name, 300, [100, 200], window=9) if "window" in name
                  else build_mask(name, 300, [100, 200]))


@pytest.mark.parametrize("name", MASK_NAMES)
def test_flashmask_exact_or_unsupported(make_mask, name):
    for seed in (0, 1):
        mask = make_mask(name, 257, seed)
        try:
            bounds = to_flashmask(mask)
        except UnsupportedMask:
            assert not flashmask_expressible(mask)
            continue
        assert all(b.dtype == torch.int32 for b in bounds.values())
        assert torch.equal(from_flashmask(bounds, mask.seqlen), to_dense(mask))


def test_flashmask_qk_sparse_with_one_span():
    mask = build_mask("qk_sparse", 300, num_drop_spans=1, drop_ratio=0.2, seed=4)
    assert torch.equal(from_flashmask(to_flashmask(mask), 300), to_dense(mask))


def test_flashmask_causal_bounds():
    b = to_flashmask(build_mask("causal", 6))
    assert b["lts"].tolist() == [6] * 6 and b["uts"].tolist() == [0] * 6
    assert b["ute"].tolist() == list(range(6))


def test_flashmask_rejects_two_gaps():
    with pytest.raises(UnsupportedMask, match="FlashMask masks one row interval"):
        to_flashmask(build_mask("hash_sparse", 256, num_buckets=4, run_len=8))


def _check_block_index(mask, block_q, block_k):
    index = to_block_sparse(mask, block_q, block_k)
    dense = to_dense(mask)
    dense = dense if mask.head_slices is not None else dense[None]
    heads, seqlen = dense.shape[0], mask.seqlen
    covered = torch.zeros_like(dense)
    for h in range(heads):
        for qb in range(index.num_q_blocks):
            rows = slice(qb * block_q, min((qb + 1) * block_q, seqlen))
            full = index.full_block_idx[h, qb, :index.full_block_cnt[h, qb]].tolist()
            part = index.mask_block_idx[h, qb, :index.mask_block_cnt[h, qb]].tolist()
            assert not set(full) & set(part) and full == sorted(full)
            for kb in full + part:
                cols = slice(kb * block_k, min((kb + 1) * block_k, seqlen))
                tile = dense[h, rows, cols]
                assert tile.all() if kb in full else (tile.any() and not tile.all())
                covered[h, rows, cols] = True if kb in full else tile
    assert torch.equal(covered, dense)  # nothing kept lies in a skipped tile


@pytest.mark.parametrize("name", MASK_NAMES)
def test_block_sparse_index_exact(make_mask, name):
    _check_block_index(make_mask(name, 257, 1), 32, 16)
    _check_block_index(make_mask(name, 1000, 2), 128, 128)


@pytest.mark.parametrize("name", KERNEL_MASK_NAMES)
def test_block_sparse_index_at_64k_counts(name):
    seqlen = 1 << 16
    mask = build_mask(name, seqlen, [seqlen // 4] * 4)
    index = to_block_sparse(mask, 128, 128)
    assert index.full_block_idx.shape == (1, 512, 512)
    expected_partial = {"full": 0, "full_document": 0, "causal": 512, "causal_document": 512,
                        # window = 8 blocks: 2 partial tiles per row block from the 9th on
                        "block_causal_document": 0, "sliding_window_causal": 8 + 504 * 2}
    assert index.mask_block_cnt.sum().item() == expected_partial[name]
    # kept cells are bounded by full tiles from below and full + partial tiles from above
    full_cells = index.full_block_cnt.sum().item() * 128 * 128
    all_cells = full_cells + index.mask_block_cnt.sum().item() * 128 * 128
    assert full_cells <= mask.area <= all_cells


@pytest.mark.parametrize("name", MASK_NAMES)
def test_mask_mod_matches_dense(make_mask, name):
    mask = make_mask(name, 257, 3)
    mask_mod = to_mask_mod(mask)
    dense = to_dense(mask)
    heads = mask.num_mask_heads
    q = torch.arange(mask.seqlen)
    # nested vmap over (h, q, kv), the way FlexAttention evaluates a mask_mod
    grid = torch.vmap(torch.vmap(torch.vmap(mask_mod, in_dims=(None, None, None, 0)),
                                 in_dims=(None, None, 0, None)), in_dims=(None, 0, None, None))(
        torch.tensor(0), torch.arange(heads), q, q)
    assert torch.equal(grid if mask.head_slices is not None else grid[0], dense)


def test_mask_mod_per_head():
    mask = build_mask("var_block_sparse", 300, min_block=16, max_block=64, num_heads_kv=3)
    q = torch.arange(300)
    mask_mod = to_mask_mod(mask)
    grid = mask_mod(torch.tensor(0), torch.arange(3)[:, None, None], q[None, :, None],
                    q[None, None, :])
    assert torch.equal(grid, to_dense(mask)) and not torch.equal(grid[0], grid[1])


def test_slices_tensors_round_trip():
    mask = build_mask("share_question", 64, [10, 20, 34])
    q, k, t = to_slices_tensors(mask)
    assert q.dtype == k.dtype == t.dtype == torch.int32
    assert tuple(slices_from_tensors(q, k, t)) == mask.slices
    assert AttnMaskType.CAUSAL in {AttnMaskType(int(x)) for x in t}


def test_slices_tensors_per_head():
    mask = build_mask("block_sparse", 256, block_q=32, block_k=32, num_heads_kv=2)
    with pytest.raises(UnsupportedMask, match="per-head"):
        to_slices_tensors(mask)
    q, _, _ = to_slices_tensors(mask, head=1)
    assert q.shape[0] == len(mask.head_slices[1])


@pytest.mark.parametrize("name, params", [
    ("block_sparse", dict(block_q=32, block_k=16, num_heads_kv=3)),  # per head, uniform blocks
    ("block_sparse", dict(block_q=24, block_k=40, num_heads_kv=1)),  # shared, edges cut at S
    ("var_block_sparse", dict(min_block=16, max_block=64, num_heads_kv=2)),
    ("hash_sparse", dict(num_buckets=3, run_len=16)),
    ("qk_sparse", dict(drop_ratio=0.2, num_drop_spans=3)),
])
def test_pattern_mask_mod_equals_the_mask(name, params):
    """The pattern's own mask_mod (Flex's block or hash sparsity: a table lookup) keeps exactly
    the mask's cells, per KV head, at an S that cuts the last blocks / runs."""
    from bench.masks.convert import to_pattern_mask_mod
    mask = build_mask(name, 300, seed=3, **params)
    mask_mod = to_pattern_mask_mod(mask)
    q = torch.arange(300)
    grid = mask_mod(torch.tensor(0), torch.arange(mask.num_mask_heads)[:, None, None],
                    q[None, :, None], q[None, None, :])
    dense = to_dense(mask)
    assert torch.equal(grid if mask.head_slices is not None else grid[0], dense)


@pytest.mark.parametrize("name, params", [
    ("block_sparse", dict(block_q=32, block_k=32, num_heads_kv=2)),
    ("hash_sparse", dict(num_buckets=4, run_len=32)),
    ("qk_sparse", dict(drop_ratio=0.2, num_drop_spans=3)),
])
def test_pattern_mask_mod_only_for_the_masks_it_reproduces(name, params):
    """None for other patterns, and for a pattern's label whose slices are not what its params
    rebuild (another seed's: a user's own slices under that name)."""
    import dataclasses

    from bench.masks.convert import to_pattern_mask_mod
    mask = build_mask(name, 256, seed=1, **params)
    assert to_pattern_mask_mod(build_mask("causal", 256)) is None
    other_seed = dataclasses.replace(mask, params={**mask.params, "seed": 2})
    assert to_pattern_mask_mod(other_seed) is None
    assert to_pattern_mask_mod(mask) is not None
