"""FFA's Gluon forward or backward against FA4's SM90 kernel on the same dense inputs (issue
14's aims: 0.95x FA4 forward, 0.85x backward, on full and causal), for timing and for ncu.

    python scripts/dev/fwd_fa4_probe.py --out rows.csv            # both kernels, interleaved
    python scripts/dev/fwd_fa4_probe.py --direction bwd --out rows.csv
    ncu --kernel-name regex:_fwd_kernel --launch-skip 1 --launch-count 1 --set full \
        python scripts/dev/fwd_fa4_probe.py --one ffa --mask full  # a warm-up, then the profiled call
    ... --one fa4 (ncu's --kernel-name regex:Forward); --direction bwd --one ffa
    (regex:_bwd_kernel) or --one fa4 (regex:bwd_sm90)

GQA 64:8, head_dim 128, bf16. The Gluon kernel is launched directly on the mask's plan (what
kernels.triton.fwd / bwd run on these masks; the backward on the Gluon forward's out and lse,
its preprocess included); FA4 through flash_attn_func (causal flag) on full and causal, its
backward through autograd (pre- and postprocess included). Other kernel masks (--masks
causal_document sliding_window_causal ...) time the Gluon kernel alone.
``--variant NAME=VALUE`` sets a module constant of gluon_forward (fwd) or gluon_backward (bwd)
first (an A/B without edits; each arm its own process: a constant is read at compile);
``--fwd-module NAME`` runs magi_attention.kernels.triton.NAME in gluon_forward's place (an arm of
the forward before a change, its file copied in for the run: session 67's cut tiles);
``--check`` compares the Gluon kernel's results (out and lse; dq, dk and dv) with the torch
reference first (an arm that is fast but wrong stops there).
"""
from __future__ import annotations

import argparse
import csv
import importlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # module_switches
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.data import sample_doc_lens  # noqa: E402
from bench.masks import build_mask  # noqa: E402
from bench.metrics import attn_flops  # noqa: E402
from magi_attention.kernels.block_sparse import plan_block_sparse  # noqa: E402
from magi_attention.kernels.triton import gluon_backward as gb  # noqa: E402
from magi_attention.kernels.triton import gluon_forward as gf  # noqa: E402
from module_switches import set_switch  # noqa: E402

HQ, HK, D = 64, 8, 128
SCALE = D ** -0.5
CHECK_MAX_SEQLEN = 16384  # --check's torch reference beyond this takes minutes a mask
MODULES = {"fwd": gf, "bwd": gb}  # what --variant sets, by direction


def inputs(seqlen: int):
    """q, k, v and dout [S, H, D] bf16, the same for every process."""
    g = torch.Generator(device="cuda").manual_seed(0)
    mk = lambda h: torch.randn(seqlen, h, D, device="cuda", generator=g).to(torch.bfloat16)  # noqa: E731
    return mk(HQ), mk(HK), mk(HK), mk(HQ)


DENSE = ("full", "causal")


def probe_mask(mask_name: str, seqlen: int):
    """The bench mask (the document masks take the sweep's sampled documents, as
    ffa_triton_perf.py)."""
    doc_lens = None if mask_name in DENSE else sample_doc_lens(seqlen, seed=0)
    return build_mask(mask_name, seqlen, doc_lens=doc_lens)


PLAN = {"fwd": "pick", "bwd": "pick"}  # --plan sets the probed direction's
_KEPT = []  # plans built and not run (--plan grid_both), held so that no later tensor takes their memory


