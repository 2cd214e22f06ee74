"""The reference backend against dense-mask torch autograd (fp64), and the API's input checks."""
import random

import pytest
import torch

from magi_attention.common import AttnSlice, slices_to_tensors, to_dense
from magi_attention.functional import flex_flash_attn_func
from magi_attention.testing import dense_attention, random_qkv, random_slices


def check_against_dense(slices, seqlen_q, seqlen_k, heads=(4, 2), head_dim=16, softcap=0.0,
                        seed=0, atol=1e-4):
    q, k, v = random_qkv(seqlen_q, seqlen_k, heads[0], heads[1], head_dim, seed=seed)
    tensors = slices_to_tensors(slices)
    out, meta = flex_flash_attn_func(q, k, v, *tensors, softcap=softcap, backend="reference",
                                     return_max_logits=True)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    mask = to_dense(slices, seqlen_q, seqlen_k)
    ref_out, ref_lse = dense_attention(q, k, v, mask, softcap=softcap)
    ref_grads = torch.autograd.grad(ref_out, (q, k, v), dout.double())
    torch.testing.assert_close(out.double(), ref_out, atol=atol, rtol=1e-4)
    torch.testing.assert_close(meta.lse.double(), ref_lse, atol=atol, rtol=1e-4)
    for g, r in zip(grads, ref_grads):
        assert torch.isfinite(g).all()
        torch.testing.assert_close(g.double(), r.double(), atol=atol, rtol=1e-4)
    empty_rows = ~mask.any(dim=1)
    assert (out[empty_rows] == 0).all() and torch.isinf(meta.lse[empty_rows]).all()
    assert (grads[0][empty_rows] == 0).all()
    return meta


@pytest.mark.parametrize("seed", range(8))
def test_random_overlapping_slices_gqa_and_empty_rows(seed):
    rng = random.Random(seed)
    seqlen_q, seqlen_k = rng.choice([(48, 48), (40, 72), (70, 33)])
    slices = random_slices(rng, seqlen_q, seqlen_k, rng.randint(1, 5))
    check_against_dense(slices, seqlen_q, seqlen_k, heads=rng.choice([(4, 4), (4, 2), (6, 1)]),
                        softcap=rng.choice([0.0, 5.0]), seed=seed)


def test_key_chunking_and_max_logits(monkeypatch):
    import magi_attention.kernels.reference as ref
    monkeypatch.setattr(ref, "KEY_CHUNK", 7)  # force many chunks and the online rescale path
    slices = [AttnSlice.make(0, 50, 0, 50, "causal"), AttnSlice.make(10, 30, 20, 60, "bicausal")]
    meta = check_against_dense(slices, 50, 60)
    q, k, v = random_qkv(50, 60, 4, 2, 16, seed=0)
    scores = torch.einsum("qhd,khd->hqk", q.double(), k.double().repeat_interleave(2, 1)) / 4
    scores = scores.masked_fill(~to_dense(slices, 50, 60), float("-inf"))
    torch.testing.assert_close(meta.max_logits.double(), scores.amax(dim=(1, 2)), atol=1e-5, rtol=0)


def _args(seqlen=16):
    q, k, v = random_qkv(seqlen, seqlen, 4, 2, 16, requires_grad=False)
    r = torch.tensor([[0, seqlen]], dtype=torch.int32)
    return q, k, v, r, r.clone(), torch.tensor([1], dtype=torch.int32)


@pytest.mark.parametrize("mutate, match", [
    (lambda a: (a[0], a[1], a[2], torch.tensor([[0, 17]], dtype=torch.int32), a[4], a[5]), r"q_ranges\[0\].*<= 16"),
    (lambda a: (a[0], a[1], a[2], a[3], torch.tensor([[5, 2]], dtype=torch.int32), a[5]), r"k_ranges\[0\]"),
    (lambda a: (a[0], a[1], a[2], a[3], torch.tensor([[0, 4], [4, 8]], dtype=torch.int32), a[5]), "num_slices"),
    (lambda a: (a[0][:, :3], a[1], a[2], a[3], a[4], a[5]), "not divisible"),
    (lambda a: (a[0].to(torch.int8), a[1], a[2], a[3], a[4], a[5]), "dtype"),
    (lambda a: (a[0], a[1], a[2], a[3].long(), a[4], a[5]), "int32"),
    (lambda a: (a[0], a[1], a[2], a[3], a[4], torch.tensor([7], dtype=torch.int32)), "0..3"),
    (lambda a: (a[0], a[1][:, :, :8], a[2][:, :, :8], a[3], a[4], a[5]), "head_dim"),
])
def test_bad_inputs_raise_clear_errors(mutate, match):
    with pytest.raises((ValueError, TypeError), match=match):
        flex_flash_attn_func(*mutate(_args()), backend="reference")


def test_unknown_backend():
    with pytest.raises(ValueError, match="unknown backend"):
        flex_flash_attn_func(*_args(), backend="cuda-magic")


def test_zero_query_rows_forward_and_backward():
    """q [0, 2, 16] with empty range tensors: out is empty, dq empty, dk and dv zero."""
    q = torch.randn(0, 2, 16, requires_grad=True)
    k, v = (torch.randn(16, 2, 16, requires_grad=True) for _ in range(2))
    out, _ = flex_flash_attn_func(q, k, v, *slices_to_tensors([]), backend="reference")
    assert out.shape == (0, 2, 16)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    assert dq.shape == (0, 2, 16)
    assert dk.shape == dv.shape == (16, 2, 16) and not dk.any() and not dv.any()


@pytest.mark.parametrize("seed", range(2))
def test_head_dim_256(seed):
    rng = random.Random(10 + seed)
    slices = random_slices(rng, 40, 56, rng.randint(1, 4))
    check_against_dense(slices, 40, 56, heads=(4, 2), head_dim=256, seed=seed)
