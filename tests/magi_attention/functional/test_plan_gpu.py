"""GPU: FFA's call path. Every backend runs random masks at short and odd seqlens exactly (all
four slice types, overlaps, GQA), and a steady-state call (FFA, and MagiAttention's calc_attn)
neither copies to the host nor synchronises (torch's sync debug mode turns either into an error).

Oracle: the reference backend in fp32 on the same bf16 inputs; tolerance as in the kernel tests:
2x the error of plain bf16 dense attention against the oracle, plus 1e-3 * max|oracle| + 1e-4.
"""
import os
import random

import pytest
import torch

from magi_attention.common import to_dense
from magi_attention.functional import (FlexAttnPlan, backend_reason, flex_flash_attn_func,
                                      resolve_backend)
from magi_attention.kernels import reference
from magi_attention.testing import assert_no_sync, dense_attention, random_slices
from magi_attention.testing.masks import named_mask

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU; run on the device machine", allow_module_level=True)

BACKENDS = ("triton", "fa4")
SEQLENS = (1, 37, 127, 129, 200)


def _skip_unless(backend, q):
    reason = backend_reason(backend, q)
    if reason is not None:
        pytest.skip(reason)


def _check(backend, slices, seqlen_q, seqlen_k, heads, head_dim, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    make = lambda s, h: torch.randn(s, h, head_dim, device="cuda", generator=g).bfloat16()  # noqa: E731
    q, k, v, dout = (make(seqlen_q, heads[0]), make(seqlen_k, heads[1]), make(seqlen_k, heads[1]),
                     make(seqlen_q, heads[0]))
    _skip_unless(backend, q)
    plan = FlexAttnPlan.from_slices(slices, seqlen_q, seqlen_k)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out, meta = flex_flash_attn_func(*leaves, plan, backend=backend)
    grads = torch.autograd.grad(out, leaves, dout)
    scale = head_dim ** -0.5
    f = lambda t: t.float()  # noqa: E731
    ro, rl, _ = reference.fwd(f(q), f(k), f(v), plan, scale)
    ref_grads = reference.bwd(f(dout), f(q), f(k), f(v), ro, rl, plan, scale)
    mask = to_dense(slices, seqlen_q, seqlen_k, device="cuda")
    low_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    lo, _ = dense_attention(*low_leaves, mask, scale, compute_dtype=torch.bfloat16)
    low_grads = torch.autograd.grad(lo, low_leaves, dout)
    for name, got, ref, low in zip(("out", "dq", "dk", "dv"), (out, *grads), (ro, *ref_grads),
                                   (lo, *low_grads)):
        got, ref, low = got.float(), ref.float(), low.float()
        assert torch.isfinite(got).all(), f"{backend} {name}: not finite"
        if got.numel() == 0:
            continue
        err = (got - ref).abs().max().item()
        tol = 2 * (low - ref).abs().max().item() + 1e-3 * ref.abs().max().item() + 1e-4
        assert err <= tol, f"{backend} {name}: max err {err:.3e} > {tol:.3e}"
    empty = ~mask.any(dim=1)
    assert torch.isinf(meta.lse[empty]).all() and (out[empty] == 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seqlen", SEQLENS)
@pytest.mark.parametrize("seed", range(3))
def test_random_masks_at_short_and_odd_seqlens(backend, seqlen, seed):
    rng = random.Random(seqlen * 100 + seed)
    seqlen_k = seqlen if seed == 0 else rng.choice([seqlen, seqlen + 43, max(1, seqlen // 2)])
    slices = random_slices(rng, seqlen, seqlen_k, rng.randint(1, 4))
    slices.append(slices[0])  # an exact duplicate counts once
    heads = rng.choice([(4, 2), (8, 1), (2, 2)])
    _check(backend, slices, seqlen, seqlen_k, heads, rng.choice([64, 128]), seed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_issue_examples(backend):
    from magi_attention.common import AttnSlice
    _check(backend, [AttnSlice.make(1, 3, 1, 24, "bicausal"), AttnSlice.make(29, 32, 5, 17)],
           37, 37, (4, 2), 64, 0)
    _check(backend, [AttnSlice.make(0, 40, 0, 80, "causal"), AttnSlice.make(20, 64, 10, 50, "invcausal"),
                     AttnSlice.make(5, 30, 60, 80)], 64, 80, (4, 2), 64, 1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mask_name", ["causal_document", "block_causal_document", "causal",
                                       "qk_sparse"])
@pytest.mark.parametrize("form", ["plan", "tensors"])
def test_steady_state_call_does_not_synchronise(backend, mask_name, form):
    """(causal at 4k: rows long enough that the Triton backend's forward is the Gluon kernel on
    sm90; the document masks here run its Triton forward; qk_sparse's backward masks from the
    bitmaps, built at the first call)"""
    seqlen = 4096
    params = {"block_size": 256} if mask_name == "block_causal_document" else {}
    mask = named_mask(mask_name, seqlen, doc_lens=[1000, 2000, 1096], **params)
    q = torch.randn(seqlen, 8, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(seqlen, 2, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn_like(k, requires_grad=True)
    _skip_unless(backend, q)
    plan = FlexAttnPlan.from_slices(mask, seqlen)
    mask_args = (plan,) if form == "plan" else plan.tensors("cuda")

    def step():
        out, _ = flex_flash_attn_func(q, k, v, *mask_args, backend=backend)
        torch.autograd.grad(out, (q, k, v), torch.ones_like(out))

    step()  # first call: plans, compiles
    assert_no_sync(step)


def test_auto_picks_the_fastest_installed_backend():
    q = torch.randn(16, 2, 128, device="cuda", dtype=torch.bfloat16)
    expected = "fa4" if backend_reason("fa4", q) is None else "triton"
    assert resolve_backend("auto", q) == expected
    assert resolve_backend("auto", q, return_max_logits=True) == "triton"


@pytest.mark.parametrize("name, expected", [("causal_document", "fa4"), ("block_sparse", "triton")])
def test_auto_runs_masks_of_many_partial_tiles_on_triton(monkeypatch, name, expected):
    """With FA4 installed, "auto" keeps FA4 for a mask it runs natively and takes the Triton
    backend for one it would mask cell by cell (block_sparse: FA4 0.2x Triton); the
    output equals the chosen backend's, and the choice is kept in the plan."""
    from magi_attention.functional import _backends
    seqlen = 4096
    q, k, v = (torch.randn(seqlen, h, 128, device="cuda", dtype=torch.bfloat16) for h in (8, 2, 2))
    _skip_unless("fa4", q)
    plan = FlexAttnPlan.from_slices(named_mask(name, seqlen, doc_lens=[1000, 3000, 96]), seqlen)
    ran = []
    real = _backends.load_backend
    monkeypatch.setattr("magi_attention.functional.flex_flash_attn.load_backend",
                        lambda n: ran.append(n) or real(n))
    out, _ = flex_flash_attn_func(q, k, v, plan)
    assert ran == [expected]
    want, _ = flex_flash_attn_func(q, k, v, plan, backend=expected)
    assert torch.equal(out, want)


@pytest.fixture(scope="module")
def one_rank_group():
    import torch.distributed as dist
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        dist.init_process_group("nccl", rank=0, world_size=1)
    yield dist.group.WORLD


@pytest.mark.parametrize("mask_name", ["causal_document", "block_causal_document"])
def test_calc_attn_does_not_synchronise(one_rank_group, mask_name):
    from magi_attention.api import calc_attn, dispatch, magi_attn_flex_key
    from magi_attention.common import slices_to_tensors
    seqlen = 8192
    mask = named_mask(mask_name, seqlen, doc_lens=[3000, 4000, 1192])
    key = magi_attn_flex_key(*slices_to_tensors(mask), seqlen, 8, 2, 128,
                             one_rank_group, chunk_size=512)
    q, k, v = (dispatch(torch.randn(seqlen, h, 128, device="cuda", dtype=torch.bfloat16), key)
               .requires_grad_() for h in (8, 2, 2))

    def step():
        out, _ = calc_attn(q, k, v, key)
        torch.autograd.grad(out, (q, k, v), torch.ones_like(out))

    step()
    assert_no_sync(step)
    assert key.backend == resolve_backend("auto", q, k, v)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
def test_fused_merge_equals_torch_merge(out_dtype):
    from magi_attention.kernels.triton.merge import merge_out_lse_fused
    from magi_attention.kernels.merge import merge_out_lse_torch
    g = torch.Generator(device="cuda").manual_seed(0)
    o1 = torch.randn(300, 6, 128, device="cuda", generator=g)
    o2 = torch.randn(300, 6, 128, device="cuda", generator=g).bfloat16()
    l1 = torch.randn(300, 6, device="cuda", generator=g)
    l2 = torch.randn(300, 6, device="cuda", generator=g)
    l1[:10] = -float("inf")          # rows with keys on one side only
    l2[5:15] = -float("inf")         # rows 5..9: no keys at all
    want_o, want_l = merge_out_lse_torch(o1, l1, o2, l2, out_dtype)
    got_o, got_l = merge_out_lse_fused(o1, l1, o2, l2, out_dtype)
    assert got_o.dtype == out_dtype
    torch.testing.assert_close(got_l, want_l, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_o.float(), want_o.float(), atol=1e-2 if out_dtype != torch.float32 else 1e-5,
                               rtol=1e-2 if out_dtype != torch.float32 else 1e-5)
    assert (got_o[5:10] == 0).all() and torch.isinf(got_l[5:10]).all()
