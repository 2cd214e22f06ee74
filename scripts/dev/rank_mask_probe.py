"""The Gluon kernels alone on each cp rank's mask (cp 2; magi's ranks at any cp with
--cp-size): MagiAttention's fused masks (equal shards, and magi_unequal's unequal_runs placement)
against HybridCP's placement of the same documents (one GPU; notes/magi_cp.md "Session 25").

At 16k tokens per GPU, magi's Triton backward on causal_document ran 8.2 ms on rank 0 and 6.5
ms on rank 1 for about the same tile pairs; this times each rank's mask alone, forward and
backward, in the kernels' default order (heaviest tiles first) and in plain tile order, so the
cost per tile pair of each mask shape can be read off one run.

    python3 scripts/dev/rank_mask_probe.py --out $OUT [--masks causal_document full_document]

``--synthetic``: also equal documents of each length in ``--doc-lens`` packed into one rank's
seqlen, causal and full (strategy "synthetic"), so the cost per pair can be read as a function
of the document length alone; ``--tails H ...``: a document's tail rows after H head keys
(``tail_mask``); ``--kernel-masks causal:65536 ...``: bench masks whole on one GPU.
``--backends triton fa4``: FA4 through the library's path too; ``--variants``: the Gluon
launches timed (TRITON_VARIANTS: tile orders, the forward's grid, the backward's dQ probes).
Session 26's runs: results/h100x2/probes_s26/.
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

from bench.config import DataConfig, MaskChoice  # noqa: E402
from bench.sweep import cell_mask  # noqa: E402

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


# name: (direction, launch keywords, tile order: False = the plan's heaviest first, True =
# plain tile order, "docs" = each slice's key tiles together in plain order, slices heaviest
# first: session 27's backward probe); "heavy_first" / "natural" are the two orders of session
# 26's first run. Session 26 also ran
# a heads-major grid (every head of one tile, then the next tile; the kernels' option at
# c211304, removed since): fwd 1.04x, bwd 1.0-1.4x the time of the default grid
TRITON_VARIANTS = {
    "heavy_first": ("fwd", {}, False), "natural": ("fwd", {}, True),
    "fwd_persistent": ("fwd", dict(persistent=True), False),
    "fwd_per_item": ("fwd", dict(persistent=False), False),
    "bwd_heavy_first": ("bwd", {}, False), "bwd_natural": ("bwd", {}, True),
    "bwd_docs_heavy_first": ("bwd", {}, "docs"),
    "bwd_dq_none": ("bwd", dict(dq_mode=gluon_backward.DQ_NONE), False),
    "bwd_dq_no_add": ("bwd", dict(dq_mode=gluon_backward.DQ_NO_ADD), False),
    "bwd_row_tma_flip": ("bwd", dict(row_tma="flip"), False),
    # session 35: a kv head's q heads split over 1 / 2 / 4 / 8 programs a key tile (head_chunks;
    # bwd_heavy_first takes the plan's head_chunks_for)
    **{f"bwd_heads_{n}": ("bwd", dict(head_chunks=n), False) for n in (1, 2, 4, 8)},
}


def _natural(plan, field: str):
    order = getattr(plan, field)
    return dataclasses.replace(plan, **{field: torch.arange(order.numel(), dtype=order.dtype,
                                                             device=order.device)})


def _docs_heavy_first(plan, slices):
    """The backward plan with its key tiles grouped by the slice (document) whose key range
    holds each tile's first key, in plain order inside a slice, slices by decreasing work."""
    import numpy as np
    k_start = np.array([sl.k_range.start for sl in slices])
    k_end = np.array([sl.k_range.end for sl in slices])
    first = np.arange(plan.num_k_tiles) * plan.block_n
    owner = np.array([int(np.argmax((k_start <= f) & (f < k_end))) if np.any(
        (k_start <= f) & (f < k_end)) else len(slices) for f in first])
    work = np.diff(plan.k_tile_ptr.cpu().numpy())
    doc_work = np.bincount(owner, weights=work, minlength=len(slices) + 1)
    order = np.lexsort((np.arange(len(first)), -doc_work[owner]))
    k = plan.k_tile_order
    return dataclasses.replace(plan, k_tile_order=torch.as_tensor(order, dtype=k.dtype,
                                                                  device=k.device))


