"""Two backward calls of FA4's SM90 kernel on the inputs gluon_bwd_profile.py gives FFA's (GQA
64:8, head_dim 128, bf16, full or causal), for ncu to capture the second:

    ncu --kernel-name regex:Backward --launch-skip 3 --launch-count 3 --set full \
        python scripts/dev/fa4_bwd_once.py --mask causal

(a backward is three launches: preprocess, the main kernel, postprocess).
"""
from __future__ import annotations

import argparse

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seqlen", type=int, default=16384)
    p.add_argument("--mask", choices=["full", "causal"], default="full")
    args = p.parse_args()
    from flash_attn.cute.interface import flash_attn_func
    s, hq, hk, d = args.seqlen, 64, 8, 128
    q, k, v = (torch.randn(1, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for h in (hq, hk, hk))
    out = flash_attn_func(q, k, v, softmax_scale=d ** -0.5, causal=args.mask == "causal")
    out = out[0] if isinstance(out, (tuple, list)) else out
    do = torch.randn_like(out)
    for _ in range(2):
        torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
