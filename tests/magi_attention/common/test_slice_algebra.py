"""Mask algebra against a cell-by-cell evaluation of the AttnMaskType definitions."""
import random

import pytest
import torch

from magi_attention.common import (AttnMaskType, AttnRange, AttnSlice, RangeError, normalize,
                                   slices_from_tensors, slices_to_tensors, to_dense, union_area)
from magi_attention.testing import random_slices


def definition_mask(s: AttnSlice, seqlen: int) -> torch.Tensor:
    """Cell by cell from the corner-alignment rules, sharing no code with AttnSlice."""
    m = torch.zeros(seqlen, seqlen, dtype=torch.bool)
    qs, qe, ks, ke = s.q_range.start, s.q_range.end, s.k_range.start, s.k_range.end
    for q in range(qs, qe):
        for k in range(ks, ke):
            keep = True
            if s.mask_type in (AttnMaskType.CAUSAL, AttnMaskType.BICAUSAL):
                keep &= q - qe >= k - ke
            if s.mask_type in (AttnMaskType.INVCAUSAL, AttnMaskType.BICAUSAL):
                keep &= q - qs <= k - ks
            m[q, k] = keep
    return m


@pytest.mark.parametrize("seed", range(6))
def test_union_area_dense_normalize_and_clip_match_definition(seed):
    rng, seqlen = random.Random(seed), 20
    for _ in range(150):
        slices = random_slices(rng, seqlen, seqlen, rng.randint(1, 4))
        ref = torch.zeros(seqlen, seqlen, dtype=torch.bool)
        for s in slices:
            one = definition_mask(s, seqlen)
            assert s.area() == int(one.sum()), s
            ref |= one
        assert torch.equal(to_dense(slices, seqlen), ref)
        assert union_area(slices) == int(ref.sum())
        assert torch.equal(to_dense(normalize(slices), seqlen), ref)
        a, b = sorted(rng.sample(range(seqlen + 1), 2))
        c, d = sorted(rng.sample(range(seqlen + 1), 2))
        box = torch.zeros_like(ref)
        box[a:b, c:d] = True
        clipped = [p for s in slices for p in s.clip(AttnRange(a, b), AttnRange(c, d))]
        assert torch.equal(to_dense(clipped, seqlen), ref & box)


def test_causal_area_closed_form_at_large_seqlen():
    seqlen = 1 << 20
    causal = AttnSlice.make(0, seqlen, 0, seqlen, AttnMaskType.CAUSAL)
    assert causal.area() == seqlen * (seqlen + 1) // 2
    # two overlapping copies must not double count
    assert union_area([causal, causal]) == seqlen * (seqlen + 1) // 2


@pytest.mark.parametrize("bad", [(-1, 3), (5, 2)])
def test_bad_ranges_raise_naming_the_range(bad):
    with pytest.raises(RangeError, match=rf"\[{bad[0]}, {bad[1]}\)"):
        AttnRange(*bad)


def test_out_of_bounds_slice_named_in_error():
    with pytest.raises(RangeError, match="k_range .* ends past seqlen=8"):
        to_dense([AttnSlice.make(0, 4, 0, 9)], 8)


def test_tensor_round_trip_and_mismatched_counts():
    slices = [AttnSlice.make(0, 4, 0, 4, "causal"), AttnSlice.make(4, 8, 0, 8, "bicausal")]
    q, k, t = slices_to_tensors(slices)
    assert q.dtype == torch.int32 and t.tolist() == [1, 3]
    assert slices_from_tensors(q, k, t) == slices
    with pytest.raises(ValueError, match="num_slices"):
        slices_from_tensors(q, k[:1], t)
    with pytest.raises(RangeError, match="slice 0"):
        slices_from_tensors(torch.tensor([[3, 1]]), torch.tensor([[0, 1]]))


def test_unknown_mask_type():
    with pytest.raises(ValueError, match="unknown mask type"):
        AttnMaskType.parse("diagonal")
