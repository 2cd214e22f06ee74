"""Attention sinks on flex_flash_attn_func (reference backend, CPU) against dense-mask torch
autograd in fp64 with the sink logits as extra score columns: out, lse and the gradients of q,
k, v and the sink, on random masks with GQA and rows that keep no key."""
import math
import random

import pytest
import torch

from magi_attention.common import AttnMaskType, AttnSlice, slices_to_tensors, to_dense
from magi_attention.functional import flex_attn_plan, flex_flash_attn_func
from magi_attention.testing import dense_attention, random_qkv, random_slices

ATOL = 1e-4


def _sink(num_sink, num_heads_q, seed):
    g = torch.Generator().manual_seed(100 + seed)
    return (torch.randn(num_sink, num_heads_q, generator=g) * 2).requires_grad_()


def check_sink_against_dense(slices, seqlen_q, seqlen_k, heads, num_sink, seed, softcap=0.0):
    q, k, v = random_qkv(seqlen_q, seqlen_k, *heads, 16, seed=seed)
    sink = _sink(num_sink, heads[0], seed)
    out, meta = flex_flash_attn_func(q, k, v, *slices_to_tensors(slices), softcap=softcap,
                                     backend="reference", sink=sink)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v, sink), dout)
    mask = to_dense(slices, seqlen_q, seqlen_k)
    ref_out, ref_lse = dense_attention(q, k, v, mask, softcap=softcap, sink=sink)
    ref_grads = torch.autograd.grad(ref_out, (q, k, v, sink), dout.double())
    torch.testing.assert_close(out.double(), ref_out, atol=ATOL, rtol=1e-4)
    torch.testing.assert_close(meta.lse.double(), ref_lse, atol=ATOL, rtol=1e-4)
    for name, g, r in zip(("dq", "dk", "dv", "dsink"), grads, ref_grads):
        assert torch.isfinite(g).all(), name
        torch.testing.assert_close(g.double(), r.double(), atol=ATOL, rtol=1e-4, msg=name)
    return mask, out, meta, grads


@pytest.mark.parametrize("num_sink", [1, 3])
@pytest.mark.parametrize("seed", range(4))
def test_sink_random_masks_gqa_and_empty_rows(seed, num_sink):
    rng = random.Random(seed)
    seqlen_q, seqlen_k = rng.choice([(48, 48), (40, 72), (70, 33)])
    slices = random_slices(rng, seqlen_q, seqlen_k, rng.randint(1, 4))
    heads = rng.choice([(4, 4), (4, 2), (6, 1)])
    mask, out, meta, grads = check_sink_against_dense(
        slices, seqlen_q, seqlen_k, heads, num_sink, seed, softcap=rng.choice([0.0, 5.0]))
    empty = ~mask.any(dim=1)
    # a row with no key: out 0, lse the sinks' logsumexp, no gradient to q
    assert (out[empty] == 0).all() and (grads[0][empty] == 0).all()


def test_rows_with_no_key_have_the_sinks_lse():
    slices = [AttnSlice.make(0, 8, 0, 16, AttnMaskType.CAUSAL)]  # rows 8..15 keep nothing
    mask, out, meta, _ = check_sink_against_dense(slices, 16, 16, (4, 2), 3, seed=0)
    sink = _sink(3, 4, 0).detach()
    torch.testing.assert_close(meta.lse[8:], torch.logsumexp(sink, 0).expand(8, 4))
    assert not mask[8:].any()


