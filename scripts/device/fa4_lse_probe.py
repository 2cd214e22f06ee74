"""Why ffa_fa4's forward trails plain FA4 on cells where both run the same FA4 kernel (notes/fa4.md).

Per cell (GQA 64:8, head_dim 128, bf16), in alternating rounds so drift hits every variant alike:
  peer       the benchmark's fa4 adapter forward (FA4's public API under no_grad: no lse)
  ffa        the benchmark's ffa_fa4 adapter forward (flex_flash_attn_func, return_lse=False)
  ffa_lse    flex_flash_attn_func with return_lse=True (the call path before this probe)
  raw_lse    interface._flash_attn_fwd with the plan's arguments, return_lse=True
  raw_nolse  the same, return_lse=False
Columns: device time per call (median of CUDA-event timings, as the benchmark takes them) and
host time per call (launch loop measured while a sleep kernel holds the GPU, so no call waits).

    python scripts/device/fa4_lse_probe.py --out $OUT [--rounds 3 --repeat 30]
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.config import DataConfig, MaskChoice  # noqa: E402
from bench.kernels import load_adapter  # noqa: E402
from bench.masks import convert  # noqa: E402
from bench.metrics import host_us_per_call, time_cuda_ms  # noqa: E402
from bench.problem import Shapes, make_inputs  # noqa: E402
from bench.sweep import cell_mask  # noqa: E402
from magi_attention.functional import FlexAttnPlan, flex_flash_attn_func  # noqa: E402
from magi_attention.kernels import fa4  # noqa: E402

CELLS = [("full_document", 4096), ("full_document", 16384), ("full_document", 32768),
         ("causal_document", 16384), ("sliding_window_causal", 4096),
         ("sliding_window_causal", 16384), ("full", 4096), ("block_causal_document", 4096)]


def variants(mask, shapes, device):
    inputs = make_inputs(shapes, device)
    peer = load_adapter("fa4").prepare(mask, shapes, device, inputs)
    ffa = load_adapter("ffa_fa4").prepare(mask, shapes, device, inputs)
    q, k, v = (t[0].contiguous() for t in (inputs.q, inputs.k, inputs.v))
    qr, kr, ty = convert.to_slices_tensors(mask, device=device)
    plan = FlexAttnPlan.from_tensors(qr, kr, ty, shapes.seqlen, shapes.seqlen)
    fa4.prepare(plan, shapes.head_dim, device)
    conv = fa4._conversion(plan, shapes.head_dim, device)
    form, args = fa4._kernel_args(plan, conv, device, True, backward=False)
    interface = fa4._fa4()[0]
    b = lambda t: fa4._batched(t, form)  # noqa: E731
    scale = shapes.softmax_scale

    def raw(lse):
        return lambda: interface._flash_attn_fwd(b(q), b(k), b(v), softmax_scale=scale,
                                                 return_lse=lse, **args)

    def ffa_lse():
        return flex_flash_attn_func(q, k, v, plan, softmax_scale=scale, backend="fa4")

    return {"peer": peer.fwd, "ffa": ffa.fwd, "ffa_lse": ffa_lse, "raw_lse": raw(True),
            "raw_nolse": raw(False)}, form


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    device = torch.device("cuda")
    path = Path(args.out) / "fa4_lse_probe.csv"
    fields = ["mask", "seqlen", "variant", "native", "device_ms", "device_ms_rounds", "host_us"]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for name, seqlen in CELLS:
            with torch.no_grad():
                mask = cell_mask(MaskChoice(name=name, params={}, label=name), seqlen,
                                 DataConfig(), 8)
                shapes = Shapes(1, seqlen, 64, 8, 128, "bfloat16")
                fns, form = variants(mask, shapes, device)
                times = {n: [] for n in fns}
                for _ in range(args.rounds):
                    for n, fn in fns.items():
                        times[n].append(time_cuda_ms(fn, warmup=3, repeat=args.repeat))
                for n, fn in fns.items():
                    row = dict(mask=name, seqlen=seqlen, variant=n, native=form is not None,
                               device_ms=round(statistics.median(times[n]), 5),
                               device_ms_rounds=" ".join(f"{t:.4f}" for t in times[n]),
                               host_us=round(host_us_per_call(fn), 1))
                    writer.writerow(row)
                    f.flush()
                    print(row, flush=True)


if __name__ == "__main__":
    main()
