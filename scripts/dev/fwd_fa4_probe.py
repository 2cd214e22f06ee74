"""FFA's Gluon forward against FA4's SM90 forward on the same dense inputs (issue 14's aim:
0.95x FA4 on full and causal), for timing and for ncu.

    python scripts/dev/fwd_fa4_probe.py --out rows.csv            # both kernels, interleaved
    ncu --kernel-name regex:_fwd_kernel --launch-skip 1 --launch-count 1 --set full \
        python scripts/dev/fwd_fa4_probe.py --one ffa --mask full  # a warm-up, then the profiled call
    ... --one fa4 (ncu's --kernel-name regex:Forward)

GQA 64:8, head_dim 128, bf16. The Gluon kernel is launched directly on the mask's plan (what
kernels.triton.fwd runs on these masks); FA4 through flash_attn_func (causal flag) on full and
causal. Other kernel masks (--masks causal_document sliding_window_causal ...) time the Gluon
kernel alone.
``--variant NAME=VALUE`` sets a gluon_forward module constant first (an A/B without edits);
``--check`` compares the Gluon kernel's out and lse with the torch reference first (an arm
that is fast but wrong stops there).
"""
from __future__ import annotations

import argparse
import csv
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.data import sample_doc_lens  # noqa: E402
from bench.masks import build_mask  # noqa: E402
from bench.metrics import attn_flops  # noqa: E402
from magi_attention.kernels.block_sparse import plan_block_sparse  # noqa: E402
from magi_attention.kernels.triton import gluon_forward as gf  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402

HQ, HK, D = 64, 8, 128


def inputs(seqlen: int):
    g = torch.Generator(device="cuda").manual_seed(0)
    mk = lambda h: torch.randn(seqlen, h, D, device="cuda", generator=g).to(torch.bfloat16)  # noqa: E731
    return mk(HQ), mk(HK), mk(HK)


DENSE = ("full", "causal")


def runners(mask_name: str, seqlen: int):
    """name -> a zero-argument call of each kernel on the same q, k, v (FA4 on the dense masks
    only; the document masks take the sweep's sampled documents, as ffa_triton_perf.py)."""
    doc_lens = None if mask_name in DENSE else sample_doc_lens(seqlen, seed=0)
    mask = build_mask(mask_name, seqlen, doc_lens=doc_lens)
    plan = plan_block_sparse(list(mask.slices), seqlen, seqlen, gf.BLOCK_M, gf.BLOCK_N,
                             device="cuda")
    q, k, v = inputs(seqlen)
    scale = D ** -0.5
    calls = {"ffa": lambda: gf.launch_fwd(q, k, v, plan, scale)}
    if mask_name not in DENSE:
        return calls, mask
    try:
        from flash_attn.cute.interface import flash_attn_func
    except ImportError as e:  # FA4 not staged: the Gluon kernel alone
        print(f"fa4: {e}", file=sys.stderr)
        return calls, mask
    causal = mask_name == "causal"
    calls["fa4"] = lambda: flash_attn_func(q[None], k[None], v[None], softmax_scale=scale,
                                           causal=causal)
    return calls, mask


def check(mask, seqlen: int, tol_out: float = 2e-2, tol_lse: float = 1e-2) -> None:
    """The Gluon forward's out and lse against kernels.reference on the probe's inputs."""
    from magi_attention.kernels import reference
    from magi_attention.kernels.plan import FlexAttnPlan
    q, k, v = inputs(seqlen)
    plan = plan_block_sparse(list(mask.slices), seqlen, seqlen, gf.BLOCK_M, gf.BLOCK_N,
                             device="cuda")
    out, lse, _ = gf.launch_fwd(q, k, v, plan, D ** -0.5)
    ref_out, ref_lse, _ = reference.fwd(q, k, v, FlexAttnPlan.from_slices(list(mask.slices),
                                                                         seqlen, seqlen), D ** -0.5)
    err_out = (out.float() - ref_out.float()).abs().max().item()
    kept = torch.isfinite(ref_lse)
    err_lse = (lse[kept] - ref_lse[kept]).abs().max().item()
    same_empty = bool((torch.isfinite(lse) == kept).all())
    print(f"check {mask.name} {seqlen}: out {err_out:.2e} lse {err_lse:.2e} empty rows agree "
          f"{same_empty}", flush=True)
    if not (err_out < tol_out and err_lse < tol_lse and same_empty):
        raise SystemExit(f"check failed on {mask.name}")


def ms(fn, reps: int = 20, span_ms: float = 5.0) -> float:
    """Median time of one call over ``reps`` timed spans after a warm-up; a span runs enough
    calls back to back to last ~span_ms (a short mask's ~0.1 ms call timed alone drifted by
    10-20% between processes, session 63)."""
    for _ in range(3):
        fn()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    inner = max(1, int(span_ms / max(a.elapsed_time(b), 1e-3)))
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / inner)
    return sorted(times)[len(times) // 2]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seqlens", type=int, nargs="+", default=[16384])
    p.add_argument("--masks", nargs="+", default=["full", "causal"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=None)
    p.add_argument("--one", choices=["ffa", "fa4"], default=None,
                   help="two calls of one kernel (for ncu), on --masks[0] at --seqlens[0]")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME=INT: a gluon_forward module constant set before any launch")
    p.add_argument("--label", default="")
    p.add_argument("--check", action="store_true",
                   help="out and lse against the torch reference before timing")
    args = p.parse_args()
    for item in args.variant:
        name, value = item.split("=")
        old = getattr(gf, name)
        value = int(value)
        setattr(gf, name, gl.constexpr(value) if isinstance(old, gl.constexpr) else value)
    if args.one:
        fn = runners(args.masks[0], args.seqlens[0])[0][args.one]
        fn(), fn()
        torch.cuda.synchronize()
        return
    for s in args.seqlens:
        for m in args.masks:
            calls, mask = runners(m, s)
            if args.check:
                check(mask, s)
            flops = attn_flops(mask.area, HQ, D, direction="fwd")
            for r in range(args.rounds):
                for name, fn in calls.items():
                    t = ms(fn)
                    row = {"label": args.label, "kernel": name, "mask": m, "seqlen": s,
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