def test_sink_under_inference_and_with_a_plan():
    """No autograd node (nothing requires grad) and return_lse=False: the same out; a plan."""
    slices = [AttnSlice.make(0, 24, 0, 30, AttnMaskType.CAUSAL), AttnSlice.make(24, 40, 5, 56)]
    q, k, v = random_qkv(40, 56, 4, 2, 16, seed=1, requires_grad=False)
    sink = _sink(2, 4, 1).detach()
    ref_out, ref_lse = dense_attention(q, k, v, to_dense(slices, 40, 56), sink=sink)
    plan = flex_attn_plan(slices, seqlen_q=40, seqlen_k=56)
    out, meta = flex_flash_attn_func(q, k, v, plan, sink=sink)
    torch.testing.assert_close(out.double(), ref_out, atol=ATOL, rtol=1e-4)
    torch.testing.assert_close(meta.lse.double(), ref_lse, atol=ATOL, rtol=1e-4)
    out_no_lse, meta_no_lse = flex_flash_attn_func(q, k, v, plan, sink=sink, return_lse=False)
    assert meta_no_lse.lse is None
    torch.testing.assert_close(out_no_lse, out)


def test_sink_alone_requires_grad():
    """Only the sink is learnable: the call still records autograd and dsink is exact."""
    slices = [AttnSlice.make(0, 32, 0, 32, AttnMaskType.CAUSAL)]
    q, k, v = random_qkv(32, 32, 2, 1, 16, seed=2, requires_grad=False)
    sink = _sink(1, 2, 2)
    out, _ = flex_flash_attn_func(q, k, v, *slices_to_tensors(slices), sink=sink)
    (dsink,) = torch.autograd.grad(out.sum(), sink)
    ref_out, _ = dense_attention(q, k, v, to_dense(slices, 32, 32), sink=sink)
    (ref,) = torch.autograd.grad(ref_out.sum(), sink)
    torch.testing.assert_close(dsink.double(), ref.double(), atol=ATOL, rtol=1e-4)


def test_sinks_at_minus_infinity_change_nothing():
    slices = [AttnSlice.make(0, 16, 0, 16, AttnMaskType.CAUSAL)]
    q, k, v = random_qkv(24, 16, 2, 2, 16, seed=3, requires_grad=False)  # rows 16.. keep nothing
    tensors = slices_to_tensors(slices)
    plain, plain_meta = flex_flash_attn_func(q, k, v, *tensors)
    sink = torch.full((2, 2), -math.inf)
    out, meta = flex_flash_attn_func(q, k, v, *tensors, sink=sink)
    assert torch.equal(out, plain)
    assert torch.equal(meta.lse, plain_meta.lse)


@pytest.mark.parametrize("sink, error, match", [
    (torch.zeros(4), ValueError, r"sink must be \[num_sink >= 1, num_heads_q=4\]"),
    (torch.zeros(2, 3), ValueError, "num_heads_q=4"),
    (torch.zeros(0, 4), ValueError, "num_sink >= 1"),
    (torch.zeros(1, 4, dtype=torch.bfloat16), TypeError, "sink must be float32"),
    ([[0.0] * 4], TypeError, "sink must be a tensor"),
])
def test_bad_sinks_raise_clear_errors(sink, error, match):
    q, k, v = random_qkv(16, 16, 4, 2, 16, requires_grad=False)
    with pytest.raises(error, match=match):
        flex_flash_attn_func(q, k, v, *slices_to_tensors([AttnSlice.make(0, 16, 0, 16)]),
                             sink=sink)


def test_the_gpu_tests_rule_passes_the_reference_and_catches_a_wrong_mask():
    """magi_attention.testing.lowp (the GPU tests' oracle check), here on CPU in fp32."""
    from magi_attention.testing.lowp import dense_errors, lowp_inputs
    slices = random_slices(random.Random(5), 40, 56, 4)
    q, k, v, dout, sink = lowp_inputs(40, 56, (4, 2), 16, 0, 2, torch.float32, "cpu")

    def attend(mask):
        def call(q, k, v, sink):
            out, meta = flex_flash_attn_func(q, k, v, *slices_to_tensors(mask), sink=sink)
            return out, meta.lse
        return call

    assert dense_errors(attend(slices), q, k, v, dout, slices, sink) == []
    wrong = slices[:-1] + [AttnSlice.make(0, 40, 0, 56)]
    assert dense_errors(attend(wrong), q, k, v, dout, slices, sink)
