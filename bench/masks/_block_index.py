"""Block-sparse index (FA4 / FlexAttention style): which key blocks of each query block are
entirely kept (full) and which partly (need the mask_mod), from slice geometry, never S x S.

The per-tile cell counts come from ``magi_attention.kernels.block_sparse.tile_areas``, the same
code that schedules the Triton and FA4 backends. Only the classification differs from its
``BlockSparsePlan``: there a tile is full only when it is a complete ``block_m x block_n`` tile
(the kernels skip bounds checks on full tiles); here a short tile at the sequence end is full when
all of its cells are kept, as FlexAttention's BlockMask and FA4 bound-check every tile anyway
(``padded_full`` gives create_block_mask's classification instead: such a tile is partial).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from magi_attention.common import SliceArray
from magi_attention.kernels.block_sparse import tile_areas

from ._rows import iter_row_chunks


@dataclass(frozen=True)
class BlockSparseIndex:
    """Per (KV head, query block) the key blocks to visit, padded like FlexAttention's BlockMask.

    Shapes, with H = mask heads, nq = ceil(S / block_q), nk = ceil(S / block_k):
        full_block_cnt: [H, nq] int32, key blocks entirely kept (no mask_mod needed).
        full_block_idx: [H, nq, nk] int32, the first full_block_cnt entries are those blocks in
            ascending order; the remaining entries are the other blocks (never to be read).
        mask_block_cnt, mask_block_idx: the same for partly kept blocks (need the mask_mod).
    Blocks at the end of the sequence may be shorter than block_q / block_k.
    """

    seqlen: int
    block_q: int
    block_k: int
    full_block_cnt: torch.Tensor
    full_block_idx: torch.Tensor
    mask_block_cnt: torch.Tensor
    mask_block_idx: torch.Tensor

    @property
    def num_q_blocks(self) -> int:
        return self.full_block_cnt.shape[-1]

    @property
    def num_k_blocks(self) -> int:
        return self.full_block_idx.shape[-1]


def tile_coverage(arr: SliceArray, seqlen: int, block_q: int, block_k: int) -> np.ndarray:
    """Kept cells of each (query block, key block) tile, ``[nq, nk]`` int64, exactly.

    ``kernels.block_sparse.tile_areas`` over the union's row intervals, fed in chunks of whole
    query blocks so the intervals of a 1M-row mask are never all held at once.
    """
    chunk = max(1, 8192 // block_q) * block_q
    # tile_areas reads only the intervals when they are given, not the slice bounds
    parts = [tile_areas(None, end - start, seqlen, block_q, block_k,
                        intervals=(rows - start, lo, hi))
             for start, end, (rows, lo, hi) in iter_row_chunks(arr, seqlen, chunk)]
    return np.concatenate(parts, axis=0)


def _pack(selected: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """[..., nk] bool -> (count [...], indices [..., nk]) with the selected blocks first, ascending."""
    order = np.argsort(~selected, axis=-1, kind="stable")
    return (torch.from_numpy(selected.sum(-1).astype(np.int32)),
            torch.from_numpy(order.astype(np.int32)))


def block_sparse_index(heads: Sequence[SliceArray], seqlen: int, block_q: int, block_k: int,
                       device="cpu", padded_full: bool = False) -> BlockSparseIndex:
    """``padded_full``: a tile is full only when all ``block_q x block_k`` cells are kept, the
    padding past S counting as not kept (create_block_mask's rule: short edge tiles partial)."""
    covered = np.stack([tile_coverage(h, seqlen, block_q, block_k) for h in heads])
    q_sizes = np.diff(np.minimum(np.arange(covered.shape[1] + 1) * block_q, seqlen))
    k_sizes = np.diff(np.minimum(np.arange(covered.shape[2] + 1) * block_k, seqlen))
    tile_area = block_q * block_k if padded_full else q_sizes[:, None] * k_sizes[None, :]
    full_cnt, full_idx = _pack(covered == tile_area)
    mask_cnt, mask_idx = _pack((covered > 0) & (covered != tile_area))
    return BlockSparseIndex(seqlen, block_q, block_k, full_cnt.to(device), full_idx.to(device),
                            mask_cnt.to(device), mask_idx.to(device))
