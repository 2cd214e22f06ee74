"""FA4 backend: clear errors when flash-attn-4 is missing (CPU), and equality with the reference
backend for every test mask, forward and backward (GPU, SM90, flash-attn-4 installed).

GPU oracle: the reference backend in fp32 on the same (upcast) bf16/fp16 inputs. Tolerance per
tensor (out, lse, dq, dk, dv), FlashAttention's rule: the kernel's max abs error may be at most 2x
the max abs error of plain low-precision attention (dense_attention computed in the input dtype)
against the same oracle, plus atol = 1e-3 * max|oracle| + 1e-4.
"""
import random

import pytest
import torch

from magi_attention import env
from magi_attention.common import AttnMaskType, AttnRange, AttnSlice, to_dense
from magi_attention.functional import (BackendUnavailable, FlexAttnPlan, flex_flash_attn_func,
                                      resolve_backend)
from magi_attention.kernels import fa4, reference
from magi_attention.kernels.fa4._convert import fa4_block_sparse
from magi_attention.testing import dense_attention
from magi_attention.testing.masks import MASK_NAMES, named_mask
from magi_attention.testing.staircase import random_staircase

ERR_FACTOR = 2.0
needs_fa4 = pytest.mark.skipif(not fa4.is_available(),
                               reason="needs flash-attn-4 and an SM90 GPU (tools/device/fa4_install.sh)")


def _tiny(device="cpu", dtype=torch.bfloat16):
    q = torch.randn(64, 2, 64, dtype=dtype, device=device)
    ranges = torch.tensor([[0, 64]], dtype=torch.int32, device=device)
    return q, q.clone(), q.clone(), ranges, ranges.clone(), torch.tensor([1], dtype=torch.int32, device=device)


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(fa4, "_cached_import_error", lambda: "ModuleNotFoundError: No module named 'flash_attn'")
    with pytest.raises(BackendUnavailable, match="pip install flash-attn-4"):
        flex_flash_attn_func(*_tiny(), backend="fa4")


def test_auto_never_picks_missing_fa4(monkeypatch):
    monkeypatch.setattr(env, "PREFER_FA4_BACKEND", True)
    monkeypatch.setattr(fa4, "_cached_import_error", lambda: "ModuleNotFoundError: flash_attn")
    assert not fa4.is_available()
    assert resolve_backend("auto", torch.device("cuda")) != "fa4"


def test_fp32_is_refused_with_reason(monkeypatch):
    monkeypatch.setattr(fa4, "_cached_import_error", lambda: None)
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9:
        with pytest.raises(BackendUnavailable, match="bf16 or fp16"):
            fa4.check_supported(*_tiny("cuda", torch.float32)[:3])
    else:
        with pytest.raises(BackendUnavailable):
            fa4.check_supported(*_tiny()[:3])


# ---------------------------------------------------------------- GPU


