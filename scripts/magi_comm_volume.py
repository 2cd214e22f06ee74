"""KV bytes moved by MagiAttention's group_cast vs a ring that passes all KV around, per mask.

    python scripts/magi_comm_volume.py [--seqlen 131072] [--cp-size 8] [--chunk-size 1024]

Forward KV only (the backward group_reduce moves the same volume of dK/dV back, the ring the
same again). A ring moves every shard to every other rank: (cp_size - 1) * S tokens of KV.
group_cast moves only the remote key ranges that some local query row touches.
"""
from __future__ import annotations

import argparse

from bench.data import sample_doc_lens
from bench.masks import MASK_NAMES, build_mask
from magi_attention.meta import (DISPATCH_ALGORITHMS, AttnShape, OverlapConfig, SliceArray,
                                 solve_magi_meta)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seqlen", type=int, default=131072)
    p.add_argument("--cp-size", type=int, default=8)
    p.add_argument("--chunk-size", type=int, default=1024)
    p.add_argument("--num-heads-kv", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    args = p.parse_args()
    shape = AttnShape(num_heads_q=args.num_heads_kv * 4, num_heads_kv=args.num_heads_kv,
                      head_dim=args.head_dim, element_size=2)
    doc_lens = sample_doc_lens(args.seqlen, seed=0)
    ring_gb = (args.cp_size - 1) * args.seqlen * shape.kv_bytes_per_token / 1e9
    print(f"S={args.seqlen} cp_size={args.cp_size} chunk_size={args.chunk_size} "
          f"kv: {args.num_heads_kv} heads x {args.head_dim} bf16; ring sends {ring_gb:.3f} GB")
    algs = list(DISPATCH_ALGORITHMS)
    print(f"| mask | " + " | ".join(f"group_cast GB ({a})" for a in algs)
          + " | ring GB | min_heap / ring |")
    print("|---" * (len(algs) + 3) + "|")
    worst = 0.0
    for name in MASK_NAMES:
        mask = build_mask(name, args.seqlen, doc_lens=doc_lens, seed=0)
        slices = SliceArray.from_slices(mask.slices)
        gbs = []
        for alg in algs:
            meta = solve_magi_meta(slices, args.seqlen, args.cp_size, args.chunk_size, 0, shape, alg,
                                   OverlapConfig(num_stages=1))
            gbs.append(meta.table.total_tokens() * shape.kv_bytes_per_token / 1e9)
        worst = max(worst, max(gbs) / ring_gb)
        print(f"| {name} | " + " | ".join(f"{g:.3f}" for g in gbs)
              + f" | {ring_gb:.3f} | {gbs[0] / ring_gb:.3f} |")
    status = "OK" if worst <= 1.0 + 1e-12 else "FAIL"
    print(f"{status}: group_cast never sends more than the ring (largest ratio {worst:.3f})")
    if status == "FAIL":
        raise SystemExit(1)


if __name__ == "__main__":
    main()
