"""AttnSlice -> FA4 block-sparse conversion is exact, for every test mask (CPU, no FA4 import).

Oracle: the mask's dense form (``common.to_dense``, built from the slices by the independent
row-bounds code). The conversion must give: full tiles inside the sequence and
entirely in the mask, partial-tile bitmaps equal to the mask, nothing outside listed tiles, and
backward (per key tile) lists that are exactly the transpose of the forward ones.
"""
import pytest
import torch

from magi_attention.common import AttnMaskType, AttnSlice, slices_to_tensors, to_dense
from magi_attention.kernels.fa4 import tile_shape
from magi_attention.kernels.fa4._convert import (clear_conversion_cache, dense_from_block_sparse,
                                                 to_fa4_block_sparse)
from magi_attention.testing.masks import MASK_NAMES, named_mask

BLOCK_M, BLOCK_N = tile_shape(128)  # FA4's SM90 tiles, as the backend uses them


def _pairs(cnt, idx):
    """{(owner tile, listed tile)} of padded [1, 1, n(, w)] lists."""
    cnt, idx = cnt[0, 0].tolist(), idx[0, 0].tolist()
    return {(i, j) for i, c in enumerate(cnt) for j in idx[i][:c]}


def _check(slices, seqlen_q, seqlen_k, block_m=BLOCK_M, block_n=BLOCK_N):
    qr, kr, ty = slices_to_tensors(slices)
    conv = to_fa4_block_sparse(qr, kr, ty, seqlen_q, seqlen_k, block_m, block_n)
    dense = to_dense(slices, seqlen_q, seqlen_k)
    assert torch.equal(dense_from_block_sparse(conv), dense)
    assert conv.area == int(dense.sum())
    full = _pairs(conv.fwd_full_cnt, conv.fwd_full_idx)
    partial = _pairs(conv.fwd_mask_cnt, conv.fwd_mask_idx)
    assert not full & partial
    for qt, kt in full:  # full tiles need no seqlen masking: inside the sequence, all kept
        assert (qt + 1) * block_m <= seqlen_q and (kt + 1) * block_n <= seqlen_k
    # every kept cell lies in a listed tile (partial bitmaps alone cannot show this)
    nqt, nkt = -(-seqlen_q // block_m), -(-seqlen_k // block_n)
    padded = torch.nn.functional.pad(dense, (0, nkt * block_n - seqlen_k, 0, nqt * block_m - seqlen_q))
    touched = padded.reshape(nqt, block_m, nkt, block_n).any(dim=3).any(dim=1)
    tiles = {tuple(t) for t in touched.nonzero().tolist()}
    assert tiles == full | partial
    flip = lambda s: {(b, a) for a, b in s}  # noqa: E731
    assert _pairs(conv.bwd_full_cnt, conv.bwd_full_idx) == flip(full)
    assert _pairs(conv.bwd_mask_cnt, conv.bwd_mask_idx) == flip(partial)
    for cnt, idx in ((conv.fwd_full_cnt, conv.fwd_full_idx), (conv.bwd_mask_cnt, conv.bwd_mask_idx)):
        for row, c in zip(idx[0, 0].tolist(), cnt[0, 0].tolist()):
            assert row[:c] == sorted(row[:c])  # FA4 walks the lists from the end
    return conv


@pytest.mark.parametrize("seqlen", [1000, 2048])
@pytest.mark.parametrize("name", MASK_NAMES)
def test_every_mask_exact(name, seqlen):
    _check(named_mask(name, seqlen, seed=seqlen), seqlen, seqlen)


@pytest.mark.parametrize("seed", range(6))
def test_overlapping_random_slices(seed):
    g = torch.Generator().manual_seed(seed)
    seqlen_q, seqlen_k = 777, 1000
    slices = []
    for _ in range(8):
        a, b = sorted(torch.randint(0, seqlen_q + 1, (2,), generator=g).tolist())
        c, e = sorted(torch.randint(0, seqlen_k + 1, (2,), generator=g).tolist())
        slices.append(AttnSlice.make(a, b, c, e, AttnMaskType(int(torch.randint(0, 4, (1,), generator=g)))))
    slices.append(slices[0])
    _check(slices, seqlen_q, seqlen_k)
    _check(slices, seqlen_q, seqlen_k, block_m=64, block_n=64)


def test_empty_mask_and_empty_rows():
    conv = _check([AttnSlice.make(0, 0, 0, 10)], 300, 300)
    assert conv.area == 0 and conv.num_partial == 0
    conv = _check([AttnSlice.make(0, 100, 0, 300, AttnMaskType.CAUSAL)], 300, 300)
    assert conv.fwd_full_cnt[0, 0, 2] == 0 and conv.fwd_mask_cnt[0, 0, 2] == 0


def test_conversion_is_cached_per_mask():
    clear_conversion_cache()
    tensors = slices_to_tensors([AttnSlice.make(0, 512, 0, 512, AttnMaskType.CAUSAL)])
    first = to_fa4_block_sparse(*tensors, 512, 512, BLOCK_M, BLOCK_N)
    again = to_fa4_block_sparse(*(t.clone() for t in tensors), 512, 512, BLOCK_M, BLOCK_N)
    other = to_fa4_block_sparse(*tensors, 640, 640, BLOCK_M, BLOCK_N)
    assert again is first and other is not first


def test_block_n_must_fit_words():
    with pytest.raises(ValueError, match="block_n"):
        to_fa4_block_sparse(*slices_to_tensors([AttnSlice.make(0, 8, 0, 8)]), 8, 8, 128, 48)


@pytest.mark.parametrize("name", MASK_NAMES)
def test_cost_terms_agree_with_the_conversion(name):
    """path_cost_terms (no bitmaps) gives the conversion's area, native form and partial tiles."""
    from magi_attention.kernels.fa4._convert import fa4_block_sparse
    from magi_attention.kernels.fa4.cost import path_cost_terms
    from magi_attention.kernels.plan import FlexAttnPlan
    seqlen = 1500
    slices = named_mask(name, seqlen, seed=2)
    plan = FlexAttnPlan.from_slices(slices, seqlen, seqlen)
    conv = fa4_block_sparse(FlexAttnPlan.from_slices(slices, seqlen, seqlen), BLOCK_M, BLOCK_N)
    area, native, partial = path_cost_terms(plan, BLOCK_M, BLOCK_N)
    assert area == conv.area and native == (conv.native is not None or conv.groups is not None)
    assert partial == (0 if native else conv.num_partial)
