"""The kernel sweep's masks (bench.sweep.cell_mask) at 16k keep the FA4 forms they were measured
with: square documents (equal q and key bounds) or dense, and block_causal_document on the
block-sparse path (CPU: the forms are host arithmetic)."""
import pytest

from bench.config import DataConfig, MaskChoice
from bench.sweep import cell_mask
from magi_attention.kernels.fa4._convert import native_of
from magi_attention.kernels.plan import FlexAttnPlan


@pytest.mark.parametrize("name", ["full", "causal", "full_document", "causal_document",
                                  "sliding_window_causal", "block_causal_document"])
def test_kernel_sweep_masks_keep_their_fa4_forms(name):
    seqlen = 16384
    mask = cell_mask(MaskChoice(name=name, params={}, label=name), seqlen, DataConfig(), 8)
    form = native_of(FlexAttnPlan.from_slices(list(mask.slices), seqlen, seqlen))
    if name == "block_causal_document":
        assert form is None
    elif name.endswith("_document"):
        assert form.varlen and form.cu_seqlens_q == form.cu_seqlens_k
    else:
        assert not form.varlen
