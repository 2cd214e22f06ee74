"""Per rank of MagiAttention's fused/staged masks: FA4-native or not, partial tiles, area, KV
received; min_heap, sequential, balanced_runs and the "auto" choice, on the CP benchmark's
document masks (CPU only).

    python scripts/magi_dispatch_native.py [--seqlen-per-gpu 16384] [--cp-sizes 2 4]

"auto" is evaluated as with the FA4 kernel (kernel="fa4"). A rank counts as native when
every mask its kernels run (the fused one, or host and each remote stage) has a native form
or native groups (one native call per block of rows).
"""
from __future__ import annotations

import argparse

from bench.config import DataConfig, MaskChoice
from bench.sweep import cell_mask
from magi_attention.kernels.fa4._convert import fa4_block_sparse
from magi_attention.meta import AttnShape, OverlapConfig, SliceArray, solve_magi_meta
from magi_attention.meta.dispatch_choice import CANDIDATES, rank_stage_masks

MASKS = ("full_document", "causal_document", "block_causal_document")


def rank_rows(slices, seqlen, cp_size, chunk, shape, algorithm):
    metas = [solve_magi_meta(slices, seqlen, cp_size, chunk, r, shape, algorithm,
                             OverlapConfig(), kernel="fa4") for r in range(cp_size)]
    areas = metas[0].dispatch.bucket_areas()
    recv = metas[0].table.tokens_received()
    rows = []
    for r, m in enumerate(metas):
        convs = [fa4_block_sparse(a.plan, 128, 128) for a in rank_stage_masks(m.runtime)]
        rows.append(dict(rank=r, native=all(c.native is not None or c.groups is not None
                                             for c in convs),
                         partial=sum(c.num_partial for c in convs), area=int(areas[r]),
                         recv=int(recv[r]), fused=m.runtime.fused is not None,
                         copies=m.runtime.fused_layout.num_copies if m.runtime.fused else 0))
    return metas[0], rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seqlen-per-gpu", type=int, default=16384)
    p.add_argument("--cp-sizes", type=int, nargs="+", default=[2, 4])
    p.add_argument("--chunk-size", type=int, default=512)
    args = p.parse_args()
    shape = AttnShape(64, 8, 128)
    print("| cp | mask | dispatch | imbalance | predicted us (min_heap / sequential / "
          "balanced_runs) | per rank: native, partial tiles, KV tokens received, fused-buffer "
          "copies | stages |")
    print("|---|---|---|---|---|---|---|")
    for cp in args.cp_sizes:
        seqlen = args.seqlen_per_gpu * cp
        for name in MASKS:
            mask = cell_mask(MaskChoice(label=name, name=name, params={}), seqlen, DataConfig(), 8)
            slices = SliceArray.from_slices(mask.slices)
            for alg in (*CANDIDATES, "auto"):
                meta, rows = rank_rows(slices, seqlen, cp, args.chunk_size, shape, alg)
                pred = meta.choice.predicted_us if meta.choice else {}
                pred_s = " / ".join(f"{pred[k]:.0f}" for k in CANDIDATES) if pred else "-"
                ranks = "; ".join(f"{'N' if x['native'] else 'bs'} {x['partial']} {x['recv']} "
                                  f"{x['copies']}" for x in rows)
                stages = "fused" if rows[0]["fused"] else f"{meta.runtime.num_stages} staged"
                label = alg if alg != "auto" else f"auto -> {meta.algorithm}"
                print(f"| {cp} | {name} | {label} | {meta.dispatch.imbalance():.3f} | {pred_s} | "
                      f"{ranks} | {stages} |", flush=True)


if __name__ == "__main__":
    main()
