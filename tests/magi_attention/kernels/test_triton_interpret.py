"""The Triton kernels on CPU through Triton's interpreter (TRITON_INTERPRET=1), at tiny sizes,
against the reference backend in fp32 on the same fp16 inputs.

The interpreter must be switched on before triton.jit decorates the kernels, so the kernels run in
one subprocess (about 80 s for all cases on one core) that reports max errors as JSON; each case
asserts on its own. Both masking paths run: the per-row interval table and, with the table disabled, the
OR over the q tile's slice list; the forward with pointer loads, with tensor descriptors
(use_tma) and with PackGQA (a group's q heads in one program), the ordered two-kernel backward
with pointer and TMA loads. Tolerance for fp16 inputs (P and dS rounded to fp16 before the
matmuls): max abs error <= 1e-2 * max|ref| + 2e-3.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[3])

pytest.importorskip("triton")
torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.skipif(
    torch.cuda.is_available(),
    reason="CPU-only check; with a GPU the compiled kernels are tested (test_triton_gpu.py), and "
           "Triton 3.6's interpreter fails on numpy 2.5 there"),
    pytest.mark.slow]  # started first under xdist (tests/conftest.py)

CASES = {
    "causal_overlap_gqa": ("[(0, 60, 0, 60, 1), (30, 90, 10, 100, 3), (20, 50, 40, 80, 2)]", 100, 100, 4, 2, 0.0),
    "docs_edge_tiles_mqa": ("[(0, 37, 0, 37, 1), (37, 100, 37, 100, 1), (37, 100, 0, 10, 0)]", 100, 100, 4, 1, 0.0),
    "rect_empty_rows_softcap": ("[(10, 50, 5, 70, 0), (60, 90, 0, 90, 2), (10, 50, 60, 120, 1)]", 97, 120, 2, 2, 4.0),
    "duplicate_slices": ("[(0, 64, 0, 64, 0), (0, 64, 0, 64, 0), (16, 64, 16, 64, 1)]", 64, 64, 2, 1, 0.0),
    # full key tiles of one q tile with a gap (not one run)
    "full_tiles_with_gap": ("[(0, 64, 0, 32, 0), (0, 64, 64, 96, 0), (64, 100, 0, 100, 1)]", 100, 100, 2, 1, 0.0),
}

SCRIPT = textwrap.dedent('''
    import json, os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    from magi_attention.common import AttnSlice
    from magi_attention.kernels import block_sparse, reference
    from magi_attention.kernels.plan import FlexAttnPlan
    from magi_attention.kernels.triton.backward import launch_bwd
    from magi_attention.kernels.triton.configs import BwdConfig, FwdConfig
    from magi_attention.kernels.triton.forward import launch_fwd

    from magi_attention.testing.triton_interpreter import patch
    patch()  # numpy >= 2.4 scalars

    cases = json.loads(sys.argv[1])
    results = {}
    for table in (True, False):
        max_table = 8 if table else -1
        for name, (spec, sq, sk, hq, hk, cap) in cases.items():
            slices = [AttnSlice.make(*t) for t in eval(spec)]
            mask = FlexAttnPlan.from_slices(slices, sq, sk)
            g = torch.Generator().manual_seed(0)
            q, k, v, do = (torch.randn(s, h, 32, generator=g).half()
                           for s, h in ((sq, hq), (sk, hk), (sk, hk), (sq, hq)))
            scale = 32 ** -0.5
            fc, bc = FwdConfig(32, 16, 4, 1), BwdConfig(16, 32, 32, 16, 4, 1)
            plan = lambda m, n: block_sparse.plan_block_sparse(slices, sq, sk, m, n,
                                                               max_table_intervals=max_table)
            out, lse, mx = launch_fwd(q, k, v, plan(32, 16), fc, scale, cap, True)
            tma = FwdConfig(32, 16, 4, 2, use_tma=True)
            out_tma, lse_tma, _ = launch_fwd(q, k, v, plan(32, 16), tma, scale, cap, False)
            # PackGQA: the group's q heads in one program over 32 // group positions, with
            # pointer loads and with K/V by TMA
            group = hq // hk
            packed = {label: launch_fwd(q, k, v, plan(32 // group, 16),
                                        FwdConfig(32, 16, 4, stages, use_tma=tma, pack_gqa=True),
                                        scale, cap, False)
                      for label, stages, tma in (("pack", 1, False), ("pack_tma", 2, True))}
            dq, dk, dv = launch_bwd(do, q, k, v, out, lse, plan(16, 32), plan(32, 16), bc, scale,
                                    cap)
            bt = BwdConfig(16, 32, 32, 16, 4, 1, use_tma=True)
            tdq, tdk, tdv = launch_bwd(do, q, k, v, out, lse, plan(16, 32), plan(32, 16), bt,
                                       scale, cap)
            again = launch_bwd(do, q, k, v, out, lse, plan(16, 32), plan(32, 16), bc, scale, cap)
            f = lambda t: t.float()
            ro, rl, rm = reference.fwd(f(q), f(k), f(v), mask, scale, cap, True)
            rg = reference.bwd(f(do), f(q), f(k), f(v), ro, rl, mask, scale, cap)
            res = {}
            for key, a, b in (("out", out, ro), ("dq", dq, rg[0]), ("dk", dk, rg[1]), ("dv", dv, rg[2]),
                              ("dq_tma", tdq, rg[0]), ("dk_tma", tdk, rg[1]), ("dv_tma", tdv, rg[2])):
                res[key] = [(f(a) - b).abs().max().item(), b.abs().max().item()]
            # the ordered backward has no atomics: a second run equals the first bit for bit
            res["bwd_repeats_bitwise"] = [float(not all(
                torch.equal(a, b) for a, b in zip(again, (dq, dk, dv)))), 1.0]
            empty = torch.isinf(rl)
            res["lse_inf_match"] = bool((torch.isinf(lse) == empty).all() and (out[empty] == 0).all()
                                        and (dq[empty] == 0).all() and (tdq[empty] == 0).all())
            res["lse"] = [(lse[~empty] - rl[~empty]).abs().max().item(), 1.0]
            res["out_tma"] = [(f(out_tma) - ro).abs().max().item(), ro.abs().max().item()]
            res["lse_tma"] = [(lse_tma[~empty] - rl[~empty]).abs().max().item(), 1.0]
            res["lse_inf_match"] &= bool(torch.isinf(lse_tma[empty]).all() and (out_tma[empty] == 0).all())
            for label, (o, l, _) in packed.items():
                res[f"out_{label}"] = [(f(o) - ro).abs().max().item(), ro.abs().max().item()]
                res[f"lse_{label}"] = [(l[~empty] - rl[~empty]).abs().max().item(), 1.0]
                res["lse_inf_match"] &= bool(torch.isinf(l[empty]).all() and (o[empty] == 0).all())
            ok = torch.isfinite(rm)
            res["max_logits"] = [(mx[ok] - rm[ok]).abs().max().item(), 1.0]
            results[f"{name}-{'table' if table else 'slices'}"] = res
    print(json.dumps(results))
''')


@pytest.fixture(scope="module")
def interpreted():
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(CASES)], capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"interpreter run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("path", ["table", "slices"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_interpreted_kernels_match_reference(interpreted, name, path):
    res = interpreted[f"{name}-{path}"]
    assert res.pop("lse_inf_match"), "rows without keys must give lse -inf, out 0, dq 0"
    for key, (err, scale) in res.items():
        assert err <= 1e-2 * scale + 2e-3, f"{key}: max err {err:.3e} (max |ref| {scale:.3e})"


# The backend's forward itself (kernels.triton.fwd, not a launch function) where its rows walk
# more keys than key_parts.SPLIT_ABOVE (lowered to this size): one call per key part, merged by
# lse. The backend refuses CPU tensors, so its input check is switched off in the subprocess.
KEY_PARTS_SCRIPT = textwrap.dedent('''
    import json, os
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    from magi_attention.common import AttnSlice
    from magi_attention.kernels import reference
    from magi_attention.kernels.plan import FlexAttnPlan
    from magi_attention.testing.triton_interpreter import patch
    patch()
    import magi_attention.kernels.triton as backend
    from magi_attention.kernels.triton import key_parts
    backend.check_supported = lambda *args: None
    key_parts.PART_KEYS, key_parts.SPLIT_ABOVE = 64, 96
    calls = []
    by_parts = backend._fwd_by_key_parts
    backend._fwd_by_key_parts = lambda *args: calls.append(1) or by_parts(*args)
    slices = [AttnSlice.make(0, 80, 0, 80), AttnSlice.make(0, 80, 80, 160, "causal"),
              AttnSlice.make(20, 60, 100, 150, "invcausal")]
    plan = FlexAttnPlan.from_slices(slices, 80, 160)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(s, h, 64, generator=g).half() for s, h in ((80, 4), (160, 2), (160, 2)))
    out, lse, _ = backend.fwd(q, k, v, plan, 0.125)
    ro, rl, _ = reference.fwd(q.float(), k.float(), v.float(), plan, 0.125)
    print(json.dumps({"parts": len(key_parts.key_parts(plan)), "calls": len(calls),
                      "dtype": str(out.dtype),
                      "out": [(out.float() - ro).abs().max().item(), ro.abs().max().item()],
                      "lse": (lse - rl).abs().max().item()}))
''')


def test_interpreted_forward_in_key_parts_matches_reference():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", KEY_PARTS_SCRIPT], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["parts"] == 3 and res["calls"] == 1 and res["dtype"] == "torch.float16"
    err, scale = res["out"]
    assert err <= 1e-2 * scale + 2e-3 and res["lse"] <= 1e-3, res


def _interpreted(script: str) -> dict:
    """The JSON a script prints last, run in a fresh interpreter from the checkout's root."""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    if proc.returncode != 0:
        pytest.fail(f"interpreter run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# head_dim 256 with the tiles the backend takes for it (configs.FWD_WIDE / BWD_WIDE) and the
# ordered backward it runs: edge tiles in q and k, GQA, rows without keys
WIDE_SCRIPT = textwrap.dedent('''
    import json, os
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    from magi_attention.common import AttnSlice
    from magi_attention.kernels import block_sparse, reference
    from magi_attention.kernels.plan import FlexAttnPlan
    from magi_attention.kernels.triton.backward import launch_bwd
    from magi_attention.kernels.triton.configs import bwd_config, fwd_config
    from magi_attention.kernels.triton.forward import launch_fwd
    from magi_attention.testing.triton_interpreter import patch
    patch()
    sq, sk, d = 150, 170, 256
    slices = [AttnSlice.make(0, 90, 0, 90, 1), AttnSlice.make(90, 140, 20, 170, 0),
              AttnSlice.make(90, 140, 0, 10, 2)]  # rows 140-149 have no key
    plan = lambda m, n: block_sparse.plan_block_sparse(slices, sq, sk, m, n)
    g = torch.Generator().manual_seed(0)
    q, k, v, do = (torch.randn(s, h, d, generator=g).half() for s, h in ((sq, 4), (sk, 2), (sk, 2), (sq, 4)))
    fc, bc = fwd_config(d), bwd_config(d)
    scale = d ** -0.5
    out, lse, _ = launch_fwd(q, k, v, plan(fc.block_m, fc.block_n), fc, scale, 0.0, False)
    grads = launch_bwd(do, q, k, v, out, lse, plan(bc.block_m1, bc.block_n1),
                       plan(bc.block_m2, bc.block_n2), bc, scale, 0.0)
    f = lambda t: t.float()
    mask = FlexAttnPlan.from_slices(slices, sq, sk)
    ro, rl, _ = reference.fwd(f(q), f(k), f(v), mask, scale, 0.0, False)
    rg = reference.bwd(f(do), f(q), f(k), f(v), ro, rl, mask, scale, 0.0)
    empty = torch.isinf(rl)
    res = {"out": [(f(out) - ro).abs().max().item(), ro.abs().max().item()],
           "lse": [(lse[~empty] - rl[~empty]).abs().max().item(), 1.0],
           "empty_rows": bool(empty.any() and torch.isinf(lse[empty]).all()
                              and (out[empty] == 0).all() and (grads[0][empty] == 0).all())}
    for which, a, b in zip(("dq", "dk", "dv"), grads, rg):
        res[which] = [(f(a) - b).abs().max().item(), b.abs().max().item()]
    print(json.dumps(res))
''')


def test_interpreted_head_dim_256_matches_reference():
    res = _interpreted(WIDE_SCRIPT)
    assert res.pop("empty_rows"), "rows without keys must give lse -inf, out 0, dq 0"
    for key, (err, scale) in res.items():
        assert err <= 1e-2 * scale + 2e-3, f"{key}: max err {err:.3e} (max |ref| {scale:.3e})"


# backward.gather_cast: a cut plan's dQ rows, added by slot, back to rows in the cast's pass
GATHER_SCRIPT = textwrap.dedent('''
    import json, os
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    from magi_attention.common import AttnMaskType
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton.backward import gather_cast
    from magi_attention.testing import document_slices
    from magi_attention.testing.triton_interpreter import patch
    patch()
    lens = [70, 90, 43]
    plan = plan_block_sparse(document_slices(lens, AttnMaskType.CAUSAL), 203, 203, 64, 128,
                             cut_at_slices=True)
    src = torch.randn(plan.q_slot_rows.numel(), 3, 40, generator=torch.Generator().manual_seed(0))
    res = {}
    for dtype in (torch.float16, torch.bfloat16):
        got = gather_cast(src, plan.row_slots, dtype)
        want = src[plan.row_slots.long()].to(dtype)
        err = ((got.float() - want.float()).abs() / want.float().abs().clamp_min(1e-30)).max()
        res[str(dtype)] = [list(got.shape), got.dtype == dtype, err.item()]
    res["empty"] = list(gather_cast(src, plan.row_slots[:0], torch.float16).shape)
    res["moved"] = bool((plan.row_slots.long() != torch.arange(203)).any())
    print(json.dumps(res))
''')


def test_interpreted_gather_cast_puts_each_slot_back_at_its_row():
    res = _interpreted(GATHER_SCRIPT)
    assert res.pop("moved"), "the plan's slots must differ from its rows, or the test is idle"
    assert res.pop("empty") == [0, 3, 40]
    # fp16 bit-equal to torch's index_select and cast; bf16 within one bf16 step (numpy has no
    # bf16: the interpreter's cast may truncate where the GPU's and torch's round to nearest)
    for dtype, (shape, dtype_ok, err) in res.items():
        assert shape == [203, 3, 40] and dtype_ok, dtype
        assert err == 0 if dtype == "torch.float16" else err <= 2 ** -7, (dtype, err)
