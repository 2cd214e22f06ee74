"""FA4 backend tiles by head_dim (CPU, no FA4 import): one block-sparse plan serves FA4's
forward and backward tiles at head_dim <= 128 (128 x 128) and 256 (128 x 64); other head_dims
above 128 are refused with the reason. The conversion at 128 x 64 is exact."""
import random

import pytest
import torch

from magi_attention.common import slices_to_tensors, to_dense
from magi_attention.kernels import BackendUnavailable
from magi_attention.kernels.fa4 import tile_shape
from magi_attention.kernels.fa4._convert import dense_from_block_sparse, to_fa4_block_sparse
from magi_attention.testing import random_slices


@pytest.mark.parametrize("head_dim, tiles", [(64, (128, 128)), (128, (128, 128)),
                                             (256, (128, 64))])
def test_tiles_by_head_dim(head_dim, tiles):
    assert tile_shape(head_dim) == tiles


@pytest.mark.parametrize("head_dim", [136, 192, 248])
def test_other_wide_head_dims_are_refused_with_the_reason(head_dim):
    with pytest.raises(BackendUnavailable, match=f"head_dim <= 128 or 256.*got {head_dim}"):
        tile_shape(head_dim)


@pytest.mark.parametrize("seed", range(4))
def test_conversion_at_the_head_dim_256_tiles_is_exact(seed):
    rng = random.Random(seed)
    seqlen_q, seqlen_k = rng.choice([(300, 300), (257, 511)])
    slices = random_slices(rng, seqlen_q, seqlen_k, rng.randint(1, 6))
    conv = to_fa4_block_sparse(*slices_to_tensors(slices), seqlen_q, seqlen_k, *tile_shape(256))
    assert torch.equal(dense_from_block_sparse(conv), to_dense(slices, seqlen_q, seqlen_k))
    fwd = {(qt, kt) for qt, c in enumerate(conv.fwd_mask_cnt[0, 0].tolist())
           for kt in conv.fwd_mask_idx[0, 0, qt, :c].tolist()}
    bwd = {(qt, kt) for kt, c in enumerate(conv.bwd_mask_cnt[0, 0].tolist())
           for qt in conv.bwd_mask_idx[0, 0, kt, :c].tolist()}
    assert fwd == bwd  # the backward lists are the forward ones transposed
