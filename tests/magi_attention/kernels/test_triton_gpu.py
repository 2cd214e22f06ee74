"""Triton FFA backend against the reference backend on GPU, for every test mask (magi_attention.testing.masks).

Oracle: the reference backend in fp32 on the same (upcast) bf16/fp16 inputs. Tolerance, per
tensor (out, lse, dq, dk, dv), FlashAttention's rule: the kernel's max abs error may be at most
2x the max abs error of plain low-precision attention (dense_attention computed in the input
dtype) against the same oracle, plus atol = 1e-3 * max|oracle| + 1e-4.

The backward's ordered two-kernel path (the Triton backward wherever the Gluon one does not
run) with TMA and with pointer loads, on odd seqlens, softcap, CP shares, and a
bitwise-repeatability test; the forward with tensor-descriptor (TMA) and pointer loads, its
short-row config and PackGQA; the Gluon kernels on sm90.
"""
import math

import pytest
import torch

from magi_attention.common import AttnMaskType, AttnRange, AttnSlice, slices_to_tensors, to_dense
from magi_attention.functional import FlexAttnPlan, flex_flash_attn_func
from magi_attention.kernels import reference
from magi_attention.testing import dense_attention
from magi_attention.testing.masks import MASK_NAMES, named_mask

pytestmark = pytest.mark.gpu

ERR_FACTOR = 2.0


