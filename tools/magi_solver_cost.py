"""Wall time of building a MagiAttention key's meta (dispatch + comm meta) on one rank.

    python tools/magi_solver_cost.py [--seqlen 1048576] [--cp-size 64] [--chunk-size 2048]

No process group: the solve is what every rank runs before its first collective (the whole
group's transfer table plus this rank's stage slices), timed for rank 0 and the slowest rank.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from bench.data import sample_doc_lens
from bench.masks import build_mask
from magi_attention.meta import AttnShape, OverlapConfig, SliceArray, solve_magi_meta


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seqlen", type=int, default=1 << 20)
    p.add_argument("--cp-size", type=int, default=64)
    p.add_argument("--chunk-size", type=int, default=2048)
    p.add_argument("--masks", nargs="+", default=["block_causal_document", "causal", "full",
                                                   "causal_document"])
    p.add_argument("--algorithms", nargs="+", default=["min_heap", "sorted_sequential"])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    shape = AttnShape(num_heads_q=64, num_heads_kv=8, head_dim=128)
    doc_lens = sample_doc_lens(args.seqlen, seed=0)
    print(f"S={args.seqlen} cp_size={args.cp_size} chunk_size={args.chunk_size} "
          f"num_docs={len(doc_lens)}")
    print(f"{'mask':24s} {'algorithm':18s} {'slices':>7s} {'stages':>6s} {'build_s (rank 0)':>16s} "
          f"{'build_s (max rank)':>18s} {'imbalance':>9s}")
    for name in args.masks:
        mask = build_mask(name, args.seqlen, doc_lens=doc_lens, seed=0)
        slices = SliceArray.from_slices(mask.slices)
        for alg in args.algorithms:
            times, meta = [], None
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                meta = solve_magi_meta(slices, args.seqlen, args.cp_size, args.chunk_size, 0, shape,
                                       alg, OverlapConfig())
                times.append(time.perf_counter() - t0)
            worst = _slowest_rank_s(slices, args, shape, alg, meta.dispatch)
            print(f"{name:24s} {alg:18s} {len(slices):7d} {meta.runtime.num_stages:6d} "
                  f"{min(times):16.3f} {worst:18.3f} {meta.dispatch.imbalance():9.4f}")


def _slowest_rank_s(slices, args, shape, alg, dispatch) -> float:
    """Build time of the rank with the most chunks of heavy area (a sample of 4 ranks)."""
    areas = dispatch.bucket_areas()
    ranks = sorted(set(np.argsort(areas)[-2:].tolist() + [args.cp_size // 2, args.cp_size - 1]))
    worst = 0.0
    for r in ranks:
        t0 = time.perf_counter()
        solve_magi_meta(slices, args.seqlen, args.cp_size, args.chunk_size, r, shape, alg)
        worst = max(worst, time.perf_counter() - t0)
    return worst


if __name__ == "__main__":
    main()