def probe_plan(mask, seqlen: int, module, plan: str = "pick"):
    """The mask's plan at ``module``'s tiles (gluon_forward or gluon_backward), on the GPU; cut
    at the slices where the module's pick_plan takes that (what kernels.triton runs), or the
    grid's or the cut one whatever pick_plan would say (``plan``: pick, grid, cut; grid_both: the
    grid's with the cut one built too, so that only the kernel differs from the cut arm)."""
    slices = list(mask.slices)
    grid = plan_block_sparse(slices, seqlen, seqlen, module.BLOCK_M, module.BLOCK_N,
                             device="cuda")
    if plan == "grid" or (plan == "pick" and not getattr(module, "CUT_AT_SLICES", False)):
        return grid  # (a module from before cut plans has no switch)
    cut = plan_block_sparse(slices, seqlen, seqlen, module.BLOCK_M, module.BLOCK_N,
                            device="cuda", cut_at_slices=True)
    if plan == "grid_both":  # the cut arm's allocations (none freed for reuse), the grid's kernel
        _KEPT.append(cut)
        return grid
    return cut if plan == "cut" else module.pick_plan(grid, cut)


def gluon_call(mask, seqlen: int, direction: str):
    """A zero-argument call of the Gluon kernel of ``direction`` on the probe's inputs, and
    what it needs for --check ({"q", "k", "v", "dout", "out", "lse"})."""
    q, k, v, dout = inputs(seqlen)
    gf = MODULES["fwd"]
    fwd_plan = probe_plan(mask, seqlen, gf, PLAN["fwd"])
    if direction == "fwd":
        return (lambda: gf.launch_fwd(q, k, v, fwd_plan, SCALE)), dict(q=q, k=k, v=v)
    out, lse, _ = gf.launch_fwd(q, k, v, fwd_plan, SCALE)
    bwd_plan = probe_plan(mask, seqlen, gb, PLAN["bwd"])
    call = lambda: gb.launch_bwd(dout, q, k, v, out, lse, bwd_plan, SCALE)  # noqa: E731
    return call, dict(q=q, k=k, v=v, dout=dout, out=out, lse=lse)


def fa4_call(mask_name: str, seqlen: int, direction: str):
    """FA4's call on the same inputs (dense masks only), or None where FA4 is not staged."""
    try:
        from flash_attn.cute.interface import flash_attn_func
    except ImportError as e:  # FA4 not staged: the Gluon kernel alone
        print(f"fa4: {e}", file=sys.stderr)
        return None
    causal = mask_name == "causal"
    q, k, v, dout = (t[None] for t in inputs(seqlen))
    if direction == "fwd":
        return lambda: flash_attn_func(q, k, v, softmax_scale=SCALE, causal=causal)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out = flash_attn_func(q, k, v, softmax_scale=SCALE, causal=causal)
    out = out[0] if isinstance(out, (tuple, list)) else out
    return lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)


def runners(mask_name: str, seqlen: int, direction: str = "fwd"):
    """name -> a zero-argument call of each kernel on the same inputs, and the mask."""
    mask = probe_mask(mask_name, seqlen)
    calls = {"ffa": gluon_call(mask, seqlen, direction)[0]}
    fa4 = fa4_call(mask_name, seqlen, direction) if mask_name in DENSE else None
    if fa4 is not None:
        calls["fa4"] = fa4
    return calls, mask


def _max_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    """Largest absolute error over the reference's largest magnitude."""
    return ((got.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-6)).item()


def check(mask, seqlen: int, direction: str = "fwd", tol: float = 2e-2) -> None:
    """The Gluon kernel's results against kernels.reference on the probe's inputs: out and lse
    (fwd), or dq, dk, dv (bwd); raises SystemExit past ``tol`` (relative to the largest value)."""
    from magi_attention.kernels import reference
    from magi_attention.kernels.plan import FlexAttnPlan
    call, t = gluon_call(mask, seqlen, direction)
    plan = FlexAttnPlan.from_slices(list(mask.slices), seqlen, seqlen)
    got = call()
    if direction == "fwd":
        ref_out, ref_lse, _ = reference.fwd(t["q"], t["k"], t["v"], plan, SCALE)
        kept = torch.isfinite(ref_lse)
        errs = {"out": _max_err(got[0], ref_out),
                "lse": (got[1][kept] - ref_lse[kept]).abs().max().item()}
        ok = bool((torch.isfinite(got[1]) == kept).all())
    else:
        refs = reference.bwd(t["dout"], t["q"], t["k"], t["v"], t["out"], t["lse"], plan, SCALE)
        errs = {name: _max_err(g, r) for name, g, r in zip(("dq", "dk", "dv"), got, refs)}
        ok = True
    print(f"check {direction} {mask.name} {seqlen}: "
          + " ".join(f"{k} {v:.2e}" for k, v in errs.items()) + f" empty rows agree {ok}",
          flush=True)
    if not (ok and all(v < tol for v in errs.values())):
        raise SystemExit(f"check failed on {mask.name} ({direction})")