def _doc_lens(seqlen, seed):
    g = torch.Generator().manual_seed(seed)
    cuts = sorted(torch.randint(1, seqlen, (max(2, seqlen // 700),), generator=g).tolist())
    cuts = [0] + sorted(set(cuts)) + [seqlen]
    return [b - a for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


def _inputs(seqlen_q, seqlen_k, hq, hk, d, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    mk = lambda s, h: torch.randn(s, h, d, device="cuda", generator=g, dtype=torch.float32).to(dtype)
    return mk(seqlen_q, hq), mk(seqlen_k, hk), mk(seqlen_k, hk), mk(seqlen_q, hq)


def check_case(slices, seqlen_q, seqlen_k, hq, hk, d, dtype, seed=0, softcap=0.0, dense_lowp=True,
               deterministic=False, max_logits=True):
    q, k, v, dout = _inputs(seqlen_q, seqlen_k, hq, hk, d, dtype, seed)
    qr, kr, ty = (t.cuda() for t in slices_to_tensors(slices))
    plan = FlexAttnPlan.from_slices(slices, seqlen_q, seqlen_k)
    scale = d ** -0.5
    qt, kt, vt = (t.clone().requires_grad_() for t in (q, k, v))
    out, meta = flex_flash_attn_func(qt, kt, vt, qr, kr, ty, softcap=softcap, backend="triton",
                                     return_max_logits=max_logits, deterministic=deterministic)
    dq, dk, dv = torch.autograd.grad(out, (qt, kt, vt), dout)
    f = lambda t: t.float()
    ro, rl, rm = reference.fwd(f(q), f(k), f(v), plan, scale, softcap, True)
    rdq, rdk, rdv = reference.bwd(f(dout), f(q), f(k), f(v), ro, rl, plan, scale, softcap)
    got = {"out": out, "lse": meta.lse, "dq": dq, "dk": dk, "dv": dv}
    ref = {"out": ro, "lse": rl, "dq": rdq, "dk": rdk, "dv": rdv}
    # low-precision baseline: dense attention computed in the input dtype
    mask = to_dense(slices, seqlen_q, seqlen_k, device="cuda")
    ql, kl, vl = (t.clone().requires_grad_() for t in (q, k, v))
    lo, ll = dense_attention(ql, kl, vl, mask, scale, softcap, compute_dtype=dtype)
    ldq, ldk, ldv = torch.autograd.grad(lo, (ql, kl, vl), dout.to(lo.dtype))
    low = {"out": lo, "lse": ll, "dq": ldq, "dk": ldk, "dv": ldv}
    empty = ~mask.any(dim=1)
    for name in got:
        g, r, l = got[name].float(), ref[name].float(), low[name].float()
        assert not torch.isnan(g).any(), f"{name} has NaN"
        if name == "lse":
            assert torch.isinf(g[empty]).all() and (g[empty] < 0).all()
            g, r, l = g[~empty], r[~empty], l[~empty]
        if g.numel() == 0:
            continue
        err = (g - r).abs().max().item()
        base = (l - r).abs().max().item()
        tol = ERR_FACTOR * base + 1e-3 * r.abs().max().item() + 1e-4
        assert err <= tol, f"{name}: max err {err:.3e} > tol {tol:.3e} (low-precision err {base:.3e})"
    assert (out[empty] == 0).all() and (dq[empty] == 0).all()
    if max_logits:
        ok = torch.isfinite(rm)
        torch.testing.assert_close(meta.max_logits[ok], rm[ok], atol=2e-2, rtol=1e-2)


CASES = [(1024, seed, dtype, heads) for seed in (0, 1)
         for dtype, heads in ((torch.bfloat16, (8, 2, 128)), (torch.float16, (4, 1, 64)),
                              (torch.bfloat16, (4, 4, 64)), (torch.float16, (8, 2, 128)))
         if seed == 0 or dtype == torch.bfloat16]
CASES += [(8192, 0, torch.bfloat16, (8, 2, 128)), (8192, 0, torch.float16, (4, 1, 64)),
          (1024, 0, torch.bfloat16, (8, 2, 256))]  # head_dim 256: configs.FWD_WIDE / BWD_WIDE


def _case_id(c):
    return f"S{c[0]}-seed{c[1]}-{str(c[2]).split('.')[-1]}-{c[3][0]}to{c[3][1]}-d{c[3][2]}"


@pytest.mark.parametrize("case", CASES, ids=_case_id)
@pytest.mark.parametrize("name", MASK_NAMES)
def test_every_mask(name, case):
    seqlen, seed, dtype, (hq, hk, d) = case
    mask = named_mask(name, seqlen, doc_lens=_doc_lens(seqlen, seed), seed=seed)
    check_case(mask, seqlen, seqlen, hq, hk, d, dtype, seed)


@pytest.mark.parametrize("head_dim", [128, 256])
@pytest.mark.parametrize("deterministic", [False, True], ids=["atomic", "deterministic"])
@pytest.mark.parametrize("name", MASK_NAMES)
def test_every_mask_odd_seqlen(name, deterministic, head_dim):
    """Odd seqlen (edge tiles in q and k), GQA 8:2, head_dim 128 and 256, both backward paths."""
    seqlen = 1531
    try:
        mask = named_mask(name, seqlen, doc_lens=_doc_lens(seqlen, 0), seed=0)
    except ValueError as e:
        pytest.skip(f"{name} at S={seqlen}: {e}")
    check_case(mask, seqlen, seqlen, 8, 2, head_dim, torch.bfloat16, 0,
               deterministic=deterministic)


@pytest.mark.parametrize("name", MASK_NAMES)
def test_deterministic_is_bitwise_repeatable(name):
    from magi_attention.kernels import triton as tk
    seqlen, hq, hk, d = 2048, 8, 2, 128
    mask = named_mask(name, seqlen, doc_lens=_doc_lens(seqlen, 1), seed=1)
    q, k, v, dout = _inputs(seqlen, seqlen, hq, hk, d, torch.bfloat16, 1)
    ranges = (FlexAttnPlan.from_slices(mask, seqlen, seqlen),)
    out, lse, _ = tk.fwd(q, k, v, *ranges, d ** -0.5)
    first = tk.bwd(dout, q, k, v, out, lse, *ranges, d ** -0.5, deterministic=True)
    for _ in range(3):
        again = tk.bwd(dout, q, k, v, out, lse, *ranges, d ** -0.5, deterministic=True)
        for a, b, which in zip(first, again, ("dq", "dk", "dv")):
            assert torch.equal(a, b), f"{which} differs between deterministic runs"
    fast = tk.bwd(dout, q, k, v, out, lse, *ranges, d ** -0.5)  # Gluon where its plan suits
    for a, b, which in zip(first, fast, ("dq", "dk", "dv")):
        rel = ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()
        assert rel < 1e-2, f"{which}: default and deterministic paths differ by {rel:.2e}"


FWD_VARIANTS = {"tma": dict(use_tma=True),
                "pointer": dict(use_tma=False),  # (the d256 config's loads)
                "tma_128x128_w8": dict(use_tma=True, block_m=128, block_n=128, num_warps=8),
                # configs.fwd_config's short-row choice; the default (w4) is "tma"
                "short_rows_w8_r128": dict(use_tma=True, num_warps=8, max_registers=128),
                # PackGQA (a kv head's q heads in one program), K/V by TMA or pointers
                "pack_tma": dict(use_tma=True, pack_gqa=True),
                "pack_ptr": dict(use_tma=False, pack_gqa=True),
                "pack_short_row": dict(use_tma=True, num_warps=8, max_registers=128,
                                       pack_gqa=True)}


def _variant_case(name, seed):
    """(q, k, v, dout, plan, head_dim) of test mask ``name`` at an odd seqlen (1531), GQA 8:2,
    head_dim 128, bf16; skipped where the mask cannot be built at that size."""
    seqlen, hq, hk, d = 1531, 8, 2, 128
    try:
        mask = named_mask(name, seqlen, doc_lens=_doc_lens(seqlen, seed), seed=seed)
    except ValueError as e:
        pytest.skip(f"{name} at S={seqlen}: {e}")
    q, k, v, dout = _inputs(seqlen, seqlen, hq, hk, d, torch.bfloat16, seed)
    return q, k, v, dout, FlexAttnPlan.from_slices(mask, seqlen, seqlen), d


def _assert_fwd_matches_reference(q, k, v, plan, out, lse):
    """A forward's out and lse against the fp32 reference: rows without keys give lse -inf and
    out 0, out within 1e-2 relative L2, lse within 1e-2."""
    d = q.shape[-1]
    ro, rl, _ = reference.fwd(q.float(), k.float(), v.float(), plan, d ** -0.5)
    empty = torch.isinf(rl)
    assert torch.isinf(lse[empty]).all() and (out[empty] == 0).all()
    rel = ((out.float() - ro).norm() / ro.norm()).item()
    assert rel < 1e-2, f"out rel err {rel:.2e}"
    assert (lse[~empty] - rl[~empty]).abs().max().item() < 1e-2


@pytest.mark.parametrize("variant", sorted(FWD_VARIANTS))
@pytest.mark.parametrize("name", MASK_NAMES)
def test_fwd_variants(name, variant):
    """The Triton forward with TMA and pointer loads, at other tiles, at the short-row config
    and packed (PackGQA) equals the reference."""
    import dataclasses
    from magi_attention.kernels import triton as tk
    from magi_attention.kernels.triton.configs import fwd_config
    q, k, v, _, plan, d = _variant_case(name, 2)
    config = dataclasses.replace(fwd_config(d), **FWD_VARIANTS[variant])
    out, lse, _ = tk.fwd(q, k, v, plan, d ** -0.5, config=config)
    _assert_fwd_matches_reference(q, k, v, plan, out, lse)


@pytest.mark.parametrize("heads", [(8, 1), (16, 2), (64, 8)], ids=lambda h: f"{h[0]}to{h[1]}")
@pytest.mark.parametrize("name", ["causal_document", "block_sparse", "hash_sparse"])
def test_fwd_pack_gqa_groups(name, heads):
    """PackGQA at groups 8 and 16 (q tiles of 16 and 8 positions) equals the reference."""
    import dataclasses
    from magi_attention.kernels import triton as tk
    from magi_attention.kernels.triton.configs import fwd_config
    seqlen, (hq, hk), d = 1531, heads, 128
    mask = named_mask(name, seqlen, doc_lens=_doc_lens(seqlen, 4), seed=4)
    plan = FlexAttnPlan.from_slices(mask, seqlen, seqlen)
    q, k, v, _ = _inputs(seqlen, seqlen, hq, hk, d, torch.bfloat16, 4)
    config = dataclasses.replace(fwd_config(d), pack_gqa=True)
    out, lse, _ = tk.fwd(q, k, v, plan, d ** -0.5, config=config)
    _assert_fwd_matches_reference(q, k, v, plan, out, lse)


@pytest.mark.parametrize("heads", [(8, 1, 128), (8, 2, 64)], ids=lambda h: f"{h[0]}to{h[1]}-d{h[2]}")
@pytest.mark.parametrize("name", ["block_sparse", "hash_sparse", "var_block_sparse", "qk_sparse"])
def test_routed_pack_gqa_matches_reference(name, heads):
    """The library's default route without max logits, where it packs GQA (the sparse masks:
    test_triton_configs.py), forward and backward through flex_flash_attn_func."""
    seqlen, (hq, hk, d) = 2048, heads
    mask = named_mask(name, seqlen, doc_lens=_doc_lens(seqlen, 5), seed=5)
    check_case(mask, seqlen, seqlen, hq, hk, d, torch.bfloat16, 5, max_logits=False)


# config fields: the default loads by TMA, these by pointers (as the d256 config does)
BWD_VARIANTS = {"pointer": dict(use_tma=False)}


@pytest.mark.parametrize("variant", sorted(BWD_VARIANTS))
@pytest.mark.parametrize("name", MASK_NAMES)
def test_bwd_variants(name, variant):
    """The ordered Triton backward at other configs equals the reference."""
    import dataclasses
    from magi_attention.kernels import triton as tk
    from magi_attention.kernels.triton.configs import bwd_config
    q, k, v, dout, plan, d = _variant_case(name, 3)
    scale = d ** -0.5
    ro, rl, _ = reference.fwd(q.float(), k.float(), v.float(), plan, scale)
    ref = reference.bwd(dout.float(), q.float(), k.float(), v.float(), ro, rl, plan, scale)
    config = dataclasses.replace(bwd_config(d), **BWD_VARIANTS[variant])
    got = tk.bwd(dout, q, k, v, ro.to(q.dtype), rl, plan, scale, config=config)
    for which, a, b in zip(("dq", "dk", "dv"), got, ref):
        assert not torch.isnan(a).any(), f"{which} has NaN"
        rel = ((a.float() - b).norm() / b.norm().clamp_min(1e-30)).item()
        assert rel < 2e-2, f"{which}: rel err {rel:.2e}"
    empty = torch.isinf(rl)
    assert (got[0][empty] == 0).all()


@pytest.mark.parametrize("head_dim", [96, 512])
def test_other_head_dims_are_a_clear_error(head_dim):
    """Not a power of two (Triton's tiles are: 96 failed to compile before this check), or past
    256: a clear error, and "auto" falls back to the reference kernel with a warning."""
    from magi_attention.kernels import BackendUnavailable
    from magi_attention.kernels import triton as tk
    q, k, v, _ = _inputs(256, 256, 2, 1, head_dim, torch.bfloat16, 0)
    reason = tk.unsupported_reason(q, k, v)
    assert reason is not None and "head_dim" in reason and str(head_dim) in reason
    ranges = (FlexAttnPlan.from_slices([AttnSlice.make(0, 256, 0, 256, AttnMaskType.CAUSAL)], 256, 256),)
    with pytest.raises(BackendUnavailable, match="head_dim"):
        tk.fwd(q, k, v, *ranges, head_dim ** -0.5)


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
    check_case(slices, seqlen_q, seqlen_k, 6, 2, 64, torch.bfloat16, seed)
    check_case(slices, seqlen_q, seqlen_k, 6, 2, 64, torch.bfloat16, seed, deterministic=True)


@pytest.mark.parametrize("deterministic", [False, True], ids=["atomic", "deterministic"])
@pytest.mark.parametrize("softcap", [5.0, 30.0])
def test_softcap(softcap, deterministic):
    slices = [AttnSlice.make(0, 600, 0, 600, AttnMaskType.CAUSAL), AttnSlice.make(600, 1000, 0, 1000)]
    check_case(slices, 1000, 1000, 8, 2, 128, torch.bfloat16, 0, softcap=softcap,
               deterministic=deterministic)


@pytest.mark.parametrize("deterministic", [False, True], ids=["atomic", "deterministic"])
def test_global_lse_gives_cp_share(deterministic):
    """bwd with the merged lse/out of two key halves gives each half's share; the sum is the whole."""
    seqlen, hq, hk, d = 1024, 8, 2, 128
    q, k, v, dout = _inputs(seqlen, seqlen, hq, hk, d, torch.bfloat16, 3)
    full = [AttnSlice.make(0, seqlen, 0, seqlen, AttnMaskType.CAUSAL)]
    halves = [full[0].clip(AttnRange(0, seqlen), AttnRange(a, b)) for a, b in ((0, 512), (512, seqlen))]
    from magi_attention.kernels import triton as tk
    scale = d ** -0.5
    args = lambda s: FlexAttnPlan.from_slices(s, seqlen, seqlen)
    out, lse, _ = tk.fwd(q, k, v, args(full), scale)
    dq, dk, dv = tk.bwd(dout, q, k, v, out, lse, args(full), scale, deterministic=deterministic)
    parts = [tk.bwd(dout, q, k, v, out, lse, args(h), scale, deterministic=deterministic)
             for h in halves]
    torch.testing.assert_close((parts[0][0].float() + parts[1][0].float()), dq.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(parts[0][1][:512].float(), dk[:512].float(), atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(parts[1][2][512:].float(), dv[512:].float(), atol=1e-2, rtol=1e-2)
    assert (parts[0][1][512:] == 0).all() and (parts[1][2][:512] == 0).all()


# -- the Gluon forward (kernels.triton.gluon_forward): the default forward on sm90 when no max
# logits and no softcap are asked for and the rows are long enough (gluon_forward.plan_suits).
# The kernel itself on every mask, and flex_flash_attn_func end to end with whichever forward
# the rule picks (its out and lse feed the Triton backward)
def _gluon_runs_here():
    from magi_attention.kernels.triton import gluon_forward
    q = torch.empty(128, 1, 128, device="cuda", dtype=torch.bfloat16)
    return gluon_forward.unsupported_reason(q, q, 0.0, False)


GLUON_CASES = [(1024, 0, torch.bfloat16, (8, 2, 128)), (1531, 0, torch.bfloat16, (8, 2, 128)),
               (2048, 1, torch.float16, (4, 1, 64)), (4096, 0, torch.bfloat16, (8, 8, 128))]


def _gluon_mask(name, case):
    """The test mask of a Gluon case, skipping where the kernel or the mask cannot run."""
    reason = _gluon_runs_here()
    if reason is not None:
        pytest.skip(reason)
    seqlen, seed = case[:2]
    try:
        return named_mask(name, seqlen, doc_lens=_doc_lens(seqlen, seed), seed=seed)
    except ValueError as e:
        pytest.skip(f"{name} at S={seqlen}: {e}")


@pytest.mark.parametrize("case", GLUON_CASES, ids=_case_id)
@pytest.mark.parametrize("name", MASK_NAMES)
def test_gluon_forward_every_mask(name, case):
    mask = _gluon_mask(name, case)
    seqlen, seed, dtype, (hq, hk, d) = case
    check_case(mask, seqlen, seqlen, hq, hk, d, dtype, seed, max_logits=False)


def _gluon_kernel_case(name, case, cut=False):
    """(mask plan, Gluon tile plan, (q, k, v), head_dim) of a case the Gluon kernel runs (``cut``:
    the tiles cut at the slices), skipping where it cannot (no row interval table: the Triton
    forward runs those masks; with ``cut``, every slice bound on the grid: nothing is cut)."""
    from magi_attention.kernels.block_sparse import cuts_off_grid, plan_for
    from magi_attention.kernels.triton import gluon_forward
    mask = _gluon_mask(name, case)
    seqlen, seed, dtype, (hq, hk, d) = case
    plan = FlexAttnPlan.from_slices(mask, seqlen, seqlen)
    bm, bn = gluon_forward.BLOCK_M, gluon_forward.BLOCK_N
    if cut and not cuts_off_grid(plan, bm, bn):
        pytest.skip("every slice bound on the grid: the cut plan is the grid plan")
    tiles = plan_for(plan, bm, bn, "cuda", cut_at_slices=cut)
    if tiles.row_lo.shape[1] == 0:
        pytest.skip("no row interval table: the Triton forward runs this mask")
    q, k, v, _ = _inputs(seqlen, seqlen, hq, hk, d, dtype, seed)
    return plan, tiles, (q, k, v), d


@pytest.mark.parametrize("dynamic", [False, True], ids=["strided", "counter"])
@pytest.mark.parametrize("case", GLUON_CASES, ids=_case_id)
@pytest.mark.parametrize("name", MASK_NAMES)
def test_gluon_kernel_on_tiles_cut_at_the_slices(name, case, dynamic):
    """The Gluon kernel over a plan cut at the slices against the fp32 reference: q tiles
    shorter than 128 rows store their own rows only (the next tile's rows, computed too, are
    left to it), key tiles cut short are masked at their end; out and lse, rows without keys
    give out 0 and lse -inf."""
    from magi_attention.kernels.triton import gluon_forward
    plan, tiles, (q, k, v), d = _gluon_kernel_case(name, case, cut=True)
    assert (tiles.q_starts.diff() < gluon_forward.BLOCK_M).any()  # some q tile cut short
    out, lse, _ = gluon_forward.launch_fwd(q, k, v, tiles, d ** -0.5, dynamic=dynamic)
    _assert_fwd_matches_reference(q, k, v, plan, out, lse)


@pytest.mark.parametrize("case", GLUON_CASES, ids=_case_id)
@pytest.mark.parametrize("name", MASK_NAMES)
def test_gluon_kernel_every_mask(name, case):
    """The Gluon kernel itself (whatever the default picks at this size) against the fp32
    reference: out and lse, rows without keys give out 0 and lse -inf."""
    from magi_attention.kernels.triton import gluon_forward
    plan, tiles, (q, k, v), d = _gluon_kernel_case(name, case)
    out, lse, _ = gluon_forward.launch_fwd(q, k, v, tiles, d ** -0.5)
    _assert_fwd_matches_reference(q, k, v, plan, out, lse)


@pytest.mark.parametrize("under_pv", [True, False], ids=["under_pv", "plain_wait"])
@pytest.mark.parametrize("case", GLUON_CASES, ids=_case_id)
@pytest.mark.parametrize("name", MASK_NAMES)
def test_gluon_kernel_both_pv_waits(name, case, under_pv):
    """Both waits for P_{j-1} V_{j-1} (the softmax under it, for long rows, or the plain one:
    gluon_forward.under_pv_suits picks) against the fp32 reference, whatever the rule would
    pick for this plan."""
    from magi_attention.kernels.triton import gluon_forward
    plan, tiles, (q, k, v), d = _gluon_kernel_case(name, case)
    out, lse, _ = gluon_forward.launch_fwd(q, k, v, tiles, d ** -0.5, under_pv=under_pv)
    _assert_fwd_matches_reference(q, k, v, plan, out, lse)


@pytest.mark.parametrize("cut", [False, True], ids=["grid", "cut"])
@pytest.mark.parametrize("case", GLUON_CASES, ids=_case_id)
@pytest.mark.parametrize("name", MASK_NAMES)
def test_gluon_dynamic_grid_and_arrival_compute_every_item_as_the_strided_grid(name, case, cut):
    """The persistent grid fetching its items from a counter (``dynamic``) computes each item
    as the strided grid does (bit-equal out and lse), twice in a row (the counter resets
    itself), on grid tiles and on tiles cut at the slices; and with an Arrival whose flag the stream sets only ~20 ms after the launch (the
    last third of the keys "in flight"), the same again: the programs that reach those keys
    wait, the others run, and the launch takes at least the delay."""
    import time

    from magi_attention.comm.stream_flag import new_flag, write_flag
    from magi_attention.kernels.triton import gluon_forward as gf
    _, tiles, (q, k, v), d = _gluon_kernel_case(name, case, cut)
    seqlen = q.shape[0]
    strided = gf.launch_fwd(q, k, v, tiles, d ** -0.5, dynamic=False)
    for _ in range(2):
        dyn = gf.launch_fwd(q, k, v, tiles, d ** -0.5, dynamic=True)
        assert torch.equal(strided[0], dyn[0]) and torch.equal(strided[1], dyn[1])
    late = gf.late_tiles(tiles.num_k_tiles, tiles.block_n, [(seqlen - seqlen // 3, seqlen)],
                         tiles.k_starts.cpu().numpy())
    order, n_first = gf.arrival_order(tiles, late)
    flag = new_flag(q.device)
    arrival = gf.Arrival(flag, torch.from_numpy(late).cuda(), torch.from_numpy(order).cuda(),
                         n_first)
    side = torch.cuda.Stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    late = gf.launch_fwd(q, k, v, tiles, d ** -0.5, arrival=arrival)
    end.record()
    time.sleep(0.02)
    write_flag(flag, 1, side)
    torch.cuda.synchronize()
    assert torch.equal(strided[0], late[0]) and torch.equal(strided[1], late[1])
    if n_first < tiles.num_q_tiles:  # some tile reads the late keys: the launch waited
        assert start.elapsed_time(end) >= 15.0
    assert flag.item() == 1


@pytest.mark.parametrize("name", ["full", "causal_document", "sliding_window_causal"])
def test_gluon_forward_is_the_default_forward_on_sm90(name):
    """tk.fwd without a config runs the Gluon kernel (bit-equal to calling it directly), and
    the Triton forward with max logits agrees with it (16k tokens, documents of 4k: rows long
    enough that gluon_forward.plan_suits picks it)."""
    reason = _gluon_runs_here()
    if reason is not None:
        pytest.skip(reason)
    from magi_attention.kernels import triton as tk
    from magi_attention.kernels.block_sparse import plan_for
    from magi_attention.kernels.triton import gluon_forward
    seqlen, d = 16384, 128
    mask = named_mask(name, seqlen, doc_lens=[4096] * 4, seed=0)
    plan = FlexAttnPlan.from_slices(mask, seqlen, seqlen)
    q, k, v, _ = _inputs(seqlen, seqlen, 8, 2, d, torch.bfloat16, 0)
    out, lse, _ = tk.fwd(q, k, v, plan, d ** -0.5)
    direct = gluon_forward.launch_fwd(
        q, k, v, plan_for(plan, gluon_forward.BLOCK_M, gluon_forward.BLOCK_N, q.device),
        d ** -0.5)
    assert torch.equal(out, direct[0]) and torch.equal(lse, direct[1])
    t_out, t_lse, _ = tk.fwd(q, k, v, plan, d ** -0.5, return_max_logits=True)  # Triton kernel
    assert ((out.float() - t_out.float()).norm() / t_out.float().norm()).item() < 1e-2
    finite = torch.isfinite(t_lse)
    assert torch.equal(finite, torch.isfinite(lse))
    assert (lse[finite] - t_lse[finite]).abs().max().item() < 1e-2


def _gluon_bwd_tiles(name, case):
    """(mask plan, 64x128 tile plan) of a Gluon backward case, skipping where it cannot run."""
    from magi_attention.kernels.block_sparse import plan_for
    from magi_attention.kernels.triton import gluon_backward
    q = torch.empty(128, 1, 128, device="cuda", dtype=torch.bfloat16)
    reason = gluon_backward.unsupported_reason(q, q, 0.0, False)
    if reason is not None:
        pytest.skip(reason)
    mask = _gluon_mask(name, case)
    plan = FlexAttnPlan.from_slices(mask, case[0], case[0])
    return plan, plan_for(plan, gluon_backward.BLOCK_M, gluon_backward.BLOCK_N, "cuda")


def _gluon_bwd_plan(name, case):
    """_gluon_bwd_tiles of a case whose partial tiles the row interval table masks."""
    plan, tiles = _gluon_bwd_tiles(name, case)
    if tiles.row_lo.shape[1] == 0:
        pytest.skip("no row interval table: the Triton backward runs this mask")
    return plan, tiles


@pytest.mark.parametrize("early_empty", [True, False], ids=["early_empty", "late_empty"])
@pytest.mark.parametrize("case", GLUON_CASES, ids=_case_id)
@pytest.mark.parametrize("name", MASK_NAMES)
def test_gluon_backward_every_mask(name, case, early_empty):
    """The Gluon one-pass backward (dQ by TMA reduce-adds after the consumers swap dS halves;
    head_dim 64 adds each consumer's own keys' share) against the
    fp32 reference on every mask: dq, dk, dv within 2e-2 relative L2; rows without keys get
    dq 0. Both releases of a step's Q / dO slot (before the dQ add or after it:
    gluon_backward.early_empty_suits picks), whatever the rule would pick for this plan."""
    from magi_attention.kernels.triton import gluon_backward as gb
    plan, tiles = _gluon_bwd_plan(name, case)
    seqlen, seed, dtype, (hq, hk, d) = case
    q, k, v, dout = _inputs(seqlen, seqlen, hq, hk, d, dtype, seed)
    scale = d ** -0.5
    ro, rl, _ = reference.fwd(q.float(), k.float(), v.float(), plan, scale)
    ref = reference.bwd(dout.float(), q.float(), k.float(), v.float(), ro, rl, plan, scale)
    got = gb.launch_bwd(dout, q, k, v, ro.to(dtype), rl, tiles, scale, early_empty=early_empty)
    for which, a, b in zip(("dq", "dk", "dv"), got, ref):
        assert a.dtype == dtype and a.shape == b.shape
        assert not torch.isnan(a).any(), f"{which} has NaN"
        rel = ((a.float() - b).norm() / b.norm().clamp_min(1e-30)).item()
        assert rel < 2e-2, f"{which}: rel err {rel:.2e}"
    assert (got[0][torch.isinf(rl)] == 0).all()


@pytest.mark.parametrize("head_chunks", [1, 2])
@pytest.mark.parametrize("row_tma", [False, True], ids=["table", "row_tma"])
@pytest.mark.parametrize("case", GLUON_CASES, ids=_case_id)
@pytest.mark.parametrize("name", MASK_NAMES)
def test_gluon_backward_on_tiles_cut_at_the_slices(name, case, row_tma, head_chunks):
    """The Gluon backward over a plan cut at the slices against the fp32 reference: a short q
    tile's slots past its end read lse +inf (the preprocess's q_slot_rows), so the next tile's
    rows its Q box holds add nothing; dQ added by slot and gathered back by row; partial tiles
    masked from the row table by slot (from global memory, or by row TMA); a short key tile's
    keys past its end are masked and its dK/dV rows stored up to its end. dq, dk, dv within 2e-2 relative L2 and 5e-2 of the largest
    value cell by cell (a row counted twice would be off by its own size)."""
    from magi_attention.kernels.block_sparse import cuts_off_grid, plan_for
    from magi_attention.kernels.triton import gluon_backward as gb
    plan, _ = _gluon_bwd_plan(name, case)
    if not cuts_off_grid(plan, gb.BLOCK_M, gb.BLOCK_N):
        pytest.skip("every slice bound on the grid: the cut plan is the grid plan")
    tiles = plan_for(plan, gb.BLOCK_M, gb.BLOCK_N, "cuda", cut_at_slices=True)
    if row_tma and tiles.row_lo.shape[1] != 1:
        pytest.skip("row_tma needs one interval a row")
    seqlen, seed, dtype, (hq, hk, d) = case
    if (hq // hk) % head_chunks:
        pytest.skip("head_chunks must divide the group")
    q, k, v, dout = _inputs(seqlen, seqlen, hq, hk, d, dtype, seed)
    scale = d ** -0.5
    ro, rl, _ = reference.fwd(q.float(), k.float(), v.float(), plan, scale)
    ref = reference.bwd(dout.float(), q.float(), k.float(), v.float(), ro, rl, plan, scale)
    got = gb.launch_bwd(dout, q, k, v, ro.to(dtype), rl, tiles, scale, row_tma=row_tma,
                        head_chunks=head_chunks)
    for which, a, b in zip(("dq", "dk", "dv"), got, ref):
        assert not torch.isnan(a).any(), f"{which} has NaN"
        rel = ((a.float() - b).norm() / b.norm().clamp_min(1e-30)).item()
        worst = ((a.float() - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()
        assert rel < 2e-2 and worst < 5e-2, f"{which}: rel err {rel:.2e}, worst {worst:.2e}"
    assert (got[0][torch.isinf(rl)] == 0).all()


@pytest.mark.parametrize("head_chunks", [2, 4])
@pytest.mark.parametrize("name", ["full", "causal_document", "share_question",
                                  "block_causal_document"])
def test_gluon_backward_head_chunks_match_the_reference(name, head_chunks):
    """A kv head's 4 q heads split over head_chunks programs a key tile (each adds its dK/dV
    share into one fp32 buffer by atomics) give the reference's gradients (S=1531: a partial last
    tile) and dk, dv within bf16 rounding of the one-program kernel, for at most one fp32 dK and
    dV more memory whatever the chunk count; a chunk count that does not divide the group is
    refused."""
    from magi_attention.kernels.triton import gluon_backward as gb
    plan, tiles = _gluon_bwd_plan(name, (1531, 0))
    q, k, v, dout = _inputs(1531, 1531, 8, 2, 128, torch.bfloat16, 0)
    scale = 128 ** -0.5
    ro, rl, _ = reference.fwd(q.float(), k.float(), v.float(), plan, scale)
    ref = reference.bwd(dout.float(), q.float(), k.float(), v.float(), ro, rl, plan, scale)
    got = gb.launch_bwd(dout, q, k, v, ro.to(q.dtype), rl, tiles, scale, head_chunks=head_chunks)
    whole = gb.launch_bwd(dout, q, k, v, ro.to(q.dtype), rl, tiles, scale)
    peaks = {}
    for chunks in (1, head_chunks):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        gb.launch_bwd(dout, q, k, v, ro.to(q.dtype), rl, tiles, scale, head_chunks=chunks)
        peaks[chunks] = torch.cuda.max_memory_allocated() - base
    fp32_dkv = 2 * k.numel() * 4
    assert peaks[head_chunks] - peaks[1] <= fp32_dkv + 2 ** 20, (peaks, fp32_dkv)
    for which, a, b, w in zip(("dq", "dk", "dv"), got, ref, whole):
        assert a.dtype == q.dtype and a.shape == b.shape
        rel = ((a.float() - b).norm() / b.norm().clamp_min(1e-30)).item()
        assert rel < 2e-2, f"{which}: rel err {rel:.2e}"
        assert ((a.float() - w.float()).norm() / w.float().norm()).item() < 5e-3, which
    with pytest.raises(ValueError, match="must divide"):
        gb.launch_bwd(dout, q, k, v, ro.to(q.dtype), rl, tiles, scale, head_chunks=3)


@pytest.mark.parametrize("name", ["full", "causal_document", "block_causal_document"])
def test_gluon_kernels_read_strided_kv_in_place(name):
    """K and V given as the two halves of one [S, 2 * Hkv, D] buffer (the CP runtime's fused KV
    buffer) are read in place by TMA (gluon_forward.tma_rows): the same out and lse, dk and dv
    bit for bit as from contiguous copies (one program per kv head; dq, added by TMA in any
    order, within rounding), and no copy of K or V on the way."""
    from magi_attention.kernels.block_sparse import plan_for
    from magi_attention.kernels.triton import gluon_backward as gb
    from magi_attention.kernels.triton import gluon_forward as gf
    plan, btiles = _gluon_bwd_plan(name, (1531, 0))
    ftiles = plan_for(plan, gf.BLOCK_M, gf.BLOCK_N, "cuda")
    q, k, v, dout = _inputs(1531, 1531, 8, 2, 128, torch.bfloat16, 0)
    kv_all = torch.cat([k, v], dim=1)
    k_view, v_view = kv_all[:, :2], kv_all[:, 2:]
    assert gf.tma_rows(k_view) is k_view and gf.tma_rows(v_view) is v_view
    scale = 128 ** -0.5

    def run(kk, vv):
        out, lse, _ = gf.launch_fwd(q, kk, vv, ftiles, scale)
        return (out, lse, *gb.launch_bwd(dout, q, kk, vv, out, lse, btiles, scale,
                                         head_chunks=1))

    want = run(k, v)
    peaks = []
    for kk, vv in ((k, v), (k_view, v_view)):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        got = run(kk, vv)
        peaks.append(torch.cuda.max_memory_allocated() - base)
    for which, a, b in zip(("out", "lse", "dq", "dk", "dv"), got, want):
        if which == "dq":
            assert ((a.float() - b.float()).norm() / b.float().norm()).item() < 1e-2
        else:
            assert torch.equal(a, b), which
    assert peaks[1] <= peaks[0] + 2 ** 16, peaks  # a copy of K and V would add 2 * 1.5 MB


@pytest.mark.parametrize("name", ["causal", "causal_document", "sliding_window_causal"])
def test_gluon_backward_row_intervals_by_tma_match_the_table_in_global_memory(name):
    """Partial tiles of a one-interval-per-row plan take their rows' bounds from shared memory
    (TMA with Q; the last tile of S=1531 reads past the end: zero-filled, the empty interval);
    the table in global memory gives bit-equal dk and dv (dq: reduce-adds in no fixed order, so
    both against the reference). A plan with two intervals per row cannot take that path."""
    from magi_attention.kernels.triton import gluon_backward as gb
    plan, tiles = _gluon_bwd_plan(name, (1531, 0))
    assert tiles.row_lo.shape[1] == 1
    q, k, v, dout = _inputs(1531, 1531, 8, 2, 128, torch.bfloat16, 0)
    ro, rl, _ = reference.fwd(q.float(), k.float(), v.float(), plan, 128 ** -0.5)
    ref = reference.bwd(dout.float(), q.float(), k.float(), v.float(), ro, rl, plan, 128 ** -0.5)
    by_tma, by_table = (gb.launch_bwd(dout, q, k, v, ro.to(q.dtype), rl, tiles, 128 ** -0.5,
                                      row_tma=row_tma) for row_tma in (True, False))
    assert torch.equal(by_tma[1], by_table[1]) and torch.equal(by_tma[2], by_table[2])
    rel = ((by_tma[0].float() - ref[0]).norm() / ref[0].norm()).item()
    assert rel < 2e-2, rel
    _, two = _gluon_bwd_plan("share_question", (1024, 0))
    assert two.row_lo.shape[1] == 2
    with pytest.raises(ValueError, match="one interval per row"):
        gb.launch_bwd(dout[:1024], q[:1024], k[:1024], v[:1024], q[:1024], rl[:1024], two,
                      128 ** -0.5, row_tma=True)


@pytest.mark.parametrize("name", ["qk_sparse", "share_question"])
def test_gluon_backward_rows_of_several_intervals(name):
    """Partial tiles of a plan with several intervals a row (qk_sparse: 5, share_question: 2)
    mask through the table loop: dq, dk, dv against the reference."""
    from magi_attention.kernels.triton import gluon_backward as gb
    plan, tiles = _gluon_bwd_plan(name, (1531, 0))
    assert tiles.row_lo.shape[1] > 1
    q, k, v, dout = _inputs(1531, 1531, 8, 2, 128, torch.bfloat16, 0)
    ro, rl, _ = reference.fwd(q.float(), k.float(), v.float(), plan, 128 ** -0.5)
    ref = reference.bwd(dout.float(), q.float(), k.float(), v.float(), ro, rl, plan, 128 ** -0.5)
    got = gb.launch_bwd(dout, q, k, v, ro.to(q.dtype), rl, tiles, 128 ** -0.5)
    for name_, g, want in zip(("dq", "dk", "dv"), got, ref):
        rel = ((g.float() - want).norm() / want.norm()).item()
        assert rel < 2e-2, (name_, rel)


def _gluon_bwd_bits(name, case):
    """(mask plan, 64x128 tile plan, its KeyTileBits) of a case, any number of intervals a row."""
    from magi_attention.kernels.block_sparse import mask_intervals
    from magi_attention.kernels.triton import gluon_backward as gb
    plan, tiles = _gluon_bwd_tiles(name, case)
    return plan, tiles, gb.key_tile_bits(tiles, mask_intervals(plan))


@pytest.mark.parametrize("case", GLUON_CASES, ids=_case_id)
@pytest.mark.parametrize("name", MASK_NAMES)
def test_gluon_backward_partial_tiles_from_bitmaps(name, case):
    """Partial tiles masked from each pair's bitmap (KeyTileBits, by TMA with Q) on every mask,
    those without a row table too (hash_sparse, block_sparse): dq, dk, dv against the fp32
    reference within 2e-2 relative L2; rows without keys get dq 0."""
    from magi_attention.kernels.triton import gluon_backward as gb
    plan, tiles, bits = _gluon_bwd_bits(name, case)
    seqlen, seed, dtype, (hq, hk, d) = case
    q, k, v, dout = _inputs(seqlen, seqlen, hq, hk, d, dtype, seed)
    scale = d ** -0.5
    ro, rl, _ = reference.fwd(q.float(), k.float(), v.float(), plan, scale)
    ref = reference.bwd(dout.float(), q.float(), k.float(), v.float(), ro, rl, plan, scale)
    got = gb.launch_bwd(dout, q, k, v, ro.to(dtype), rl, tiles, scale, bits=bits)
    for which, a, b in zip(("dq", "dk", "dv"), got, ref):
        assert a.dtype == dtype and a.shape == b.shape
        rel = ((a.float() - b).norm() / b.norm().clamp_min(1e-30)).item()
        assert rel < 2e-2, f"{which}: rel err {rel:.2e}"
    assert (got[0][torch.isinf(rl)] == 0).all()


@pytest.mark.parametrize("name", ["qk_sparse", "var_block_sparse"])
def test_bwd_routes_rows_of_several_intervals_to_the_bitmaps(monkeypatch, name):
    """tk.bwd (no config) on a mask whose rows hold several key intervals (qk_sparse: 5) or
    more than the table keeps (var_block_sparse at 16k): the Gluon backward with the mask's bitmaps, built
    once and kept in the mask (dk, dv bit-equal to the direct call with them)."""
    from magi_attention.kernels import triton as tk
    from magi_attention.kernels.triton import gluon_backward as gb
    plan, tiles, bits = _gluon_bwd_bits(name, (16384, 0))
    assert gb.bits_suit(tiles) and gb.plan_suits(tiles)
    q, k, v, dout = _inputs(16384, 16384, 8, 2, 128, torch.bfloat16, 0)
    out, lse, _ = tk.fwd(q, k, v, plan, 128 ** -0.5)
    seen = []
    real = gb.launch_bwd
    monkeypatch.setattr(gb, "launch_bwd",
                        lambda *a, **kw: seen.append(kw.get("bits")) or real(*a, **kw))
    got = [tk.bwd(dout, q, k, v, out, lse, plan, 128 ** -0.5) for _ in range(2)]
    assert len(seen) == 2 and seen[0] is not None and seen[0] is seen[1]  # kept in the mask
    direct = real(dout, q, k, v, out, lse, tiles, 128 ** -0.5, bits=bits)
    assert torch.equal(got[0][1], direct[1]) and torch.equal(got[0][2], direct[2])


@pytest.mark.parametrize("name", ["causal", "causal_document"])
def test_gluon_backward_runs_from_bwd_where_its_plan_suits(name):
    """By default tk.bwd without a config is the Gluon kernel where gluon_backward.plan_suits
    (causal at 2k: dk, dv bit-equal to calling it; dq is summed by reduce-adds in no fixed
    order) and the ordered Triton backward elsewhere (causal_document at 2k: short q-tile lists,
    bit-equal to deterministic=True); deterministic=True always takes the ordered path."""
    from magi_attention.kernels import triton as tk
    from magi_attention.kernels.triton import gluon_backward as gb
    plan, tiles = _gluon_bwd_plan(name, (2048, 0))
    q, k, v, dout = _inputs(2048, 2048, 8, 2, 128, torch.bfloat16, 0)
    out, lse, _ = tk.fwd(q, k, v, plan, 128 ** -0.5)
    got = tk.bwd(dout, q, k, v, out, lse, plan, 128 ** -0.5)
    direct = gb.launch_bwd(dout, q, k, v, out, lse, tiles, 128 ** -0.5)
    ordered = tk.bwd(dout, q, k, v, out, lse, plan, 128 ** -0.5, deterministic=True)
    if gb.plan_suits(tiles):
        assert name == "causal"
        assert torch.equal(got[1], direct[1]) and torch.equal(got[2], direct[2])
    else:
        assert name == "causal_document"
        assert all(torch.equal(a, c) for a, c in zip(got, ordered))
    for a, b, c in zip(got, direct, ordered):
        assert ((a.float() - b.float()).norm() / b.float().norm()).item() < 1e-3
        assert ((a.float() - c.float()).norm() / c.float().norm()).item() < 1e-2


def test_long_key_walks_run_in_parts(monkeypatch):
    """Rows walking more than key_parts.SPLIT_ABOVE keys: the forward runs one call per key part
    merged by lse (thresholds lowered to this size: 4 parts of 500 keys); the same results as
    the reference, forward and backward, and a steady call does not synchronise."""
    from magi_attention.kernels.triton import key_parts as kp
    from magi_attention.testing.sync import assert_no_sync
    monkeypatch.setattr(kp, "PART_KEYS", 512)
    monkeypatch.setattr(kp, "SPLIT_ABOVE", 768)
    slices = [AttnSlice.make(0, 1000, 0, 1000), AttnSlice.make(0, 1000, 1000, 2000, AttnMaskType.CAUSAL),
              AttnSlice.make(300, 700, 1500, 1900, AttnMaskType.INVCAUSAL)]
    plan = FlexAttnPlan.from_slices(slices, 1000, 2000)
    assert len(kp.key_parts(plan)) == 4
    check_case(slices, 1000, 2000, 8, 2, 128, torch.bfloat16, 0, max_logits=False)
    q, k, v, dout = _inputs(1000, 2000, 8, 2, 128, torch.bfloat16, 1)
    q, k, v = (t.requires_grad_() for t in (q, k, v))

    def step():
        out, _ = flex_flash_attn_func(q, k, v, plan, backend="triton")
        torch.autograd.grad(out, (q, k, v), dout)
    step()
    assert_no_sync(step)


@pytest.mark.parametrize("deterministic", [True, False])
def test_cached_launches_match_triton_launches_and_skip_its_binding(monkeypatch, deterministic):
    """kernels/triton/launch: once a mask and shape have run, their forward and backward
    launch through the compiled kernels' own launchers (JITFunction.run is not called),
    alternating between two masks and seqlens, and give what Triton's own launches give: bit
    for bit where the kernels are (forward; the ordered backward), within atomics' rounding
    where dq is added by atomics (the default backward)."""
    from triton.runtime.jit import JITFunction

    from magi_attention.kernels.triton import launch as launch_module
    cases = []
    for seqlen, slices in ((1024, [AttnSlice.make(0, 1024, 0, 1024, "full")]),
                           (1531, _causal_docs(1531))):
        plan = FlexAttnPlan.from_slices(slices, seqlen, seqlen)
        cases.append((plan, _inputs(seqlen, seqlen, 8, 2, 128, torch.bfloat16, seqlen)))

    def run(plan, inputs):
        q, k, v, dout = inputs
        qt, kt, vt = (t.clone().requires_grad_() for t in (q, k, v))
        out, meta = flex_flash_attn_func(qt, kt, vt, plan, backend="triton",
                                         deterministic=deterministic)
        return (out, meta.lse, *torch.autograd.grad(out, (qt, kt, vt), dout))

    hooked = launch_module._hooked
    monkeypatch.setattr(launch_module, "_hooked", lambda: True)  # as under a profiler's hook:
    want = [run(*case) for case in cases]  # every launch through Triton
    monkeypatch.setattr(launch_module, "_hooked", hooked)
    first = [run(*case) for case in cases]  # through Triton where a key is new, handles kept
    calls = []
    triton_run = JITFunction.run
    monkeypatch.setattr(JITFunction, "run",
                        lambda self, *a, **kw: calls.append(self) or triton_run(self, *a, **kw))
    for got_all in (first, [run(*case) for case in cases]):
        for got, ref in zip(got_all, want):
            for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), got, ref):
                if deterministic or name in ("out", "lse"):
                    assert torch.equal(a, b), name
                else:
                    assert ((a.float() - b.float()).norm() / b.float().norm()).item() < 1e-2, name
    assert not calls, f"{len(calls)} launches went through JITFunction.run"


def _causal_docs(seqlen):
    bounds = [0]
    for n in _doc_lens(seqlen, 1):
        bounds.append(bounds[-1] + n)
    return [AttnSlice.make(a, b, a, b, "causal") for a, b in zip(bounds[:-1], bounds[1:])]
