"""Per rank at cp 2: the tiles the Triton (Gluon) kernels visit on MagiAttention's fused mask and
on HybridCP's placement of the same documents, and on magi_unequal's (the unequal_runs
dispatch; CPU only; notes/magi_cp.md "Session 25").

    python scripts/magi_rank_tiles.py [--seqlen-per-gpu 16384] [--masks causal_document ...]

Forward: 128 x 128 tile pairs and the q tiles that have any (each q tile pays loading Q and
writing O once); backward: 64-row x 128-key pairs, the key tiles (one program per key tile and
KV head) and the longest key tile's q tiles. HybridCP is shown for the document masks, whose
documents it runs alone; a document spread over both ranks (sub-group of 2) is left out of its
rows and counted in the last column.
"""
from __future__ import annotations

import argparse

import numpy as np

from bench.config import DataConfig, MaskChoice
from bench.cp.hybrid_cp import place_documents
from bench.cp.magi import default_chunk_size
from bench.sweep import cell_mask
from magi_attention.common import SliceArray
from magi_attention.kernels.block_sparse import plan_block_sparse
from magi_attention.meta import AttnShape, OverlapConfig, solve_magi_meta

FWD_TILE, BWD_TILE = (128, 128), (64, 128)  # gluon_forward / gluon_backward BLOCK_M x BLOCK_N
HYBRID_MASKS = ("full_document", "causal_document", "block_causal_document")
UNEQUAL_CHUNK = 32  # configs/cp/magi_unequal.yaml


def tile_counts(slices, seqlen_q: int, seqlen_k: int) -> dict[str, int]:
    fwd = plan_block_sparse(slices, seqlen_q, seqlen_k, *FWD_TILE)
    bwd = plan_block_sparse(slices, seqlen_q, seqlen_k, *BWD_TILE)
    q_per_k = np.diff(bwd.k_tile_ptr.numpy())
    return {"rows": seqlen_q, "fwd_pairs": fwd.num_tile_pairs,
            "fwd_q_tiles": int((np.diff(fwd.q_tile_ptr.numpy()) > 0).sum()),
            "bwd_pairs": bwd.num_tile_pairs, "bwd_partial": bwd.num_tile_pairs - bwd.full_pairs,
            "bwd_k_tiles": int((q_per_k > 0).sum()), "bwd_longest_k_tile": int(q_per_k.max())}


def _mask(name: str, seqlen_per_gpu: int, cp_size: int):
    seqlen = seqlen_per_gpu * cp_size
    return cell_mask(MaskChoice(name, name), seqlen, DataConfig(), 8), seqlen


def magi_ranks_slices(name: str, seqlen_per_gpu: int, cp_size: int = 2,
                      algorithm: str = "auto", kernel: str = "triton"):
    """[(slices, seqlen_q, seqlen_k)] per rank: the fused mask (else the host stage's) as the
    benchmark's magi builds it for ``kernel`` ("unequal_runs": magi_unequal's, on its chunks;
    its ranks hold unequal row counts)."""
    mask, seqlen = _mask(name, seqlen_per_gpu, cp_size)
    chunk = (UNEQUAL_CHUNK if algorithm == "unequal_runs"
             else default_chunk_size(seqlen, cp_size))
    out = []
    for rank in range(cp_size):
        meta = solve_magi_meta(mask.slices, seqlen, cp_size, chunk, rank, AttnShape(64, 8, 128),
                               algorithm, OverlapConfig(), kernel=kernel)
        stage = meta.runtime.fused or meta.runtime.host
        out.append((stage.slices.to_slices(), stage.seqlen_q, stage.seqlen_k))
    return out


def hybrid_ranks_slices(name: str, seqlen_per_gpu: int, cp_size: int = 2):
    """[(slices, rows, rows)] per rank: the documents HybridCP runs alone on it (its own
    placement, ``place_documents``), packed (empty where the mask is not one of HYBRID_MASKS)."""
    if name not in HYBRID_MASKS:
        return []
    mask, _ = _mask(name, seqlen_per_gpu, cp_size)
    docs, per_doc, sizes, blocks = place_documents(mask, cp_size)
    out = []
    for rank in range(cp_size):
        slices, start = [], 0
        for doc, doc_slices, g, b in zip(docs, per_doc, sizes, blocks):
            if g == 1 and b == rank:
                shift = start - doc.start
                slices += SliceArray.from_slices(doc_slices).shift(shift, shift).to_slices()
                start += doc.seqlen
        out.append((slices, start, start))
    return out


def spread_docs(name: str, seqlen_per_gpu: int, cp_size: int = 2) -> int:
    """Documents HybridCP spreads over more than one rank (left out of its rows above)."""
    mask, _ = _mask(name, seqlen_per_gpu, cp_size)
    return sum(g > 1 for g in place_documents(mask, cp_size)[2])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seqlen-per-gpu", type=int, default=16384)
    p.add_argument("--masks", nargs="+",
                   default=["causal_document", "full_document", "block_causal_document"])
    args = p.parse_args(argv)
    cp_size = 2
    print("| mask | strategy | rank | rows | fwd pairs | fwd q tiles | bwd pairs | bwd partial "
          "| bwd key tiles | longest key tile (q tiles) | docs over both ranks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.masks:
        rows = [("magi", r, m, "-")
                for r, m in enumerate(magi_ranks_slices(name, args.seqlen_per_gpu, cp_size))]
        rows += [("magi_unequal", r, m, "-") for r, m in enumerate(
            magi_ranks_slices(name, args.seqlen_per_gpu, cp_size, "unequal_runs"))]
        spread = str(spread_docs(name, args.seqlen_per_gpu, cp_size))
        rows += [("hybrid_cp", r, m, spread)
                 for r, m in enumerate(hybrid_ranks_slices(name, args.seqlen_per_gpu, cp_size))]
        for strategy, rank, (slices, seqlen_q, seqlen_k), note in rows:
            c = tile_counts(slices, seqlen_q, seqlen_k) if slices else {}
            cells = [str(c.get(k, 0)) for k in ("rows", "fwd_pairs", "fwd_q_tiles", "bwd_pairs",
                                                "bwd_partial", "bwd_k_tiles",
                                                "bwd_longest_k_tile")]
            print(f"| {name} | {strategy} | {rank} | " + " | ".join(cells) + f" | {note} |")


if __name__ == "__main__":
    main()
