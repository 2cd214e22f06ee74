"""AttnSlice mask -> FA4's block-sparse description plus the bit tables its mask_mod reads.

FA4 (flash_attn.cute) takes, per query tile, the key tiles that are *full* (computed without a
mask) and the ones that are *partial* (computed with ``mask_mod``), as padded index lists
``[batch, heads, num_tiles, width]`` plus counts ``[batch, heads, num_tiles]``; the backward takes
the transpose (per key tile, its query tiles). Both come from
``magi_attention.kernels.block_sparse`` (the planner the Triton backend uses too), at FA4's tile
sizes.

The mask_mod must say, for any (q, k) of a partial tile, whether the cell is in the slice union.
It reads two tables built here:

- ``tile_map: [num_q_tiles, num_k_tiles]`` int32 (each side padded to >= 2): index of the
  partial tile, -1 elsewhere;
- ``tile_bits: [num_partial * block_m * block_n / 32]`` int32: row-major bitmaps of the
  partial tiles, bit ``k % 32`` of word ``(t * block_m + q % block_m) * block_n / 32 +
  (k % block_n) / 32``.

That is O(1) per cell (two loads) whatever the number of slices or of key intervals per row, and
exact: bits come from the merged key intervals of every row. Rows and columns past the sequence
ends have no bits, so padded rows of the last tile read zeros; full tiles never read the table.
Memory is ``block_m * block_n / 8`` bytes per partial tile (2 KiB at 128 x 128).

Everything here is numpy/torch on the host (no FA4 import), so CPU tests check it exactly.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from ..cache import LRUCache
from ..block_sparse import (BITS_PER_WORD, int32_words, mask_intervals, partial_pairs,
                            partial_tile_bitmaps, plan_for)
from ..plan import FlexAttnPlan
from ._native import NativeForm, NativeGroup, native_form, native_groups

# Conversions kept per process (each holds a few MB at 64k): a training loop reuses a handful.
CONVERSION_CACHE_SIZE = 32


@dataclass(frozen=True)
class Fa4BlockSparse:
    """FA4 block-sparse tensors of one mask at tiles ``block_m x block_n`` (all int32).

    fwd_*: per query tile ``[1, 1, num_q_tiles(, width)]``; bwd_*: per key tile
    ``[1, 1, num_k_tiles(, width)]``. Index lists are ascending (FA4 walks them backwards);
    padding past each count is 0 and never read.
    """

    seqlen_q: int
    seqlen_k: int
    block_m: int
    block_n: int
    area: int
    fwd_full_cnt: torch.Tensor
    fwd_full_idx: torch.Tensor
    fwd_mask_cnt: torch.Tensor
    fwd_mask_idx: torch.Tensor
    bwd_full_cnt: torch.Tensor
    bwd_full_idx: torch.Tensor
    bwd_mask_cnt: torch.Tensor
    bwd_mask_idx: torch.Tensor
    tile_map: torch.Tensor
    tile_bits: torch.Tensor
    native: NativeForm | None = None  # set when FA4's dense/varlen/window kernels express the mask
    # else, where blocks of rows are each native on their key span: one native call per block
    groups: tuple[NativeGroup, ...] | None = None

    @property
    def num_partial(self) -> int:
        return int(self.fwd_mask_cnt.sum())

    def to(self, device) -> "Fa4BlockSparse":
        return Fa4BlockSparse(**{f.name: (v.to(device) if isinstance(v, torch.Tensor) else v)
                                 for f in fields(self) for v in (getattr(self, f.name),)})


def _padded_lists(ptr: np.ndarray, idx: np.ndarray, num_full: np.ndarray):
    """CSR (full entries first per owner) -> (full_cnt, full_idx, mask_cnt, mask_idx) padded."""
    n = len(ptr) - 1
    total = np.diff(ptr)
    mask_cnt = total - num_full
    owner = np.repeat(np.arange(n), total)
    pos = np.arange(len(idx)) - ptr[:-1][owner]
    is_full = pos < num_full[owner]
    full_idx = np.zeros((n, max(1, int(num_full.max(initial=0)))), dtype=np.int32)
    mask_idx = np.zeros((n, max(1, int(mask_cnt.max(initial=0)))), dtype=np.int32)
    full_idx[owner[is_full], pos[is_full]] = idx[is_full]
    mask_idx[owner[~is_full], (pos - num_full[owner])[~is_full]] = idx[~is_full]
    as_t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.int32))  # noqa: E731
    return (as_t(num_full)[None, None], as_t(full_idx)[None, None],
            as_t(mask_cnt)[None, None], as_t(mask_idx)[None, None])


def _intervals(mask: FlexAttnPlan):
    return mask_intervals(mask)


def native_of(mask: FlexAttnPlan) -> NativeForm | None:
    """The mask's FA4 native form (or None), kept in the plan; cheaper than the conversion."""
    return mask.cached("fa4_native", lambda: native_form(*_intervals(mask), mask.seqlen_q,
                                                         mask.seqlen_k))


def path_cost_terms(mask: FlexAttnPlan, block_m: int, block_n: int) -> tuple[int, bool, int]:
    """(area, native, partial tiles) of the mask on the FA4 backend (native: one form or native
    groups) without building its tables
    (bitmaps): what a cost model comparing dispatches needs; partial tiles 0 when native."""
    if native_of(mask) is not None or native_groups_of(mask) is not None:
        _, lo, hi = _intervals(mask)
        return int((hi - lo).sum()), True, 0
    plan = plan_for(mask, block_m, block_n)
    part_qt, _ = partial_pairs(plan)
    return plan.area, False, len(part_qt)