def ms(fn, reps: int = 20, span_ms: float = 5.0) -> float:
    """Median time of one call over ``reps`` timed spans after a warm-up; a span runs enough
    calls back to back to last ~span_ms (a short mask's ~0.1 ms call timed alone drifted by
    10-20% between processes, session 63)."""
    for _ in range(3):
        fn()
    inner = max(1, int(span_ms / max(_span_ms(fn, 1), 1e-3)))
    times = sorted(_span_ms(fn, inner) for _ in range(reps))
    return times[len(times) // 2]


def _span_ms(fn, calls: int) -> float:
    """ms a call of ``calls`` back-to-back calls of ``fn``, between two CUDA events."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(calls):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / calls


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--direction", choices=sorted(MODULES), default="fwd")
    p.add_argument("--seqlens", type=int, nargs="+", default=[16384])
    p.add_argument("--masks", nargs="+", default=["full", "causal"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=None)
    p.add_argument("--one", choices=["ffa", "fa4"], default=None,
                   help="--calls calls of one kernel (for ncu), on --masks[0] at --seqlens[0]")
    p.add_argument("--calls", type=int, default=2,
                   help="--one's calls (ncu: --launch-skip the first, the compile's)")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME=INT: a gluon_forward (fwd) or gluon_backward (bwd) module "
                        "constant set before any launch")
    p.add_argument("--fwd-module", default=None,
                   help="another forward module of magi_attention.kernels.triton in place of "
                        "gluon_forward (an arm of the code before a change, kept as a file)")
    p.add_argument("--plan", choices=["pick", "grid", "cut", "grid_both"], default="pick",
                   help="the probed direction's tile plan: as kernels.triton picks it, on the "
                        "grid, or cut at the slices (a cut kernel on grid tiles where no slice "
                        "bound is off the grid); grid_both: the grid's, the cut one built too")
    p.add_argument("--label", default="")
    p.add_argument("--check", action="store_true",
                   help="results against the torch reference before timing")
    args = p.parse_args()
    if args.fwd_module:
        MODULES["fwd"] = importlib.import_module(f"magi_attention.kernels.triton.{args.fwd_module}")
    module = MODULES[args.direction]
    PLAN[args.direction] = args.plan
    for item in args.variant:
        name, value = item.split("=")
        set_switch(module, name, int(value))
    if args.one:
        fn = runners(args.masks[0], args.seqlens[0], args.direction)[0][args.one]
        for _ in range(args.calls):
            fn()
        torch.cuda.synchronize()
        return
    for s in args.seqlens:
        for m in args.masks:
            calls, mask = runners(m, s, args.direction)
            if args.check and s <= CHECK_MAX_SEQLEN:
                check(mask, s, args.direction)
            elif args.check:
                print(f"check skipped at {s} (over {CHECK_MAX_SEQLEN}: the reference's time)")
            flops = attn_flops(mask.area, HQ, D, direction=args.direction)
            for r in range(args.rounds):
                for name, fn in calls.items():
                    t = ms(fn)
                    row = {"label": args.label, "kernel": name, "direction": args.direction,
                           "mask": m, "seqlen": s,
                           "round": r, "ms": round(t, 4), "tflops": round(flops / t / 1e9, 1)}
                    print(row, flush=True)
                    if args.out:
                        new = not os.path.exists(args.out)
                        with open(args.out, "a", newline="") as f:
                            w = csv.DictWriter(f, fieldnames=list(row))
                            if new:
                                w.writeheader()
                            w.writerow(row)


if __name__ == "__main__":
    main()
