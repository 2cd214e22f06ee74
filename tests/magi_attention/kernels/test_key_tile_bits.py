"""gluon_backward.key_tile_bits against the dense mask: every listed pair of the backward's
64 x 128 plan, read the way the kernel reads it (full pairs whole, partial pairs from the bitmap
at list position - base[key tile], word w of q row r at (p * WORDS + w) * BLOCK_M + r), gives
back exactly the union; and bits_suit picks bitmaps only where rows hold several key intervals.
CPU only (numpy and torch); the kernel reading them runs in test_triton_gpu.py."""
import random

import numpy as np
import pytest
import torch

from magi_attention.common import AttnSlice, to_dense
from magi_attention.kernels.block_sparse import (plan_block_sparse, slice_bounds_array,
                                                 union_row_intervals)
from magi_attention.testing import random_slices
from magi_attention.testing.masks import named_mask

gb = pytest.importorskip("magi_attention.kernels.triton.gluon_backward")


def _from_bits(plan, bits) -> np.ndarray:
    """The dense mask as the Gluon backward's producer and consumers see it."""
    bm, bn = gb.BLOCK_M, gb.BLOCK_N
    dense = np.zeros((plan.num_q_tiles * bm, plan.num_k_tiles * bn), dtype=bool)
    ptr, qt, nfull = (t.numpy() for t in (plan.k_tile_ptr, plan.k_tile_qt, plan.k_tile_num_full))
    words = bits.words.numpy().astype(np.int64) & 0xFFFFFFFF
    base = bits.base.numpy()
    for kt in range(plan.num_k_tiles):
        for t in range(ptr[kt], ptr[kt + 1]):
            rows = slice(int(qt[t]) * bm, (int(qt[t]) + 1) * bm)
            cols = slice(kt * bn, (kt + 1) * bn)
            if t - ptr[kt] < nfull[kt]:
                dense[rows, cols] = True
                continue
            p = t - int(base[kt])
            block = words[p * gb.WORDS * bm:(p + 1) * gb.WORDS * bm].reshape(gb.WORDS, bm)
            key = np.arange(bn)
            dense[rows, cols] = (block[key // 32, :].T >> (key % 32)) & 1 == 1
    return dense[:plan.seqlen_q, :plan.seqlen_k]


def _check(slices, seqlen):
    plan = plan_block_sparse(slices, seqlen, seqlen, gb.BLOCK_M, gb.BLOCK_N)
    bits = gb.key_tile_bits(plan, union_row_intervals(slice_bounds_array(slices), seqlen))
    partial = plan.num_tile_pairs - plan.num_full_pairs
    assert bits.words.numel() == max(partial, 1) * gb.WORDS * gb.BLOCK_M
    assert bits.nbytes == bits.words.numel() * 4
    np.testing.assert_array_equal(_from_bits(plan, bits), to_dense(slices, seqlen).numpy())
    return plan


@pytest.mark.parametrize("name", ["qk_sparse", "hash_sparse", "causal_document",
                                  "sliding_window_causal", "global_sliding_window"])
@pytest.mark.parametrize("seqlen", [1024, 1531])
def test_bitmaps_give_back_the_test_masks(name, seqlen):
    _check(named_mask(name, seqlen, seed=0), seqlen)


@pytest.mark.parametrize("seed", range(6))
def test_bitmaps_give_back_random_overlapping_slices(seed):
    seqlen = 700 + 97 * seed
    _check(random_slices(random.Random(seed), seqlen, seqlen, 12), seqlen)


def test_a_plan_without_partial_pairs_still_gets_one_bitmap():
    """TMA needs a tensor to describe: a mask of whole tiles gets one zero bitmap."""
    plan = _check([AttnSlice.make(0, 1024, 0, 1024, 0)], 1024)
    assert plan.num_full_pairs == plan.num_tile_pairs


def test_bits_suit_rows_of_several_intervals_within_the_memory_cap(monkeypatch):
    def plan_of(name, seqlen=4096):
        return plan_block_sparse(named_mask(name, seqlen, seed=0), seqlen, seqlen, gb.BLOCK_M,
                                 gb.BLOCK_N)

    several, one = plan_of("qk_sparse"), plan_of("causal")
    no_table = plan_of("var_block_sparse", 16384)  # 13 intervals a row, 28% of pairs partial
    assert several.row_lo.shape[1] > 1 and one.row_lo.shape[1] == 1
    assert no_table.row_lo.shape[1] == 0
    assert gb.bits_suit(several) and gb.bits_suit(no_table) and not gb.bits_suit(one)
    assert gb.plan_suits(no_table)  # bitmaps let the Gluon backward run a plan without a table
    full = plan_block_sparse([AttnSlice.make(0, 4096, 0, 4096, 0)], 4096, 4096, gb.BLOCK_M,
                             gb.BLOCK_N)
    assert not gb.bits_suit(full)  # nothing to mask
    # nearly every pair partial (hash_sparse: 92%): the ordered Triton backward keeps the mask
    mostly_partial = plan_of("hash_sparse", 16384)
    assert mostly_partial.row_lo.shape[1] == 0
    assert not gb.bits_suit(mostly_partial) and not gb.plan_suits(mostly_partial)
    partial = no_table.num_tile_pairs - no_table.num_full_pairs
    monkeypatch.setattr(gb, "MAX_BITS_BYTES", partial * gb.BITS_BYTES_PER_PAIR - 1)
    assert not gb.bits_suit(no_table) and not gb.plan_suits(no_table)


def test_bits_of_another_plan_are_refused():
    slices = named_mask("qk_sparse", 1024, seed=0)
    plan = plan_block_sparse(slices, 1024, 1024, gb.BLOCK_M, gb.BLOCK_N)
    other = plan_block_sparse(slices[:3], 2048, 2048, gb.BLOCK_M, gb.BLOCK_N)
    bits = gb.key_tile_bits(other, union_row_intervals(slice_bounds_array(slices[:3]), 2048))
    x = torch.zeros(1024, 2, 64)
    with pytest.raises(ValueError, match="key tiles"):
        gb.launch_bwd(x, x, x, x, x, torch.zeros(1024, 2), plan, 0.125, bits=bits)
    with pytest.raises(ValueError, match="plan tiles"):
        gb.key_tile_bits(plan_block_sparse(slices, 1024, 1024, 128, 128), ([], [], []))
