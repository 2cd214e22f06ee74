"""FFA over a per-KV-head mask (one plan per KV head) on the reference backend against dense
torch autograd in fp64 with each KV head's own dense mask, and the checks of its plans."""
import random

import pytest
import torch

from magi_attention.common import to_dense
from magi_attention.functional import FlexAttnPlan, flex_flash_attn_per_kv_head
from magi_attention.testing import dense_attention, random_qkv, random_slices


def _per_head(rng, seqlen_q, seqlen_k, heads_kv):
    slices = [random_slices(rng, seqlen_q, seqlen_k, rng.randint(1, 4)) for _ in range(heads_kv)]
    plans = [FlexAttnPlan.from_slices(s, seqlen_q, seqlen_k) for s in slices]
    dense = torch.stack([to_dense(s, seqlen_q, seqlen_k) for s in slices])
    return plans, dense


@pytest.mark.parametrize("seed", range(6))
def test_each_kv_head_gets_its_own_mask(seed):
    rng = random.Random(seed)
    seqlen_q, seqlen_k = rng.choice([(40, 40), (33, 70), (64, 17)])
    heads_q, heads_kv = rng.choice([(4, 2), (6, 3), (3, 3), (8, 2)])
    plans, dense = _per_head(rng, seqlen_q, seqlen_k, heads_kv)
    q, k, v = random_qkv(seqlen_q, seqlen_k, heads_q, heads_kv, 16, seed=seed)
    out, meta = flex_flash_attn_per_kv_head(q, k, v, plans, backend="reference")
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    ref_out, ref_lse = dense_attention(q, k, v, dense)
    ref_grads = torch.autograd.grad(ref_out, (q, k, v), dout.double())
    torch.testing.assert_close(out.double(), ref_out, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(meta.lse.double(), ref_lse, atol=1e-4, rtol=1e-4)
    for got, ref in zip(grads, ref_grads):
        torch.testing.assert_close(got.double(), ref.double(), atol=1e-4, rtol=1e-4)


def test_heads_differ_from_one_shared_mask():
    """The per-head result is not the shared-mask one (the test above could not pass by
    applying plans[0] to every head)."""
    rng = random.Random(3)
    plans, dense = _per_head(rng, 32, 32, 2)
    assert not torch.equal(dense[0], dense[1])
    q, k, v = random_qkv(32, 32, 4, 2, 16, seed=1, requires_grad=False)
    out, _ = flex_flash_attn_per_kv_head(q, k, v, plans, backend="reference")
    shared, _ = flex_flash_attn_per_kv_head(q, k, v, [plans[0], plans[0]], backend="reference")
    assert torch.equal(out[:, :2], shared[:, :2]) and not torch.equal(out[:, 2:], shared[:, 2:])


def test_inference_call_skips_lse_on_request():
    rng = random.Random(0)
    plans, _ = _per_head(rng, 24, 24, 2)
    q, k, v = random_qkv(24, 24, 4, 2, 16, requires_grad=False)
    out, meta = flex_flash_attn_per_kv_head(q, k, v, plans, backend="reference", return_lse=False)
    again, full = flex_flash_attn_per_kv_head(q, k, v, plans, backend="reference")
    assert meta.lse is None and full.lse.shape == (24, 4)
    torch.testing.assert_close(out, again, atol=0, rtol=0)


def test_plans_must_be_one_per_kv_head_and_fit():
    rng = random.Random(0)
    plans, _ = _per_head(rng, 24, 24, 2)
    q, k, v = random_qkv(24, 24, 4, 2, 16, requires_grad=False)
    with pytest.raises(ValueError, match="one per KV head"):
        flex_flash_attn_per_kv_head(q, k, v, plans[:1], backend="reference")
    with pytest.raises(ValueError, match="one per KV head"):
        flex_flash_attn_per_kv_head(q, k, v, [plans[0], "causal"], backend="reference")
    short = [FlexAttnPlan.from_slices([], 16, 16)] * 2
    with pytest.raises(ValueError):
        flex_flash_attn_per_kv_head(q, k, v, short, backend="reference")
