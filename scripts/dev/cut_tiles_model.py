"""How much of the visited cells a tiling keeps, grid against cut at the slices (session 67):
the Gluon forward's plans (128 x 128) of the bench's kernel masks, with the bench's sampled
documents, and FA4's varlen tiling for the document masks (its tiles start at each document).

    python scripts/dev/cut_tiles_model.py [--seqlens 16384 65536]

Prints per mask: visited pairs, q tiles and kept / visited cells for the grid plan and the cut
one, and which pick_plan takes."""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.data import sample_doc_lens  # noqa: E402
from bench.masks import build_mask  # noqa: E402
from magi_attention.kernels.block_sparse import cuts_off_grid, plan_for  # noqa: E402
from magi_attention.kernels.plan import FlexAttnPlan  # noqa: E402
from magi_attention.kernels.triton import gluon_forward as gf  # noqa: E402

MASKS = ("full", "causal", "full_document", "causal_document", "block_causal_document",
         "sliding_window_causal")


def fa4_varlen_pairs(mask_name: str, doc_lens, block: int = 128) -> int | None:
    """Tile pairs of FA4's varlen call on a document mask (full or causal per document)."""
    tiles = [-(-n // block) for n in doc_lens]
    if mask_name == "full_document":
        return sum(t * t for t in tiles)
    if mask_name == "causal_document":
        return sum(t * (t + 1) // 2 for t in tiles)
    return None


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seqlens", type=int, nargs="+", default=[16384, 65536])
    args = p.parse_args()
    bm, bn = gf.BLOCK_M, gf.BLOCK_N
    for s in args.seqlens:
        for name in MASKS:
            docs = None if name in ("full", "causal") else sample_doc_lens(s, seed=0)
            mask = FlexAttnPlan.from_slices(list(build_mask(name, s, doc_lens=docs).slices), s, s)
            grid = plan_for(mask, bm, bn)
            cut = plan_for(mask, bm, bn, cut_at_slices=True) if cuts_off_grid(mask, bm, bn) else None
            kept = lambda plan: grid.area / (plan.num_tile_pairs * bm * bn)  # noqa: E731
            row = f"{s:6d} {name:22s} grid {grid.num_tile_pairs:6d} pairs {grid.num_q_tiles:4d} " \
                  f"q tiles kept {kept(grid):.3f}"
            if cut is not None:
                row += f" | cut {cut.num_tile_pairs:6d} pairs {cut.num_q_tiles:4d} q tiles " \
                       f"kept {kept(cut):.3f}"
            fa4 = fa4_varlen_pairs(name, docs) if docs is not None else None
            if fa4 is not None:
                row += f" | fa4 varlen kept {grid.area / (fa4 * bm * bn):.3f}"
            row += f" -> {'cut' if gf.pick_plan(grid, cut) is cut else 'grid'}"
            print(row)


if __name__ == "__main__":
    main()
