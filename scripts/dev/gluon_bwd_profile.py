"""One Gluon backward launch to profile (ncu on the device): a warm-up call, then the call the
profiler captures. GQA 64:8, head_dim 128, bf16, full mask by default.

    ncu --kernel-name regex:_bwd_kernel --launch-skip 1 --launch-count 1 --section SpeedOfLight \
        --section WarpStateStats python scripts/dev/gluon_bwd_profile.py --dq-mode 2
    ... gluon_bwd_profile.py --mask causal_document --doc-len 1024   # equal documents
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from magi_attention.kernels.block_sparse import plan_block_sparse  # noqa: E402
from magi_attention.kernels.triton import gluon_backward as gb  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seqlen", type=int, default=16384)
    p.add_argument("--mask", default="full")
    p.add_argument("--dq-mode", type=int, default=gb.DQ_TMA)
    p.add_argument("--doc-len", type=int, default=None,
                   help="documents of this many tokens (the last cut short) instead of the "
                        "sweep's sampled ones, for the document masks")
    args = p.parse_args()
    from bench.masks import build_mask
    s, hq, hk, d = args.seqlen, 64, 8, 128
    from bench.data import sample_doc_lens  # the sweep's documents (ffa_triton_sweep._doc_lens)
    doc_lens = (sample_doc_lens(s, seed=0) if args.doc_len is None
                else [min(args.doc_len, s - i) for i in range(0, s, args.doc_len)])
    slices = list(build_mask(args.mask, s, doc_lens=doc_lens, seed=0).slices)
    plan = plan_block_sparse(slices, s, s, gb.BLOCK_M, gb.BLOCK_N, device="cuda")
    q, k, v, do = (torch.randn(s, h, d, device="cuda", dtype=torch.bfloat16) for h in (hq, hk, hk, hq))
    out = torch.randn_like(q)
    lse = torch.randn(s, hq, device="cuda") + 10
    for _ in range(2):
        gb.launch_bwd(do, q, k, v, out, lse, plan, d ** -0.5, dq_mode=args.dq_mode)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
