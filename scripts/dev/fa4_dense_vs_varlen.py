"""FA4's dense kernel against its varlen kernel on the same document. Session 29 (2 x H200)
measured CP ranks run by FA4's varlen kernel 10-16% slower per 128 x 128 tile than HybridCP's
rank with one document alone (FA4's dense kernel); unequal_runs now prices that difference
(``DENSE_TILE_FACTOR``). This measures it on one GPU, GQA 64:8, head_dim 128, bf16, forward
and backward, per document of S tokens, FULL and CAUSAL:

  dense       the document alone ([1, S, H, D]: FA4's dense kernel; the FFA fa4 backend's
              native path for a one-slice plan)
  varlen_1    the same as one varlen entry (cu_seqlens [0, S])
  neighbours  the document between a 32- and a 96-token document, three varlen entries (a CP
              rank's shape at 128-token chunks), through the FFA fa4 backend's plan

    python scripts/dev/fa4_dense_vs_varlen.py --out $OUT     # rows in fa4_dense_vs_varlen.csv
TFLOPs/s count the S-token document's area only (the neighbours' ~0.1% is not subtracted).
"""
from __future__ import annotations

import argparse
import csv
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ffa_triton_sweep import time_ms  # noqa: E402
from magi_attention.common import AttnSlice  # noqa: E402
from magi_attention.functional import flex_attn_plan  # noqa: E402
from magi_attention.kernels import fa4  # noqa: E402

HQ, HKV, D = 64, 8, 128
FIELDS = ("mask", "seqlen", "path", "direction", "runtime_ms", "tflops_per_s", "gpu_name")
BEFORE, AFTER = 32, 96  # the neighbours' tokens


def _interface():
    from flash_attn.cute import interface
    return interface


def dense_and_varlen_1(q, k, v, dout, causal: bool):
    """{path: (fwd call, bwd call)} of FA4's interface on one document, dense and varlen."""
    interface, s = _interface(), q.shape[0]
    window = dict(window_size_left=None, window_size_right=0 if causal else None)
    cu = torch.tensor([0, s], dtype=torch.int32, device=q.device)
    varlen = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=s, max_seqlen_k=s)
    calls = {}
    for path, batched, extra in (("dense", lambda t: t.unsqueeze(0), {}),
                                 ("varlen_1", lambda t: t, varlen)):
        out, lse, *_ = interface._flash_attn_fwd(batched(q), batched(k), batched(v),
                                                 softmax_scale=D ** -0.5, return_lse=True,
                                                 **window, **extra)

        def fwd(b=batched, x=extra):
            return interface._flash_attn_fwd(b(q), b(k), b(v), softmax_scale=D ** -0.5,
                                             return_lse=True, **window, **x)

        def bwd(b=batched, x=extra, o=out, lse_=lse):
            return interface._flash_attn_bwd(b(q), b(k), b(v), o, b(dout), lse_,
                                             softmax_scale=D ** -0.5, **window, **x)
        calls[path] = (fwd, bwd)
    return calls


def neighbours(s: int, causal: bool, device):
    """(fwd, bwd) through the FFA fa4 backend on a 32-token, the S-token and a 96-token
    document (three varlen entries)."""
    kind = "causal" if causal else "full"
    bounds = [0, BEFORE, BEFORE + s, BEFORE + s + AFTER]
    plan = flex_attn_plan([AttnSlice.make(a, b, a, b, kind) for a, b in zip(bounds, bounds[1:])],
                          seqlen_q=bounds[-1])
    g = torch.Generator(device=device).manual_seed(1)
    q, dout = (torch.randn(bounds[-1], HQ, D, device=device, dtype=torch.bfloat16, generator=g)
               for _ in range(2))
    k, v = (torch.randn(bounds[-1], HKV, D, device=device, dtype=torch.bfloat16, generator=g)
            for _ in range(2))
    out, lse, _ = fa4.fwd(q, k, v, plan, D ** -0.5)
    return (lambda: fa4.fwd(q, k, v, plan, D ** -0.5),
            lambda: fa4.bwd(dout, q, k, v, out, lse, plan, D ** -0.5))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--seqlens", type=int, nargs="+", default=[8192, 16384])
    p.add_argument("--budget-ms", type=float, default=2000.0)
    args = p.parse_args()
    if not torch.cuda.is_available() or not fa4.is_available():
        sys.exit("needs a CUDA GPU with flash-attn-4 installed")
    gpu = torch.cuda.get_device_name()
    with open(os.path.join(args.out, "fa4_dense_vs_varlen.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        for s in args.seqlens:
            g = torch.Generator(device="cuda").manual_seed(0)
            q, dout = (torch.randn(s, HQ, D, device="cuda", dtype=torch.bfloat16, generator=g)
                       for _ in range(2))
            k, v = (torch.randn(s, HKV, D, device="cuda", dtype=torch.bfloat16, generator=g)
                    for _ in range(2))
            for mask in ("full", "causal"):
                causal = mask == "causal"
                area = s * (s + 1) // 2 if causal else s * s
                calls = dense_and_varlen_1(q, k, v, dout, causal)
                calls["neighbours"] = neighbours(s, causal, q.device)
                for path, (fwd, bwd) in calls.items():
                    for direction, fn, mult in (("fwd", fwd, 4.0), ("bwd", bwd, 10.0)):
                        ms = time_ms(fn, args.budget_ms)
                        writer.writerow(dict(mask=mask, seqlen=s, path=path,
                                             direction=direction, runtime_ms=f"{ms:.4f}",
                                             tflops_per_s=f"{mult * area * HQ * D / ms / 1e9:.1f}",
                                             gpu_name=gpu))
                        f.flush()
                        print(f"{mask} S={s} {path} {direction}: {ms:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