def equal_docs(doc_len: int, seqlen: int, mask_type: str) -> list[AttnSlice]:
    """Documents of ``doc_len`` tokens packed into ``seqlen`` (the last one cut short)."""
    return [AttnSlice.make(s, min(s + doc_len, seqlen), s, min(s + doc_len, seqlen), mask_type)
            for s in range(0, seqlen, doc_len)]


def tail_mask(rows: int, head: int) -> list[AttnSlice]:
    """``rows`` query rows that are the tail of a document whose first ``head`` keys sit
    before them (all of those rows see them: a full rectangle), then its causal part: the shape
    of a document split across two cp ranks, on the rank that holds its end."""
    tail = [AttnSlice.make(0, rows, head, head + rows, "causal")]
    return ([AttnSlice.make(0, rows, 0, head, "full")] if head else []) + tail


def probe(slices, seqlen_q: int, seqlen_k: int, warmup: int, repeat: int,
          backends=("triton",), variants=("heavy_first", "natural", "bwd_heavy_first",
                                            "bwd_natural"), warmup_ms: float = 0.0,
          heads: tuple[int, int] = (HQ, HKV)):
    """{(backend, order, direction): (ms, pairs, partial, tiles)} of one mask (pairs, partial
    and tiles counted at the Gluon kernels' tiles, for FA4 rows too), ``heads`` = (q heads,
    kv heads) of the inputs. The Triton variants run in the order given, so two runs with the
    order reversed show what the position costs."""
    dev = torch.device("cuda")
    fplan = plan_block_sparse(slices, seqlen_q, seqlen_k, gluon_forward.BLOCK_M,
                              gluon_forward.BLOCK_N, dev)
    bplan = plan_block_sparse(slices, seqlen_q, seqlen_k, gluon_backward.BLOCK_M,
                              gluon_backward.BLOCK_N, dev)
    num_heads_q, num_heads_kv = heads
    q = torch.randn(seqlen_q, num_heads_q, D, device=dev, dtype=torch.bfloat16)
    k, v = (torch.randn(seqlen_k, num_heads_kv, D, device=dev, dtype=torch.bfloat16)
            for _ in range(2))
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
    for name in variants:
        direction, kw, natural = TRITON_VARIANTS[name]
        if direction == "fwd":
            p = _natural(fplan, "q_tile_order") if natural else fplan
            fn = lambda: gluon_forward.launch_fwd(q, k, v, p, scale, **kw)  # noqa: E731
            feats = fwd_feats
        else:
            p = (_docs_heavy_first(bplan, slices) if natural == "docs"
                 else _natural(bplan, "k_tile_order") if natural else bplan)
            if kw.get("row_tma") == "flip":
                if bplan.row_lo.shape[1] != 1:
                    continue
                kw = dict(kw, row_tma=not gluon_backward.row_tma_suits(bplan))
            fn = lambda: gluon_backward.launch_bwd(dout, q, k, v, out, lse, p, scale,  # noqa: E731
                                                   **kw)
            feats = bwd_feats
        res["triton", name, direction] = (time_cuda_ms(fn, warmup, repeat, warmup_ms), *feats)
    return res


