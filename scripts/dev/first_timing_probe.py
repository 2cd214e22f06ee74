"""Is the first timing after a warm call slow? The timed balance (api/_tune_balance) times each
layout's kernel step after one warm call; on 4 H100s (session 38) layouts timed once measured
105-121 ms where layouts timed in rounds measured 92-98, on near-equal masks. Here one GPU times
the same causal step (the local kernel's forward + backward, the timed balance's own step) the
way a layout is timed: after an idle gap (the host solving the next layout), one warm call,
then single-step timings in a row; several gaps and sizes.

    PYTHONPATH=$PWD python3 scripts/dev/first_timing_probe.py --out $OUT/first_timing.csv
Rows: seqlen, idle_s, repeat, timing index (0 = the first after the warm call), ms.
"""
from __future__ import annotations

import argparse
import csv
import time

import torch

from magi_attention.api._tune_balance import _timed
from magi_attention.common import AttnSlice
from magi_attention.functional import load_backend
from magi_attention.kernels.plan import FlexAttnPlan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernel", default="triton")
    ap.add_argument("--seqlens", type=int, nargs="+", default=[16384, 32768])
    ap.add_argument("--idle", type=float, nargs="+", default=[0.0, 2.0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timings", type=int, default=5)
    args = ap.parse_args()
    module, dev = load_backend(args.kernel), torch.device("cuda")
    with open(args.out, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["kernel", "seqlen", "idle_s", "repeat", "timing", "ms"])
        for s in args.seqlens:
            plan = FlexAttnPlan.from_slices([AttnSlice((0, s), (0, s), "causal")], s)
            q, dout = (torch.randn(s, 64, 128, device=dev, dtype=torch.bfloat16) for _ in "ab")
            k, v = (torch.randn(s, 8, 128, device=dev, dtype=torch.bfloat16) for _ in "ab")

            def step():
                o, lse, _ = module.fwd(q, k, v, plan, 128 ** -0.5, 0.0, False)
                module.bwd(dout, q, k, v, o, lse, plan, 128 ** -0.5, 0.0, False)
            step()
            for idle in args.idle:
                for r in range(args.repeats):
                    torch.cuda.synchronize()
                    time.sleep(idle)
                    step()  # the warm call
                    for i in range(args.timings):
                        ms = _timed(step, 1) * 1e3
                        out.writerow([args.kernel, s, idle, r, i, f"{ms:.3f}"])
                        print(args.kernel, s, idle, r, i, f"{ms:.3f}", flush=True)
                    f.flush()


if __name__ == "__main__":
    main()
