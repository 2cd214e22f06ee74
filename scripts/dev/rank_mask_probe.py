"""The Gluon kernels alone on each cp-2 rank's mask: MagiAttention's fused masks against
HybridCP's placement of the same documents (one GPU; notes/magi_cp.md "Session 25").

At 16k tokens per GPU, magi's Triton backward on causal_document ran 8.2 ms on rank 0 and 6.5
ms on rank 1 for about the same tile pairs; this times each rank's mask alone, forward and
backward, in the kernels' default order (heaviest tiles first) and in plain tile order, so the
cost per tile pair of each mask shape can be read off one run.

    python3 scripts/dev/rank_mask_probe.py --out $OUT [--masks causal_document full_document]

``--synthetic``: also equal documents of each length in DOC_LENS packed into one rank's
seqlen, causal and full (strategy "synthetic"), so the cost per pair can be read as a function
of the document length alone.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[2])]

from magi_rank_tiles import HYBRID_MASKS, hybrid_ranks_slices, magi_ranks_slices  # noqa: E402

from bench.metrics import time_cuda_ms  # noqa: E402
from magi_attention.common import AttnSlice  # noqa: E402
from magi_attention.functional import (flex_attn_plan, flex_flash_attn_bwd,  # noqa: E402
                                       flex_flash_attn_fwd)
from magi_attention.kernels.block_sparse import plan_block_sparse  # noqa: E402
from magi_attention.kernels.triton import gluon_backward, gluon_forward  # noqa: E402

HQ, HKV, D = 64, 8, 128
DOC_LENS = (256, 512, 1024, 2048, 4096, 8192, 16384)
FIELDS = ("mask", "strategy", "rank", "backend", "order", "direction", "ms", "pairs", "partial",
          "tiles", "us_per_pair")


def _natural(plan, field: str):
    order = getattr(plan, field)
    return dataclasses.replace(plan, **{field: torch.arange(order.numel(), dtype=order.dtype,
                                                             device=order.device)})


def equal_docs(doc_len: int, seqlen: int, mask_type: str) -> list[AttnSlice]:
    """Documents of ``doc_len`` tokens packed into ``seqlen`` (the last one cut short)."""
    return [AttnSlice.make(s, min(s + doc_len, seqlen), s, min(s + doc_len, seqlen), mask_type)
            for s in range(0, seqlen, doc_len)]


def probe(slices, seqlen_q: int, seqlen_k: int, warmup: int, repeat: int,
          backends=("triton",)):
    """{(backend, order, direction): (ms, pairs, partial, tiles)} of one mask (pairs, partial
    and tiles counted at the Gluon kernels' tiles, for FA4 rows too)."""
    dev = torch.device("cuda")
    fplan = plan_block_sparse(slices, seqlen_q, seqlen_k, gluon_forward.BLOCK_M,
                              gluon_forward.BLOCK_N, dev)
    bplan = plan_block_sparse(slices, seqlen_q, seqlen_k, gluon_backward.BLOCK_M,
                              gluon_backward.BLOCK_N, dev)
    q = torch.randn(seqlen_q, HQ, D, device=dev, dtype=torch.bfloat16)
    k, v = (torch.randn(seqlen_k, HKV, D, device=dev, dtype=torch.bfloat16) for _ in range(2))
    dout = torch.randn_like(q)
    scale = D ** -0.5
    out, lse, _ = gluon_forward.launch_fwd(q, k, v, fplan, scale)
    res = {}
    fwd_feats = (fplan.num_tile_pairs, fplan.num_tile_pairs - fplan.full_pairs, fplan.num_q_tiles)
    bwd_feats = (bplan.num_tile_pairs, bplan.num_tile_pairs - bplan.full_pairs, bplan.num_k_tiles)
    if "fa4" in backends:  # the library's FA4 path (native varlen / groups, else block-sparse)
        plan = flex_attn_plan(list(slices), seqlen_q=seqlen_q, seqlen_k=seqlen_k)
        o4, l4 = flex_flash_attn_fwd(q, k, v, plan, backend="fa4")
        res["fa4", "default", "fwd"] = (time_cuda_ms(
            lambda: flex_flash_attn_fwd(q, k, v, plan, backend="fa4"), warmup, repeat), *fwd_feats)
        res["fa4", "default", "bwd"] = (time_cuda_ms(
            lambda: flex_flash_attn_bwd(dout, q, k, v, o4, l4, plan, backend="fa4"), warmup,
            repeat), *bwd_feats)
    if "triton" not in backends:
        return res
    for order in ("heavy_first", "natural"):
        fp = fplan if order == "heavy_first" else _natural(fplan, "q_tile_order")
        bp = bplan if order == "heavy_first" else _natural(bplan, "k_tile_order")
        fwd_ms = time_cuda_ms(lambda: gluon_forward.launch_fwd(q, k, v, fp, scale), warmup, repeat)
        bwd_ms = time_cuda_ms(lambda: gluon_backward.launch_bwd(dout, q, k, v, out, lse, bp, scale),
                              warmup, repeat)
        res["triton", order, "fwd"] = (fwd_ms, *fwd_feats)
        res["triton", order, "bwd"] = (bwd_ms, *bwd_feats)
    return res


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--masks", nargs="+", default=list(HYBRID_MASKS))
    p.add_argument("--seqlen-per-gpu", type=int, default=16384)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--backends", nargs="+", default=["triton"], choices=["triton", "fa4"])
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "rank_mask_probe.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        runs = []
        for name in args.masks:
            masks = [("magi", r, *m) for r, m in enumerate(magi_ranks_slices(name, args.seqlen_per_gpu))]
            masks += [("hybrid_cp", r, *m)
                      for r, m in enumerate(hybrid_ranks_slices(name, args.seqlen_per_gpu))]
            runs.append((name, masks))
        if args.synthetic:
            n = args.seqlen_per_gpu
            runs += [(f"{t}_docs_{d}", [("synthetic", 0, equal_docs(d, n, t), n, n)])
                     for t in ("causal", "full") for d in DOC_LENS]
        for name, masks in runs:
            for strategy, rank, slices, sq, sk in masks:
                if not len(slices):
                    continue
                for (backend, order, d), (ms, pairs, partial, tiles) in probe(
                        slices, sq, sk, args.warmup, args.repeat, args.backends).items():
                    row = dict(mask=name, strategy=strategy, rank=rank, backend=backend, order=order,
                               direction=d, ms=f"{ms:.4f}", pairs=pairs, partial=partial,
                               tiles=tiles, us_per_pair=f"{1000 * ms / pairs:.3f}")
                    w.writerow(row)
                    f.flush()  # every row kept if the call is cut
                    print(row, flush=True)


if __name__ == "__main__":
    main()
