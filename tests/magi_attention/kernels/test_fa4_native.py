"""Native-form recognition (documents x window) is exact: a form is found only when FA4's
dense/varlen/window masking reproduces the mask cell for cell, and it is found for the patterns
FA4 expresses (CPU; oracle: bench.masks' dense form)."""
import numpy as np
import pytest

from magi_attention.common import AttnMaskType, AttnSlice, slices_to_tensors, to_dense
from magi_attention.kernels.fa4._convert import to_fa4_block_sparse
from magi_attention.kernels.fa4._native import native_dense

bench_masks = pytest.importorskip("bench.masks")
bench_data = pytest.importorskip("bench.data")

EXPRESSIBLE = {"full", "causal", "full_document", "causal_document", "sliding_window",
               "sliding_window_causal"}


def _form(slices, seqlen):
    return to_fa4_block_sparse(*slices_to_tensors(slices), seqlen, seqlen, 128, 128).native


@pytest.mark.parametrize("name", bench_masks.MASK_NAMES)
def test_found_exactly_when_expressible(name):
    seqlen = 3000
    mask = bench_masks.build_mask(name, seqlen, doc_lens=bench_data.sample_doc_lens(seqlen, seed=2),
                                  seed=1)
    form = _form(list(mask.slices), seqlen)
    if name in EXPRESSIBLE:
        assert form is not None
    if form is not None:
        assert np.array_equal(native_dense(form, seqlen), to_dense(list(mask.slices), seqlen, seqlen).numpy())


def test_invcausal_is_a_left_window_of_zero():
    slices = [AttnSlice.make(0, 100, 0, 100, AttnMaskType.INVCAUSAL)]
    form = _form(slices, 100)
    assert (form.window_left, form.window_right, form.cu_seqlens) == (0, None, None)
    assert np.array_equal(native_dense(form, 100), to_dense(slices, 100, 100).numpy())


@pytest.mark.parametrize("slices", [
    [AttnSlice.make(0, 50, 0, 100, AttnMaskType.CAUSAL)],       # empty rows
    [AttnSlice.make(0, 100, 0, 40), AttnSlice.make(0, 100, 60, 100)],  # two intervals a row
    [AttnSlice.make(0, 100, 0, 100, AttnMaskType.CAUSAL), AttnSlice.make(0, 50, 0, 60)],  # ragged
], ids=["empty-rows", "two-intervals", "ragged-window"])
def test_not_found_when_not_expressible(slices):
    assert _form(slices, 100) is None
