"""Block-sparse index (FA4 / FlexAttention style): which key blocks of each query block are
entirely kept (full) and which partly (need the mask_mod), from slice geometry, never S x S."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from magi_attention.common import SliceArray
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

    Per row, kept keys are disjoint intervals; C_row(x) = kept keys below x. A tile's count is
    the sum over its rows of C_row(right edge) - C_row(left edge). Each interval adds to C at the
    key-block edges x_e as ``clip(x_e - lo, 0, hi - lo)``, which is ``x_e - lo`` on edges inside
    the interval and ``hi - lo`` on edges past it: three histograms over (q block, edge), summed
    along e, give C at every edge without touching cells.
    """
    num_q, num_k = -(-seqlen // block_q), -(-seqlen // block_k)
    edges = np.minimum(np.arange(num_k + 1, dtype=np.int64) * block_k, seqlen)
    width = num_k + 2  # one spare column per row so range ends at num_k + 1 stay in the row
    inside_n = np.zeros(num_q * width, dtype=np.int64)
    inside_lo = np.zeros(num_q * width, dtype=np.int64)
    past_len = np.zeros(num_q * width, dtype=np.int64)
    chunk = max(1, 8192 // block_q) * block_q  # whole query blocks per chunk
    for _, _, (rows, lo, hi) in iter_row_chunks(arr, seqlen, chunk):
        base = (rows // block_q) * width
        e_in = lo // block_k + 1          # first edge strictly right of lo
        e_past = -(-hi // block_k)        # first edge at or right of hi
        ones, length = np.ones_like(lo), hi - lo
        for target, weights, start, stop in ((inside_n, ones, e_in, e_past),
                                             (inside_lo, lo, e_in, e_past),
                                             (past_len, length, e_past, num_k + 1)):
            target += _range_add(base + start, base + stop, weights, len(target))
    cum = [np.cumsum(a.reshape(num_q, width), axis=1)[:, :num_k + 1]
           for a in (inside_n, inside_lo, past_len)]
    kept_below = edges[None, :] * cum[0] - cum[1] + cum[2]  # [nq, nk + 1]: sum_rows C_row(x_e)
    return np.diff(kept_below, axis=1)


def _range_add(start: np.ndarray, stop: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """Difference array adding ``weights`` on ``[start, stop)`` (prefix-summed by the caller)."""
    return (np.bincount(start, weights=weights, minlength=size)
            - np.bincount(stop, weights=weights, minlength=size)).astype(np.int64)


def _pack(selected: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """[..., nk] bool -> (count [...], indices [..., nk]) with the selected blocks first, ascending."""
    order = np.argsort(~selected, axis=-1, kind="stable")
    return (torch.from_numpy(selected.sum(-1).astype(np.int32)),
            torch.from_numpy(order.astype(np.int32)))


def block_sparse_index(heads: Sequence[SliceArray], seqlen: int, block_q: int, block_k: int,
                       device="cpu") -> BlockSparseIndex:
    covered = np.stack([tile_coverage(h, seqlen, block_q, block_k) for h in heads])
    q_sizes = np.diff(np.minimum(np.arange(covered.shape[1] + 1) * block_q, seqlen))
    k_sizes = np.diff(np.minimum(np.arange(covered.shape[2] + 1) * block_k, seqlen))
    tile_area = q_sizes[:, None] * k_sizes[None, :]
    full_cnt, full_idx = _pack(covered == tile_area)
    mask_cnt, mask_idx = _pack((covered > 0) & (covered < tile_area))
    return BlockSparseIndex(seqlen, block_q, block_k, full_cnt.to(device), full_idx.to(device),
                            mask_cnt.to(device), mask_idx.to(device))
