"""Long key walks cut into parts for the Triton forward (kernels/triton/key_parts.py): which
plans are cut, that the parts hold the mask cell for cell, and that the parts' forwards merged
by lse are the one call's (the reference backend here; the Triton path on the GPU machine:
test_triton_gpu.py::test_long_key_walks_run_in_parts)."""
import numpy as np
import pytest
import torch

from magi_attention.common import AttnSlice, to_dense
from magi_attention.kernels.merge import merge_out_lse_torch
from magi_attention.kernels import reference
from magi_attention.kernels.plan import FlexAttnPlan
from magi_attention.kernels.triton import key_parts as kp


def _plan(slices, sq, sk):
    return FlexAttnPlan.from_slices([AttnSlice.make(*s) for s in slices], sq, sk)


def test_short_walks_stay_one_call():
    # 64k rows over 96k keys in one full slice: at the threshold, not above it
    assert kp.key_parts(_plan([(0, 65536, 0, kp.SPLIT_ABOVE, "full")], 65536,
                              kp.SPLIT_ABOVE)) is None
    # many keys, short walks: documents of 4k tokens over 256k
    docs = [(i, i + 4096, i, i + 4096, "causal") for i in range(0, 262144, 4096)]
    assert kp.key_parts(_plan(docs, 262144, 262144)) is None


def test_a_cp_ranks_walk_of_128k_keys_is_cut_in_two():
    s = 65536
    parts = kp.key_parts(_plan([(0, s, 0, s, "full"), (0, s, s, 2 * s, "causal")], s, 2 * s))
    assert [(k0, k1) for k0, k1, _ in parts] == [(0, s), (s, 2 * s)]
    assert all(p.seqlen_k == s and kp.key_parts(p) is None for _, _, p in parts)


@pytest.mark.parametrize("seed", range(6))
def test_parts_hold_the_mask_and_merge_to_the_one_call(monkeypatch, seed):
    monkeypatch.setattr(kp, "PART_KEYS", 40)
    monkeypatch.setattr(kp, "SPLIT_ABOVE", 48)
    rng = np.random.default_rng(seed)
    sq, sk = 70, 130
    slices = []
    for _ in range(4):
        q0, k0 = int(rng.integers(0, sq - 8)), int(rng.integers(0, sk - 60))
        slices.append((q0, int(rng.integers(q0 + 8, sq + 1)), k0, int(rng.integers(k0 + 50, sk + 1)),
                       str(rng.choice(["full", "causal", "invcausal", "bicausal"]))))
    plan = _plan(slices, sq, sk)
    parts = kp.key_parts(plan)
    assert parts is not None and len(parts) == 4  # ceil(130 / 40) equal parts
    dense = to_dense([AttnSlice.make(*s) for s in slices], sq, sk)
    rebuilt = torch.zeros_like(dense)
    for k0, k1, part in parts:
        rebuilt[:, k0:k1] |= to_dense(part.slices.to_slices(), sq, k1 - k0)
    assert torch.equal(rebuilt, dense)

    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(n, h, 16, generator=g, dtype=torch.float64)
               for n, h in ((sq, 4), (sk, 2), (sk, 2)))
    out, lse, _ = reference.fwd(q, k, v, plan, 0.25)
    merged = None
    for k0, k1, part in parts:
        o, l, _ = reference.fwd(q, k[k0:k1], v[k0:k1], part, 0.25)
        merged = (o, l) if merged is None else merge_out_lse_torch(*merged, o, l, torch.float64)
    # the reference's lse is fp32: the merge weights carry its rounding
    torch.testing.assert_close(merged[0], out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(merged[1], lse, rtol=1e-6, atol=1e-6)