def _build(mask: FlexAttnPlan, block_m: int, block_n: int) -> Fa4BlockSparse:
    seqlen_q, seqlen_k = mask.seqlen_q, mask.seqlen_k
    plan = plan_for(mask, block_m, block_n)
    i64 = lambda t: t.cpu().numpy().astype(np.int64)  # noqa: E731
    fwd = _padded_lists(i64(plan.q_tile_ptr), i64(plan.q_tile_kt), i64(plan.q_tile_num_full))
    bwd = _padded_lists(i64(plan.k_tile_ptr), i64(plan.k_tile_qt), i64(plan.k_tile_num_full))
    part_qt, part_kt = partial_pairs(plan)
    # at least 2 x 2: FA4 lays aux tensors out by their unique stride-1 dimension, which a
    # [n, 1] or [1, 1] table (one key tile, i.e. seqlen_k <= block_n) does not have; the
    # padding is -1 and never read (the mask_mod only sees cells of real tiles)
    tile_map = np.full((max(plan.num_q_tiles, 2), max(plan.num_k_tiles, 2)), -1, dtype=np.int32)
    tile_map[part_qt, part_kt] = np.arange(len(part_qt), dtype=np.int32)
    bits = partial_tile_bitmaps(plan, _intervals(mask), part_qt, part_kt)
    # never empty: FA4 converts every aux tensor, and a zero-size one has no valid layout
    tile_bits = int32_words(bits) if len(part_qt) else torch.zeros(4, dtype=torch.int32)
    return Fa4BlockSparse(seqlen_q, seqlen_k, block_m, block_n, plan.area, *fwd, *bwd,
                          torch.from_numpy(tile_map), tile_bits, native_of(mask),
                          native_groups_of(mask))


_CONVERSIONS = LRUCache(CONVERSION_CACHE_SIZE)


def fa4_block_sparse(mask: FlexAttnPlan, block_m: int, block_n: int, device=None
                     ) -> Fa4BlockSparse:
    """FA4 block-sparse tensors and mask tables of a FlexAttnPlan at ``block_m x block_n`` on
    ``device`` (None: CPU), built on first use and kept in the plan. Plans of the same mask
    share one conversion (an LRU keyed by the slice bounds, seqlens, tiles and device)."""
    if block_n % BITS_PER_WORD:
        raise ValueError(f"block_n must be a multiple of {BITS_PER_WORD}, got {block_n}")
    dev = None if device is None else str(torch.device(device))

    def build() -> Fa4BlockSparse:
        conv = _build(mask, block_m, block_n)
        return conv if device is None else conv.to(device)

    def shared() -> Fa4BlockSparse:
        key = (mask.bounds.tobytes(), mask.seqlen_q, mask.seqlen_k, block_m, block_n, dev)
        return _CONVERSIONS.get_or_build(key, build)

    return mask.cached(("fa4_block_sparse", block_m, block_n, dev), shared)


def to_fa4_block_sparse(q_ranges: torch.Tensor, k_ranges: torch.Tensor, attn_type_map: torch.Tensor,
                        seqlen_q: int, seqlen_k: int, block_m: int, block_n: int,
                        device=None) -> Fa4BlockSparse:
    """``fa4_block_sparse`` of the mask given as FFA range tensors (int32 [n, 2], [n, 2], [n];
    read to the host here: tests and one-off use)."""
    mask = FlexAttnPlan.from_tensors(q_ranges, k_ranges, attn_type_map, seqlen_q, seqlen_k)
    return fa4_block_sparse(mask, block_m, block_n, device)


def clear_conversion_cache() -> None:
    _CONVERSIONS.clear()


def dense_from_block_sparse(conv: Fa4BlockSparse) -> torch.Tensor:
    """bool [seqlen_q, seqlen_k]: full tiles all True, partial tiles from their bitmaps (tests)."""
    bm, bn = conv.block_m, conv.block_n
    nqt, nkt = conv.fwd_full_cnt.shape[-1], conv.bwd_full_cnt.shape[-1]
    dense = torch.zeros(nqt * bm, nkt * bn, dtype=torch.bool)
    full_cnt, full_idx = conv.fwd_full_cnt[0, 0].cpu(), conv.fwd_full_idx[0, 0].cpu()
    for qt in range(nqt):
        for kt in full_idx[qt, : int(full_cnt[qt])].tolist():
            dense[qt * bm:(qt + 1) * bm, kt * bn:(kt + 1) * bn] = True
    words = conv.tile_bits.cpu().to(torch.int64)[:conv.num_partial * bm * bn // BITS_PER_WORD]
    words = words.reshape(-1, bm, bn // BITS_PER_WORD)
    shifts = torch.arange(BITS_PER_WORD, dtype=torch.int64)
    cells = ((words[..., None] >> shifts) & 1).bool().reshape(-1, bm, bn)
    tile_map = conv.tile_map.cpu()
    for qt, kt in (tile_map >= 0).nonzero().tolist():
        dense[qt * bm:(qt + 1) * bm, kt * bn:(kt + 1) * bn] = cells[int(tile_map[qt, kt])]
    return dense[:conv.seqlen_q, :conv.seqlen_k]


def native_groups_of(mask: FlexAttnPlan) -> tuple[NativeGroup, ...] | None:
    """Blocks of rows FA4 runs natively one call each (``_native.native_groups``) when the mask
    has no single native form, else None; kept in the plan."""
    def build():
        if native_of(mask) is not None:
            return None
        return native_groups(*_intervals(mask), mask.seqlen_q, mask.seqlen_k)
    return mask.cached("fa4_native_groups", build)
