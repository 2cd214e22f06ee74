"""Does a kernel lose per flop when one call walks twice as many keys? A CP rank's fused forward
at cp 2 is one call of S q rows over 2S keys; ring strategies call the kernel on S x S blocks
and merge. Session 29 (2 x H200, 64k tokens a GPU) measured magi, Ring AllGather and Ulysses
(one call over all 128k keys) 4-8% below the rings on Triton and not on FA4; this times the
kernel alone, on one GPU, both ways, on the shapes of a cp 2 rank:

  full:   rows [0, S) over keys [0, 2S), FULL
  causal: the second half of a causal 2S sequence: keys [0, S) FULL, keys [S, 2S) CAUSAL

    python scripts/dev/key_length_probe.py --out $OUT                  # rows in key_length_probe.csv
    python scripts/dev/key_length_probe.py --seqlen 256 --backends reference --out /tmp   # CPU
Rows: per (backend, mask, seqlen), "one_call" (S x 2S) and "two_calls" (two S x S calls and the
lse merge), runtime_ms and TFLOPs/s of the same flops.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ffa_triton_sweep  # noqa: E402
from ffa_triton_sweep import time_ms  # noqa: E402
from magi_attention.common import AttnSlice  # noqa: E402
from magi_attention.functional import flex_attn_plan, flex_flash_attn_fwd  # noqa: E402
from magi_attention.functional.merge import merge_out_lse  # noqa: E402

HQ, HKV, D = 64, 8, 128
FIELDS = ("backend", "mask", "seqlen", "calls", "runtime_ms", "tflops_per_s", "gpu_name")


def halves(mask: str, s: int) -> tuple[str, str]:
    """Mask types of the rank's two key halves: the own-sequence half is FULL for both masks
    (its keys all precede the rows, or all keys are seen); the second is FULL or CAUSAL."""
    return "full", ("full" if mask == "full" else "causal")


def one_call_plan(mask: str, s: int):
    first, second = halves(mask, s)
    return flex_attn_plan([AttnSlice.make(0, s, 0, s, first),
                           AttnSlice.make(0, s, s, 2 * s, second)], seqlen_q=s, seqlen_k=2 * s)


def half_plans(mask: str, s: int):
    return [flex_attn_plan([AttnSlice.make(0, s, 0, s, t)], seqlen_q=s, seqlen_k=s)
            for t in halves(mask, s)]


def flops(mask: str, s: int) -> float:
    """Forward flops (4 * area * heads * head_dim) of the rank's S x 2S mask."""
    area = s * s + (s * s if mask == "full" else s * (s + 1) // 2)
    return 4.0 * area * HQ * D


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--seqlen", type=int, nargs="+", default=[16384, 65536],
                   help="S: q rows of the rank (keys 2S)")
    p.add_argument("--backends", nargs="+", default=["triton", "fa4"])
    p.add_argument("--masks", nargs="+", default=["full", "causal"])
    p.add_argument("--budget-ms", type=float, default=3000.0)
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    gpu = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    ffa_triton_sweep.DEVICE = device  # its timer: CUDA events, or one wall-clock call on the CPU
    path = os.path.join(args.out, "key_length_probe.csv")
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        for s in args.seqlen:
            g = torch.Generator(device=device).manual_seed(0)
            q = torch.randn(s, HQ, D, device=device, dtype=dtype, generator=g)
            k, v = (torch.randn(2 * s, HKV, D, device=device, dtype=dtype, generator=g)
                    for _ in range(2))
            for backend in args.backends:
                for mask in args.masks:
                    whole, (a, b) = one_call_plan(mask, s), half_plans(mask, s)

                    def one():
                        return flex_flash_attn_fwd(q, k, v, whole, backend=backend)

                    def two():
                        o1, l1 = flex_flash_attn_fwd(q, k[:s], v[:s], a, backend=backend)
                        o2, l2 = flex_flash_attn_fwd(q, k[s:], v[s:], b, backend=backend)
                        return merge_out_lse(o1, l1, o2, l2, q.dtype)
                    try:
                        times = {"one_call": time_ms(one, args.budget_ms),
                                 "two_calls": time_ms(two, args.budget_ms)}
                    except Exception as e:  # a backend missing here: say so, go on
                        print(f"{backend} {mask} S={s}: {type(e).__name__}: {e}", flush=True)
                        continue
                    # the two ways compute the same attention: a wrong plan would time other work
                    diff = (one()[0].float() - two()[0].float()).abs().max().item()
                    for calls, ms in times.items():
                        writer.writerow(dict(backend=backend, mask=mask, seqlen=s, calls=calls,
                                             runtime_ms=f"{ms:.4f}",
                                             tflops_per_s=f"{flops(mask, s) / ms / 1e9:.1f}",
                                             gpu_name=gpu))
                    f.flush()
                    print(f"{backend} {mask} S={s}: one call {times['one_call']:.3f} ms, "
                          f"two calls + merge {times['two_calls']:.3f} ms, max |one - two| {diff:.2e}",
                          flush=True)


if __name__ == "__main__":
    main()
