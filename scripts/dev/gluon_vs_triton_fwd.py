"""The Triton backend's two forwards (or backwards) on the same plans: the Gluon kernel against
the Triton kernel (what runs with MAGI_ATTENTION_GLUON_FWD=0 / _BWD=0), every bench mask of the
kernel figures, from 1k to 64k tokens, so that the default is known to win where it is chosen.

    python scripts/dev/gluon_vs_triton_fwd.py --out $OUT      # on the GPU; rows in gluon_vs_triton.csv
    python scripts/dev/gluon_vs_triton_fwd.py --direction bwd --out $OUT   # gluon_vs_triton_bwd.csv
    python scripts/dev/gluon_vs_triton_fwd.py --schedule --out $OUT   # gluon_schedule.csv

``--schedule``: the Gluon forward's persistent grid striding over its items against the same
grid fetching them from a counter (gluon_forward's ``dynamic``), three rounds in turn.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ffa_triton_sweep import _mask, time_ms  # noqa: E402  (documents: the reference distribution)
from bench.metrics import attn_flops  # noqa: E402
from magi_attention.functional import FlexAttnPlan  # noqa: E402
from magi_attention.kernels.block_sparse import plan_for  # noqa: E402
from magi_attention.kernels import triton as tk  # noqa: E402
from magi_attention.kernels.triton.configs import bwd_config, fwd_config  # noqa: E402

MASKS = ("full", "causal", "full_document", "causal_document", "sliding_window_causal",
         "block_causal_document")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--seqlens", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384, 65536])
    p.add_argument("--direction", choices=("fwd", "bwd"), default="fwd")
    p.add_argument("--schedule", action="store_true")
    args = p.parse_args()
    hq, hk, d = 64, 8, 128
    bwd = args.direction == "bwd"
    path = os.path.join(args.out, "gluon_vs_triton_bwd.csv" if bwd else
                        "gluon_schedule.csv" if args.schedule else "gluon_vs_triton.csv")
    with open(path, "w", newline="") as f:
        from bench.provenance import current
        sha = current().label
        w = csv.DictWriter(f, ["mask", "seqlen", "kernel", "runtime_ms", "tflops_per_s", "gpu_name",
                               "git_sha"])
        w.writeheader()
        for seqlen in args.seqlens:
            q, k, v = (torch.randn(seqlen, h, d, device="cuda", dtype=torch.bfloat16)
                       for h in (hq, hk, hk))
            for name in MASKS:
                try:
                    mask = _mask(name, seqlen)
                except ValueError as e:  # a pattern that does not fit this length
                    print(f"{name} S={seqlen}: {e}", flush=True)
                    continue
                plan = FlexAttnPlan.from_slices(list(mask.slices), seqlen, seqlen)
                flops = attn_flops(mask.area, hq, d, direction=args.direction)
                if args.schedule:
                    kernels = _schedule_calls(q, k, v, plan, d)
                elif bwd:
                    kernels = _bwd_calls(q, k, v, plan, d)
                else:
                    triton_cfg = fwd_config(d)  # an explicit config keeps the Triton kernel
                    base = plan_for(plan, triton_cfg.block_m, triton_cfg.block_n, q.device)
                    triton_cfg = fwd_config(d, tk.plan_tiles_per_q_tile(base))
                    kernels = (("gluon", lambda: tk.fwd(q, k, v, plan, d ** -0.5)),
                               ("triton", lambda: tk.fwd(q, k, v, plan, d ** -0.5,
                                                         config=triton_cfg)))
                for kernel, fn in kernels:
                    try:
                        ms = time_ms(fn, 150.0)
                    except (ValueError, RuntimeError) as e:  # e.g. a plan without a row table
                        print(f"{name} S={seqlen} {kernel}: {type(e).__name__}: {e}", flush=True)
                        continue
                    row = dict(mask=name, seqlen=seqlen, kernel=kernel, runtime_ms=ms,
                               tflops_per_s=flops / (ms * 1e-3) / 1e12,
                               gpu_name=torch.cuda.get_device_name(), git_sha=sha)
                    w.writerow(row)
                    f.flush()
                    print(row, flush=True)


def _schedule_calls(q, k, v, plan, d):
    """The Gluon forward strided and dynamic, three times in turn (labels name the round)."""
    from magi_attention.kernels.triton import gluon_forward as gf
    tiles = plan_for(plan, gf.BLOCK_M, gf.BLOCK_N, q.device)
    return [(f"{name}_{r}", lambda dyn=dyn: gf.launch_fwd(q, k, v, tiles, d ** -0.5, dynamic=dyn))
            for r in range(3) for name, dyn in (("strided", False), ("dynamic", True))]


def _bwd_calls(q, k, v, plan, d):
    """(name, call) of the two backwards on one mask: the Gluon kernel (the Triton backend's
    default switch on) and the Triton one (an explicit config keeps it)."""
    from magi_attention.kernels.triton import gluon_backward as gb
    out, lse, _ = tk.fwd(q, k, v, plan, d ** -0.5)
    dout = torch.randn_like(q)
    gplan = plan_for(plan, gb.BLOCK_M, gb.BLOCK_N, q.device, tk.MAX_TABLE_INTERVALS)
    return (("gluon", lambda: gb.launch_bwd(dout, q, k, v, out, lse, gplan, d ** -0.5)),
            ("triton", lambda: tk.bwd(dout, q, k, v, out, lse, plan, d ** -0.5,
                                      config=bwd_config(d))))


if __name__ == "__main__":
    main()