def _doc_lens(seqlen, seed):
    g = torch.Generator().manual_seed(seed)
    cuts = sorted(set(torch.randint(1, seqlen, (max(2, seqlen // 700),), generator=g).tolist()))
    cuts = [0] + cuts + [seqlen]
    return [b - a for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


def _inputs(seqlen_q, seqlen_k, hq, hk, d, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    mk = lambda s, h: torch.randn(s, h, d, device="cuda", generator=g).to(dtype)  # noqa: E731
    return mk(seqlen_q, hq), mk(seqlen_k, hk), mk(seqlen_k, hk), mk(seqlen_q, hq)


def check_case(slices, seqlen_q, seqlen_k, hq, hk, d, dtype, seed=0, softcap=0.0,
               deterministic=False, native=True):
    """fa4 vs the fp32 reference. native=True goes through flex_flash_attn_func (the public
    path, FA4's native kernels where they express the mask); native=False calls the backend's
    fwd/bwd with native=False (the block-sparse kernels on every mask)."""
    q, k, v, dout = _inputs(seqlen_q, seqlen_k, hq, hk, d, dtype, seed)
    plan = FlexAttnPlan.from_slices(slices, seqlen_q, seqlen_k)
    scale = d ** -0.5
    if native:
        qt, kt, vt = (t.clone().requires_grad_() for t in (q, k, v))
        out, meta = flex_flash_attn_func(qt, kt, vt, plan, softcap=softcap, backend="fa4",
                                         deterministic=deterministic)
        dq, dk, dv = torch.autograd.grad(out, (qt, kt, vt), dout)
        lse = meta.lse
    else:
        out, lse, _ = fa4.fwd(q, k, v, plan, scale, softcap, native=False)
        dq, dk, dv = fa4.bwd(dout, q, k, v, out, lse, plan, scale, softcap, deterministic,
                             native=False)
    f = lambda t: t.float()  # noqa: E731
    ro, rl, _ = reference.fwd(f(q), f(k), f(v), plan, scale, softcap)
    rdq, rdk, rdv = reference.bwd(f(dout), f(q), f(k), f(v), ro, rl, plan, scale, softcap)
    got = {"out": out, "lse": lse, "dq": dq, "dk": dk, "dv": dv}
    ref = {"out": ro, "lse": rl, "dq": rdq, "dk": rdk, "dv": rdv}
    mask = to_dense(slices, seqlen_q, seqlen_k, device="cuda")
    ql, kl, vl = (t.clone().requires_grad_() for t in (q, k, v))
    lo, ll = dense_attention(ql, kl, vl, mask, scale, softcap, compute_dtype=dtype)
    low = dict(zip(("dq", "dk", "dv"), torch.autograd.grad(lo, (ql, kl, vl), dout.to(lo.dtype))))
    low.update(out=lo, lse=ll)
    empty = ~mask.any(dim=1)
    for name in got:
        g, r, l = got[name].float(), ref[name].float(), low[name].float()
        assert not torch.isnan(g).any(), f"{name} has NaN"
        if name == "lse":
            assert torch.isinf(g[empty]).all() and (g[empty] < 0).all(), "lse of empty rows != -inf"
            g, r, l = g[~empty], r[~empty], l[~empty]
        if g.numel() == 0:
            continue
        err = (g - r).abs().max().item()
        base = (l - r).abs().max().item()
        tol = ERR_FACTOR * base + 1e-3 * r.abs().max().item() + 1e-4
        assert err <= tol, f"{name}: max err {err:.3e} > tol {tol:.3e} (low-precision err {base:.3e})"
    assert (out[empty] == 0).all() and (dq[empty] == 0).all()
    return out, dq, dk, dv


# (seqlen, seed, dtype, (num_heads_q, num_heads_kv, head_dim)); fewer seeds/configs at 8k
# (16:2 shares the GQA ratio 8 of the 64:8 benchmark, so its compiled kernels are reused there)
CASES = [(1024, 0, torch.bfloat16, (16, 2, 128)), (1024, 1, torch.bfloat16, (16, 2, 128)),
         (1024, 0, torch.float16, (4, 1, 64)), (1024, 0, torch.bfloat16, (4, 4, 64)),
         (8192, 0, torch.bfloat16, (16, 2, 128))]


def _case_id(c):
    return f"S{c[0]}-seed{c[1]}-{str(c[2]).split('.')[-1]}-{c[3][0]}to{c[3][1]}-d{c[3][2]}"


@pytest.mark.gpu
@needs_fa4
@pytest.mark.parametrize("case", CASES, ids=_case_id)
@pytest.mark.parametrize("name", MASK_NAMES)
def test_every_mask(name, case):
    seqlen, seed, dtype, (hq, hk, d) = case
    mask = named_mask(name, seqlen, doc_lens=_doc_lens(seqlen, seed), seed=seed)
    check_case(mask, seqlen, seqlen, hq, hk, d, dtype, seed)


NATIVE_MASKS = ("full", "causal", "full_document", "causal_document", "sliding_window",
                "sliding_window_causal")


@pytest.mark.gpu
@needs_fa4
@pytest.mark.parametrize("case", [CASES[0], CASES[-1]], ids=_case_id)
@pytest.mark.parametrize("name", NATIVE_MASKS)
def test_block_sparse_path_on_native_masks(name, case):
    """The masks FA4 runs natively also pass through the block-sparse path exactly."""
    seqlen, seed, dtype, (hq, hk, d) = case
    mask = named_mask(name, seqlen, doc_lens=_doc_lens(seqlen, seed), seed=seed)
    check_case(mask, seqlen, seqlen, hq, hk, d, dtype, seed, native=False)


@pytest.mark.gpu
@needs_fa4
@pytest.mark.parametrize("seed", range(4))
def test_overlapping_slices_and_empty_rows(seed):
    g = torch.Generator().manual_seed(seed)
    seqlen_q, seqlen_k = 777, 1000
    slices = []
    for _ in range(6):
        a, b = sorted(torch.randint(0, seqlen_q + 1, (2,), generator=g).tolist())
        c, e = sorted(torch.randint(0, seqlen_k + 1, (2,), generator=g).tolist())
        slices.append(AttnSlice.make(a, b, c, e, AttnMaskType(int(torch.randint(0, 4, (1,), generator=g)))))
    slices.append(slices[0])  # an exact duplicate must not count twice
    check_case(slices, seqlen_q, seqlen_k, 16, 2, 128, torch.bfloat16, seed)


@pytest.mark.gpu
@needs_fa4
def test_softcap():
    slices = [AttnSlice.make(0, 600, 0, 600, AttnMaskType.CAUSAL), AttnSlice.make(600, 1000, 0, 1000)]
    check_case(slices, 1000, 1000, 16, 2, 128, torch.bfloat16, 0, softcap=30.0)


@pytest.mark.gpu
@needs_fa4
@pytest.mark.parametrize("native", [True, False], ids=["native", "block_sparse"])
def test_deterministic_backward_repeats_bitwise(native):
    slices = [AttnSlice.make(0, 2048, 0, 2048, AttnMaskType.CAUSAL)]
    first = check_case(slices, 2048, 2048, 16, 2, 128, torch.bfloat16, 0, deterministic=True,
                       native=native)
    again = check_case(slices, 2048, 2048, 16, 2, 128, torch.bfloat16, 0, deterministic=True,
                       native=native)
    for a, b in zip(first, again):
        assert torch.equal(a, b)


@pytest.mark.gpu
@needs_fa4
def test_global_lse_gives_cp_share():
    """bwd with the merged lse/out of two key halves gives each half's share; the sum is the whole."""
    seqlen, d = 1024, 128
    q, k, v, dout = _inputs(seqlen, seqlen, 16, 2, d, torch.bfloat16, 3)
    full = [AttnSlice.make(0, seqlen, 0, seqlen, AttnMaskType.CAUSAL)]
    halves = [full[0].clip(AttnRange(0, seqlen), AttnRange(a, b)) for a, b in ((0, 512), (512, seqlen))]
    plan = lambda s: FlexAttnPlan.from_slices(s, seqlen, seqlen)  # noqa: E731
    scale = d ** -0.5
    out, lse, _ = fa4.fwd(q, k, v, plan(full), scale)
    dq, dk, dv = fa4.bwd(dout, q, k, v, out, lse, plan(full), scale)
    parts = [fa4.bwd(dout, q, k, v, out.float(), lse, plan(h), scale) for h in halves]
    torch.testing.assert_close(parts[0][0].float() + parts[1][0].float(), dq.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(parts[0][1][:512].float(), dk[:512].float(), atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(parts[1][2][512:].float(), dv[512:].float(), atol=1e-2, rtol=1e-2)
    assert (parts[0][1][512:] == 0).all() and (parts[1][2][:512] == 0).all()


@pytest.mark.gpu
@needs_fa4
@pytest.mark.parametrize("native", [True, False], ids=["native", "block_sparse"])
def test_forward_without_lse_gives_the_same_output(native):
    slices = [AttnSlice.make(0, 700, 0, 700), AttnSlice.make(700, 1000, 700, 1000, AttnMaskType.CAUSAL)]
    q, k, v, _ = _inputs(1000, 1000, 16, 2, 128, torch.bfloat16, 5)
    plan = FlexAttnPlan.from_slices(slices, 1000, 1000)
    out, lse, _ = fa4.fwd(q, k, v, plan, 128 ** -0.5, native=native)
    out_no_lse, none, _ = fa4.fwd(q, k, v, plan, 128 ** -0.5, native=native, return_lse=False)
    assert lse is not None and none is None
    torch.testing.assert_close(out_no_lse, out, atol=0, rtol=0)


@pytest.mark.gpu
@needs_fa4
@pytest.mark.parametrize("kind", ("full", "causal", "window"))
@pytest.mark.parametrize("seed", range(3))
def test_native_staircase_bottom_right(kind, seed):
    """Staircases of separate q / key segments (Lq < Lk, Lq > Lk, entries without rows or keys)
    run on FA4's varlen kernel (cu_seqlens_q != cu_seqlens_k) and match the reference: checks
    that FA4 aligns causal and windows bottom-right, as ``_native`` assumes."""
    slices, seqlen_q, seqlen_k = random_staircase(random.Random(seed), 8, 700, kind)
    plan = FlexAttnPlan.from_slices(slices, seqlen_q, seqlen_k)
    assert fa4_block_sparse(plan, 128, 128).native is not None
    check_case(slices, seqlen_q, seqlen_k, 16, 2, 128, torch.bfloat16, seed)


@pytest.mark.gpu
@needs_fa4
@pytest.mark.parametrize("quarter", [1024, 1000])
def test_native_groups_of_two_causal_runs(quarter):
    """A CP rank's two runs of causal (balanced_runs at cp 2, keys in global order) run as two
    native calls (``_native.native_groups``), dK/dV of the shared keys added: equal to the
    reference, forward and backward (1000: entries not on 128-tile bounds)."""
    n = 4 * quarter
    slices = [AttnSlice.make(0, quarter, 0, quarter, AttnMaskType.CAUSAL),
              AttnSlice.make(quarter, 2 * quarter, 0, n, AttnMaskType.CAUSAL)]
    conv = fa4_block_sparse(FlexAttnPlan.from_slices(slices, 2 * quarter, n), 128, 128)
    assert conv.native is None and len(conv.groups) == 2
    check_case(slices, 2 * quarter, n, 16, 2, 128, torch.bfloat16)
