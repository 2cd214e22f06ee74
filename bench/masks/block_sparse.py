"""Block-sparse patterns: a grid of query x key blocks, each query block keeping some key blocks.

``block_sparse`` uses uniform blocks (the last one cut at S), ``var_block_sparse`` variable ones;
both are one generator over block edges. The kept table ``[num_heads, num_q_blocks,
num_k_blocks]`` comes from ``_random.draw_kept_blocks``; one mask per KV head.
"""
from __future__ import annotations

import numpy as np
import torch

from magi_attention.common import AttnMaskType, AttnRange, AttnSlice

from .basic import _named


def uniform_edges(seqlen: int, block: int) -> np.ndarray:
    """``[0, block, 2 block, ..., seqlen]``: ceil(seqlen / block) blocks."""
    return np.append(np.arange(0, seqlen, block, dtype=np.int64), seqlen)


def block_sparse_head(q_edges: np.ndarray, k_edges: np.ndarray, kept: np.ndarray
                      ) -> list[AttnSlice]:
    """One head: each run of consecutive kept key blocks of a query block is one FULL slice.

    kept: ``[num_q_blocks, num_k_blocks]`` bool.
    """
    padded = np.zeros((kept.shape[0], kept.shape[1] + 2), dtype=np.int8)
    padded[:, 1:-1] = kept
    step = np.diff(padded, axis=1)  # +1 where a run starts, -1 one past where it ends
    q_block, run_start = np.nonzero(step == 1)
    _, run_end = np.nonzero(step == -1)  # row-major order pairs each end with its start
    q_ranges = _shared_ranges(q_edges[q_block], q_edges[q_block + 1])
    k_ranges = _shared_ranges(k_edges[run_start], k_edges[run_end])
    full = AttnMaskType.FULL
    return [AttnSlice(q, k, full) for q, k in zip(q_ranges, k_ranges)]


def _shared_ranges(starts: np.ndarray, ends: np.ndarray) -> list[AttnRange]:
    """``AttnRange(starts[i], ends[i])`` for each i, one object per distinct range.

    A block grid's slices reuse few distinct ranges (~2e5 slices share ~1e3 query blocks and
    ~1e4 key runs at S = 64k), and building an AttnRange per slice was half the build time.
    """
    stride = int(ends.max(initial=0)) + 1
    codes, inverse = np.unique(starts * stride + ends, return_inverse=True)
    distinct = [AttnRange(int(a), int(b)) for a, b in zip(*np.divmod(codes, stride))]
    return [distinct[i] for i in inverse.tolist()]


def block_sparse(q_edges: np.ndarray, k_edges: np.ndarray, kept: np.ndarray
                 ) -> list[list[AttnSlice]]:
    """kept: ``[num_heads, num_q_blocks, num_k_blocks]`` -> one slice list per head."""
    return [block_sparse_head(q_edges, k_edges, kept_h) for kept_h in kept]


def block_sparse_reference(q_edges: np.ndarray, k_edges: np.ndarray, kept: np.ndarray):
    """``(h, q_idx, k_idx) -> bool``: the kept table looked up at the blocks holding q and k."""
    kept_t = torch.as_tensor(kept)
    q_e, k_e = torch.as_tensor(q_edges), torch.as_tensor(k_edges)

    def pred(h: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        qb = torch.searchsorted(q_e.to(q.device), q, right=True) - 1
        kb = torch.searchsorted(k_e.to(k.device), k, right=True) - 1
        return kept_t.to(q.device)[h, qb, kb]
    return _named(pred, "block_sparse")