def _heads(text: str) -> tuple[int, int]:
    """--heads "HQ:HKV": positive counts, HKV dividing HQ (GQA)."""
    try:
        num_heads_q, num_heads_kv = (int(h) for h in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want q heads:kv heads, e.g. 64:8") from None
    if num_heads_q < 1 or num_heads_kv < 1 or num_heads_q % num_heads_kv:
        raise argparse.ArgumentTypeError(f"{text!r}: kv heads must divide q heads, both >= 1")
    return num_heads_q, num_heads_kv


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--masks", nargs="*", default=list(HYBRID_MASKS))
    p.add_argument("--seqlen-per-gpu", type=int, default=16384)
    p.add_argument("--cp-size", type=int, default=2,
                   help="the ranks of this cp size (magi_unequal and hybrid_cp: cp 2 only)")
    p.add_argument("--strategies", nargs="+", default=["magi", "magi_unequal", "hybrid_cp"],
                   choices=["magi", "magi_unequal", "hybrid_cp"])
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup-ms", type=float, default=0.0,
                   help="then calls for about this long before each Triton variant is timed "
                        "(the first variant otherwise meets the clocks an idle GPU left)")
    p.add_argument("--file", default="rank_mask_probe.csv", help="the rows' file under --out")
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--backends", nargs="+", default=["triton"], choices=["triton", "fa4"])
    p.add_argument("--variants", nargs="+", default=["heavy_first", "natural", "bwd_heavy_first",
                                                     "bwd_natural"],
                   choices=list(TRITON_VARIANTS))
    p.add_argument("--heads", type=_heads, default=(HQ, HKV),
                   help="q heads:kv heads of the inputs (Ulysses' rank at cp 4: 16:2)")
    p.add_argument("--doc-lens", type=int, nargs="+", default=list(DOC_LENS))
    p.add_argument("--tails", type=int, nargs="*", default=[],
                   help="tail masks (tail_mask) of seqlen-per-gpu rows after this many head keys")
    p.add_argument("--kernel-masks", nargs="*", default=[],
                   help="bench masks run whole on one GPU, as NAME:SEQLEN (e.g. causal:65536)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / args.file
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        runs = []
        n, cp, wanted = args.seqlen_per_gpu, args.cp_size, set(args.strategies)
        if cp != 2:
            wanted &= {"magi"}
        for name in args.masks:
            masks = []
            if "magi" in wanted:
                masks += [("magi", r, *m) for r, m in enumerate(magi_ranks_slices(name, n, cp))]
            if "magi_unequal" in wanted:
                masks += [("magi_unequal", r, *m) for r, m in enumerate(
                    magi_ranks_slices(name, n, algorithm="unequal_runs"))]
            if "hybrid_cp" in wanted:
                masks += [("hybrid_cp", r, *m) for r, m in enumerate(hybrid_ranks_slices(name, n))]
            runs.append((name, masks))
        if args.synthetic:
            n = args.seqlen_per_gpu
            runs += [(f"{t}_docs_{d}", [("synthetic", 0, equal_docs(d, n, t), n, n)])
                     for t in ("causal", "full") for d in args.doc_lens]
        runs += [(f"tail_{h}", [("synthetic", 0, tail_mask(args.seqlen_per_gpu, h),
                                 args.seqlen_per_gpu, args.seqlen_per_gpu + h)])
                 for h in args.tails]
        for spec in args.kernel_masks:
            name, seqlen = spec.split(":")
            mask = cell_mask(MaskChoice(name, name), int(seqlen), DataConfig(), args.heads[1])
            runs.append((f"{name}_{int(seqlen) // 1024}k",
                         [("single", 0, list(mask.slices), int(seqlen), int(seqlen))]))
        for name, masks in runs:
            for strategy, rank, slices, sq, sk in masks:
                if not len(slices):
                    continue
                for (backend, order, d), (ms, pairs, partial, tiles) in probe(
                        slices, sq, sk, args.warmup, args.repeat, args.backends,
                        args.variants, args.warmup_ms, args.heads).items():
                    row = dict(mask=name, strategy=strategy, rank=rank, backend=backend, order=order,
                               direction=d, ms=f"{ms:.4f}", pairs=pairs, partial=partial,
                               tiles=tiles, us_per_pair=f"{1000 * ms / pairs:.3f}")
                    w.writerow(row)
                    f.flush()  # every row kept if the call is cut
                    print(row, flush=True)


if __name__ == "__main__":
    main()
