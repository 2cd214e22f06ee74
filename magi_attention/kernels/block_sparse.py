"""Block-sparse schedule of an AttnSlice mask: which (q tile, key tile) pairs a kernel visits.

A tile pair is *empty* (no cell of the slice union in it: skipped), *full* (every cell in the
union: computed without a mask) or *partial* (computed with the OR of the conditions of the
slices that touch its q tile, or its key tile in the transposed view). Slices may overlap in q and
in k; a cell covered twice counts once, so a kernel that iterates the union's tiles and ORs the
slice conditions merges overlapping q_ranges exactly, without atomics.

The plan is computed from slice geometry in numpy: every slice contributes one key interval per
query row, intervals of a row are merged into the union, and each merged interval adds its length
to the tiles it crosses. Cost is O(sum of slice row counts + tiles), never O(S^2).

Layout of a plan (all int32 torch tensors, CSR):

- ``q_tile_ptr [nqt + 1]``, ``q_tile_kt [nnz]``, ``q_tile_num_full [nqt]``: key tiles of each q tile,
  its full tiles first (ascending), then its partial ones (ascending).
- ``k_tile_ptr [nkt + 1]``, ``k_tile_qt [nnz]``, ``k_tile_num_full [nkt]``: the transpose, for the
  dk/dv kernel.
- ``q_tile_slice_ptr``, ``q_tile_slice_idx``: slices whose rectangle meets each q tile's rows;
  ``k_tile_slice_ptr``, ``k_tile_slice_idx``: slices whose rectangle meets each key tile's columns.
- ``slice_bounds [n, 6]``: per slice ``(q_start, q_end, k_start, k_end, lower, upper)`` with a cell
  kept iff it is in the rectangle and ``q + lower <= k <= q + upper`` (unbounded sides get
  +-``UNBOUNDED_OFFSET``): the one place where AttnMaskType becomes kernel arithmetic.
- ``q_tile_order [nqt]``: q tiles by decreasing work (launch the heaviest first: shorter tail).
- ``k_tile_order [nkt]``: the same for key tiles.
- ``row_lo, row_hi [seqlen_q, R]``: the union's kept keys of each query row as R disjoint
  intervals ``[lo, hi)`` (padded with empty ones), R = ``max_row_intervals``; stored only when
  R <= ``MAX_TABLE_INTERVALS`` (else ``[seqlen_q, 0]``). A partial tile is then masked with 2R
  compares per cell and no scalar loads, which keeps the kernels' partial-tile loops pipelined.

A tile is full only when it lies entirely inside ``seqlen_q x seqlen_k``, so kernels never bound-
check full tiles; edge tiles are partial and the slice conditions already exclude cells past the
sequence ends.

Tiles sit on a grid of ``block_m x block_n`` by default. A plan *cut at the slices*
(``cut_at_slices``, for the Gluon forward) starts a q tile at every slice's q bound and a key tile
at every slice's k bound, then every block_m (block_n) within, as FlashAttention's varlen tiles
start at each document: a document's tiles then hold no rows or keys of its neighbours, so fewer
pairs are visited. Such tiles may be shorter than a block:

- ``q_starts [nqt + 1]``, ``k_starts [nkt + 1]``: each tile's first row (key), then the seqlen (on
  the grid: ``i * block``, clipped);
- ``q_tile_klo [nnz]``, ``q_tile_khi [nnz]``: the first key and the end of each listed key tile
  (q_tile_kt's order);
- ``q_slot_rows [nqt * block_m]`` (cut plans; empty on the grid): the row of slot r of q tile t at
  ``t * block_m + r``, -1 past the tile's end (per-row values laid out by tile, e.g. the
  backward's lse, padded so that the next tile's rows read as empty);
- ``slot_row_lo, slot_row_hi [nqt * block_m, R]`` and ``row_slots [seqlen_q]`` (cut plans; empty
  on the grid): the row table laid out by slot as q_slot_rows does (empty intervals past a tile's
  end), and each row's slot, so that a kernel can address a short tile's rows from
  ``t * block_m`` alone (the Gluon backward's dQ rows and partial-tile masks);
- in a cut plan a pair is full when every cell of its q tile's own rows is in the union and its key
  tile is block_n wide; the rows past a short q tile (the next tile's) are computed, not stored.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Sequence

import numpy as np
import torch

from ..common.slice import AttnSlice
from ..common.slice_array import SliceArray
from .cache import LRUCache
from .plan import UNBOUNDED_OFFSET, FlexAttnPlan  # noqa: F401  (re-exported)

# Plans kept per process; a training loop reuses one or two masks, a sweep a few dozen.
PLAN_CACHE_SIZE = 64
# Default for the most intervals per row kept as a table; masks with more (fine block-sparse)
# use the slice list. An argument of every planner (tests force the slice-list path with -1).
MAX_TABLE_INTERVALS = 8
# bits a word of the partial tiles' bitmaps (partial_tile_bitmaps)
BITS_PER_WORD = 32


@dataclass(frozen=True)
class BlockSparsePlan:
    seqlen_q: int
    seqlen_k: int
    block_m: int
    block_n: int
    num_q_tiles: int
    num_k_tiles: int
    q_tile_ptr: torch.Tensor
    q_tile_kt: torch.Tensor
    q_tile_num_full: torch.Tensor
    k_tile_ptr: torch.Tensor
    k_tile_qt: torch.Tensor
    k_tile_num_full: torch.Tensor
    q_tile_slice_ptr: torch.Tensor
    q_tile_slice_idx: torch.Tensor
    k_tile_slice_ptr: torch.Tensor
    k_tile_slice_idx: torch.Tensor
    slice_bounds: torch.Tensor
    q_tile_order: torch.Tensor
    k_tile_order: torch.Tensor
    row_lo: torch.Tensor
    row_hi: torch.Tensor
    max_row_intervals: int
    q_starts: torch.Tensor
    k_starts: torch.Tensor
    q_tile_klo: torch.Tensor
    q_tile_khi: torch.Tensor
    q_slot_rows: torch.Tensor
    slot_row_lo: torch.Tensor
    slot_row_hi: torch.Tensor
    row_slots: torch.Tensor
    area: int  # exact number of cells in the union
    full_pairs: int  # tile pairs without a masked cell, counted at build time (no device sync)
    # std / mean of the key tiles' q-tile list lengths, at build time (0: equal lists)
    k_list_cv: float = 0.0
    cut_at_slices: bool = False  # tiles start at the slices' bounds (module doc)

    @property
    def num_tile_pairs(self) -> int:
        return int(self.q_tile_kt.numel())

    @property
    def num_full_pairs(self) -> int:
        return self.full_pairs

    def to(self, device) -> "BlockSparsePlan":
        moved = {f.name: (getattr(self, f.name).to(device)
                          if isinstance(getattr(self, f.name), torch.Tensor) else getattr(self, f.name))
                 for f in fields(self)}
        return BlockSparsePlan(**moved)

    def tile_pairs(self) -> dict[tuple[int, int], bool]:
        """{(q tile, key tile): is_full} for every visited pair (tests, small plans)."""
        ptr, kt, nfull = (t.cpu().numpy() for t in (self.q_tile_ptr, self.q_tile_kt, self.q_tile_num_full))
        out = {}
        for i in range(self.num_q_tiles):
            for pos in range(ptr[i], ptr[i + 1]):
                out[(i, int(kt[pos]))] = bool(pos - ptr[i] < nfull[i])
        return out


def slice_bounds_array(slices: Sequence[AttnSlice]) -> np.ndarray:
    """[n, 6] int64: (q_start, q_end, k_start, k_end, lower, upper) per slice (see module doc)."""
    return FlexAttnPlan.bounds_of(SliceArray.from_slices(list(slices)))


def union_row_intervals(bounds: np.ndarray, seqlen_k: int):
    """Merged kept-key intervals of every query row: (row, lo, hi) arrays, disjoint per row."""
    qs, qe = bounds[:, 0], bounds[:, 1]
    counts = np.maximum(qe - qs, 0)
    total = int(counts.sum())
    if total == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    which = np.repeat(np.arange(len(bounds)), counts)
    first = np.cumsum(counts) - counts
    row = qs[which] + (np.arange(total) - first[which])
    lo = np.maximum(bounds[which, 2], row + bounds[which, 4])
    hi = np.minimum(bounds[which, 3], row + bounds[which, 5] + 1)
    keep = hi > lo
    row, lo, hi = row[keep], lo[keep], hi[keep]
    # one key line per row: offsets make a single sort + running max merge every row at once
    width = seqlen_k + 1
    start = row * width + lo
    end = row * width + hi
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    new = np.ones(start.shape, dtype=bool)
    new[1:] = start[1:] > reach[:-1]
    heads = np.flatnonzero(new)
    seg_start = start[heads]
    seg_end = np.maximum.reduceat(end, heads)
    seg_row = seg_start // width
    return seg_row, seg_start - seg_row * width, seg_end - seg_row * width


def mask_intervals(mask: FlexAttnPlan):
    """union_row_intervals of a FlexAttnPlan's mask, built once and kept in the plan."""
    return mask.cached("union_row_intervals",
                       lambda: union_row_intervals(mask.bounds, mask.seqlen_k))


def partial_pairs(plan: BlockSparsePlan) -> tuple[np.ndarray, np.ndarray]:
    """(q tile, key tile) of every partial pair, sorted by q tile then key tile."""
    ptr, kt, nfull = (t.cpu().numpy().astype(np.int64)
                      for t in (plan.q_tile_ptr, plan.q_tile_kt, plan.q_tile_num_full))
    owner = np.repeat(np.arange(plan.num_q_tiles), np.diff(ptr))
    partial = (np.arange(len(kt)) - ptr[:-1][owner]) >= nfull[owner]
    return owner[partial], kt[partial]


def partial_tile_bitmaps(plan: BlockSparsePlan, intervals, part_qt: np.ndarray,
                         part_kt: np.ndarray) -> np.ndarray:
    """[pairs, block_m, block_n / 32] int64 bitmaps of the partial pairs (sorted by q tile, then
    key tile, as partial_pairs gives them): bit ``k % 32`` of word ``k // 32`` of a q row is set
    when key ``k`` of the tile is in the union, from the merged key intervals (row, lo, hi) of
    each row. Rows and keys past the sequence ends have no bits."""
    bm, bn, nkt = plan.block_m, plan.block_n, plan.num_k_tiles
    words = bn // BITS_PER_WORD
    bits = np.zeros((len(part_qt), bm, words), dtype=np.int64)
    if len(part_qt) == 0:
        return bits
    row, lo, hi = intervals
    # pieces: (interval, partial tile it crosses); keys sorted since partial pairs are
    key = part_qt * nkt + part_kt
    qt = row // bm
    first = np.searchsorted(key, qt * nkt + lo // bn, side="left")
    last = np.searchsorted(key, qt * nkt + (hi - 1) // bn, side="right")
    count = last - first
    which = np.repeat(np.arange(len(row)), count)
    tile = np.repeat(first, count) + (np.arange(int(count.sum()))
                                      - np.repeat(np.cumsum(count) - count, count))
    col0 = part_kt[tile] * bn
    start = np.clip(lo[which] - col0, 0, bn)
    end = np.clip(hi[which] - col0, 0, bn)
    local_row = row[which] - qt[which] * bm
    for w in range(words):
        s = np.clip(start - w * BITS_PER_WORD, 0, BITS_PER_WORD)
        e = np.clip(end - w * BITS_PER_WORD, 0, BITS_PER_WORD)
        value = (np.left_shift(1, e, dtype=np.int64) - np.left_shift(1, s, dtype=np.int64))
        # intervals of a row are disjoint, so adding their bits is OR-ing them
        np.add.at(bits, (tile, local_row, w), value)
    return bits


def int32_words(bits: np.ndarray) -> torch.Tensor:
    """32-bit words held in int64 (0 .. 2^32 - 1) as a flat int32 tensor, bit for bit."""
    wrapped = np.where(bits >= 1 << 31, bits - (1 << 32), bits).astype(np.int32)
    return torch.from_numpy(np.ascontiguousarray(wrapped.reshape(-1)))


def grid_starts(n: int, block: int) -> np.ndarray:
    """int64 [tiles + 1]: the first index of each tile of ``block`` over [0, n), then n."""
    return np.minimum(np.arange(-(-n // block) + 1, dtype=np.int64) * block, n)


def cut_starts(cuts: np.ndarray, n: int, block: int) -> np.ndarray:
    """int64 [tiles + 1]: tiles of at most ``block`` over [0, n) that start at every cut (and
    every ``block`` after one), then n."""
    edges = np.unique(np.concatenate([[0, n], np.clip(cuts, 0, n)]).astype(np.int64))
    length = np.diff(edges)
    count = -(-length // block)
    first = np.repeat(edges[:-1], count)
    step = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    return np.append(first + step * block, n)


def cuts_off_grid(mask: FlexAttnPlan, block_m: int, block_n: int) -> bool:
    """Whether tiles cut at the mask's slices differ from the grid's (a slice bound off it)."""
    b = mask.bounds
    return not (np.array_equal(cut_starts(b[:, :2].ravel(), mask.seqlen_q, block_m),
                               grid_starts(mask.seqlen_q, block_m))
                and np.array_equal(cut_starts(b[:, 2:4].ravel(), mask.seqlen_k, block_n),
                                   grid_starts(mask.seqlen_k, block_n)))


def areas_at(intervals, q_starts: np.ndarray, k_starts: np.ndarray) -> np.ndarray:
    """[num_q_tiles, num_k_tiles] int64: cells of the merged key intervals (row, lo, hi) inside
    each pair of the tiles that start at ``q_starts`` and ``k_starts`` (each ending with its
    seqlen)."""
    nqt, nkt = len(q_starts) - 1, len(k_starts) - 1
    row, lo, hi = intervals
    qt = np.searchsorted(q_starts, row, side="right") - 1
    j_lo = np.searchsorted(k_starts, lo, side="right") - 1
    j_hi = np.searchsorted(k_starts, hi - 1, side="right") - 1
    same = j_lo == j_hi
    flat = nqt * nkt
    # edge tiles of each interval (or the whole interval when it stays inside one tile)
    area = np.bincount(qt * nkt + j_lo, weights=np.where(same, hi, k_starts[j_lo + 1]) - lo,
                       minlength=flat)
    area += np.bincount((qt * nkt + j_hi)[~same], weights=(hi - k_starts[j_hi])[~same],
                        minlength=flat)
    # tiles strictly between are covered whole: count the rows crossing each (a difference
    # array along the key-tile axis), times the tile's width
    inner = j_hi - j_lo >= 2
    diff = np.bincount((qt * (nkt + 1) + j_lo + 1)[inner], minlength=nqt * (nkt + 1))
    diff -= np.bincount((qt * (nkt + 1) + j_hi)[inner], minlength=nqt * (nkt + 1))
    crossing = np.cumsum(diff.reshape(nqt, nkt + 1), axis=1)[:, :nkt]
    return np.rint(area).astype(np.int64).reshape(nqt, nkt) + crossing * np.diff(k_starts)


def tile_areas(bounds: np.ndarray, seqlen_q: int, seqlen_k: int, block_m: int, block_n: int,
               intervals=None) -> np.ndarray:
    """[num_q_tiles, num_k_tiles] int64: cells of the slice union inside each pair of the
    ``block_m x block_n`` grid."""
    intervals = union_row_intervals(bounds, seqlen_k) if intervals is None else intervals
    return areas_at(intervals, grid_starts(seqlen_q, block_m), grid_starts(seqlen_k, block_n))


def _row_table(row: np.ndarray, lo: np.ndarray, hi: np.ndarray, seqlen_q: int,
               max_table_intervals: int):
    """Padded [seqlen_q, R] tables of each row's disjoint intervals (rows arrive sorted)."""
    count = np.bincount(row, minlength=seqlen_q)
    max_row = int(count.max()) if count.size else 0
    width = max_row if max_row <= max_table_intervals else 0
    row_lo = np.zeros((seqlen_q, width), dtype=np.int64)
    row_hi = np.zeros((seqlen_q, width), dtype=np.int64)
    if width:
        rank = np.arange(len(row)) - (np.cumsum(count) - count)[row]
        row_lo[row, rank] = lo
        row_hi[row, rank] = hi
    return row_lo, row_hi, max_row


def _csr(owner: np.ndarray, n_owners: int) -> np.ndarray:
    ptr = np.zeros(n_owners + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=n_owners), out=ptr[1:])
    return ptr


def _slice_tiles(start: np.ndarray, end: np.ndarray, starts: np.ndarray):
    """CSR (ptr, slice index) of the tiles (first indices ``starts``, then the seqlen) that each
    half-open range [start, end) meets."""
    n_tiles = len(starts) - 1
    nonempty = end > start
    first = np.where(nonempty, np.searchsorted(starts, start, side="right") - 1, 0)
    last = np.searchsorted(starts, end - 1, side="right") - 1
    count = np.where(nonempty, last - first + 1, 0)
    which = np.repeat(np.arange(len(start)), count)
    tile = first[which] + (np.arange(int(count.sum())) - (np.cumsum(count) - count)[which])
    order = np.lexsort((which, tile))
    return _csr(tile, n_tiles), which[order]


def _tile_lists(major: np.ndarray, minor: np.ndarray, full: np.ndarray, n_major: int):
    order = np.lexsort((minor, ~full, major))
    return _csr(major, n_major), minor[order], np.bincount(major[full], minlength=n_major)


def _slot_rows(starts: np.ndarray, block: int) -> np.ndarray:
    """[tiles * block]: slot r of tile t holds row starts[t] + r, or -1 past the tile's end."""
    slot = starts[:-1, None] + np.arange(block)[None, :]
    return np.where(slot < starts[1:, None], slot, -1).ravel()


def _by_slot(row_lo: np.ndarray, row_hi: np.ndarray, slot_rows: np.ndarray, seqlen_q: int):
    """(slot_row_lo, slot_row_hi, row_slots) of a cut plan (module doc): the row table at each
    slot's row, [0, 0) past a tile's end, and the slot of each row."""
    kept = slot_rows >= 0
    rows = np.maximum(slot_rows, 0)
    lo, hi = (np.where(kept[:, None], table[rows], 0) for table in (row_lo, row_hi))
    row_slots = np.zeros(seqlen_q, dtype=np.int64)
    row_slots[slot_rows[kept]] = np.nonzero(kept)[0]
    return lo, hi, row_slots


def _cv(x: np.ndarray) -> float:
    mean = float(x.mean()) if x.size else 0.0
    return float(x.std()) / mean if mean > 0 else 0.0


def _i32(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int32))


def _build(bounds: np.ndarray, seqlen_q: int, seqlen_k: int, block_m: int, block_n: int,
           max_table_intervals: int, cut_at_slices: bool = False) -> BlockSparsePlan:
    intervals = union_row_intervals(bounds, seqlen_k)
    if cut_at_slices:
        q_starts = cut_starts(bounds[:, :2].ravel(), seqlen_q, block_m)
        k_starts = cut_starts(bounds[:, 2:4].ravel(), seqlen_k, block_n)
    else:
        q_starts, k_starts = grid_starts(seqlen_q, block_m), grid_starts(seqlen_k, block_n)
    nqt, nkt = len(q_starts) - 1, len(k_starts) - 1
    area = areas_at(intervals, q_starts, k_starts)
    row_lo, row_hi, max_row = _row_table(*intervals, seqlen_q, max_table_intervals)
    qt, kt = np.nonzero(area)
    if cut_at_slices:  # a short q tile's rows past its own are the next tile's (module doc)
        full = ((area[qt, kt] == np.diff(q_starts)[qt] * block_n)
                & (np.diff(k_starts)[kt] == block_n))
    else:  # only complete in-bounds tiles can reach this
        full = area[qt, kt] == block_m * block_n
    if cut_at_slices:
        slot_rows = _slot_rows(q_starts, block_m)
        slot_lo, slot_hi, row_slots = _by_slot(row_lo, row_hi, slot_rows, seqlen_q)
    else:  # (empty on the grid: module doc)
        slot_rows = row_slots = np.zeros(0, dtype=np.int64)
        slot_lo, slot_hi = row_lo[:0], row_hi[:0]
    q_ptr, q_kt, q_full = _tile_lists(qt, kt, full, nqt)
    k_ptr, k_qt, k_full = _tile_lists(kt, qt, full, nkt)
    nonempty = (bounds[:, 1] > bounds[:, 0]) & (bounds[:, 3] > bounds[:, 2])
    qs_ptr, qs_idx = _slice_tiles(bounds[:, 0], np.where(nonempty, bounds[:, 1], bounds[:, 0]),
                                  q_starts)
    ks_ptr, ks_idx = _slice_tiles(bounds[:, 2], np.where(nonempty, bounds[:, 3], bounds[:, 2]),
                                  k_starts)
    # work per tile: masked tiles cost a bit more, but the pair count dominates
    q_work = np.diff(q_ptr) * 4 + (np.diff(q_ptr) - q_full)
    k_work = np.diff(k_ptr) * 4 + (np.diff(k_ptr) - k_full)
    return BlockSparsePlan(
        seqlen_q=seqlen_q, seqlen_k=seqlen_k, block_m=block_m, block_n=block_n,
        num_q_tiles=nqt, num_k_tiles=nkt,
        q_tile_ptr=_i32(q_ptr), q_tile_kt=_i32(q_kt), q_tile_num_full=_i32(q_full),
        k_tile_ptr=_i32(k_ptr), k_tile_qt=_i32(k_qt), k_tile_num_full=_i32(k_full),
        q_tile_slice_ptr=_i32(qs_ptr), q_tile_slice_idx=_i32(qs_idx),
        k_tile_slice_ptr=_i32(ks_ptr), k_tile_slice_idx=_i32(ks_idx),
        slice_bounds=_i32(bounds.reshape(-1, 6)),
        q_tile_order=_i32(np.argsort(-q_work, kind="stable")),
        k_tile_order=_i32(np.argsort(-k_work, kind="stable")),
        row_lo=_i32(row_lo), row_hi=_i32(row_hi), max_row_intervals=max_row,
        q_starts=_i32(q_starts), k_starts=_i32(k_starts),
        q_tile_klo=_i32(k_starts[q_kt]), q_tile_khi=_i32(k_starts[q_kt + 1]),
        q_slot_rows=_i32(slot_rows), slot_row_lo=_i32(slot_lo), slot_row_hi=_i32(slot_hi),
        row_slots=_i32(row_slots),
        area=int(area.sum()), full_pairs=int(full.sum()), k_list_cv=_cv(np.diff(k_ptr)),
        cut_at_slices=cut_at_slices,
    )


_PLANS = LRUCache(PLAN_CACHE_SIZE)


def _cached(bounds: np.ndarray, seqlen_q: int, seqlen_k: int, block_m: int, block_n: int,
            device, max_table_intervals: int = MAX_TABLE_INTERVALS,
            cut_at_slices: bool = False) -> BlockSparsePlan:
    if block_m <= 0 or block_n <= 0:
        raise ValueError(f"tile sizes must be positive, got block_m={block_m}, block_n={block_n}")
    if seqlen_q < 0 or seqlen_k < 0:
        raise ValueError(f"seqlens must be >= 0, got seqlen_q={seqlen_q}, seqlen_k={seqlen_k}")
    bounds = np.ascontiguousarray(bounds, dtype=np.int64).reshape(-1, 6)

    def build() -> BlockSparsePlan:
        plan = _build(bounds, seqlen_q, seqlen_k, block_m, block_n, max_table_intervals,
                      cut_at_slices)
        return plan if device is None else plan.to(device)

    key = (bounds.tobytes(), seqlen_q, seqlen_k, block_m, block_n, max_table_intervals,
           str(device), cut_at_slices)
    return _PLANS.get_or_build(key, build)


def plan_block_sparse(slices: Sequence[AttnSlice], seqlen_q: int, seqlen_k: int,
                      block_m: int, block_n: int, device=None,
                      max_table_intervals: int = MAX_TABLE_INTERVALS,
                      cut_at_slices: bool = False) -> BlockSparsePlan:
    """The tile schedule of the union of ``slices`` (cached; see module doc for the layout)."""
    return _cached(slice_bounds_array(slices), seqlen_q, seqlen_k, block_m, block_n, device,
                   max_table_intervals, cut_at_slices)


def plan_for(mask: FlexAttnPlan, block_m: int, block_n: int, device=None,
             max_table_intervals: int = MAX_TABLE_INTERVALS,
             cut_at_slices: bool = False) -> BlockSparsePlan:
    """The tile schedule of a FlexAttnPlan's mask at ``block_m x block_n`` on ``device`` (tiles
    cut at the slices' bounds where asked: module doc): built on first use, then kept in the
    FlexAttnPlan (a lookup per call, no host-device traffic)."""
    key = ("block_sparse", block_m, block_n, max_table_intervals,
           None if device is None else str(torch.device(device)), cut_at_slices)
    return mask.cached(key, lambda: _cached(mask.bounds, mask.seqlen_q, mask.seqlen_k, block_m,
                                            block_n, device, max_table_intervals,
                                            cut_at_slices))


def plan_from_tensors(q_ranges: torch.Tensor, k_ranges: torch.Tensor, attn_type_map: torch.Tensor,
                      seqlen_q: int, seqlen_k: int, block_m: int, block_n: int, device=None,
                      max_table_intervals: int = MAX_TABLE_INTERVALS) -> BlockSparsePlan:
    """plan_block_sparse for the (q_ranges, k_ranges, attn_type_map) tensors of the FFA API
    (reads them to the host: for tests and one-off use; kernels take a FlexAttnPlan)."""
    mask = FlexAttnPlan.from_tensors(q_ranges, k_ranges, attn_type_map, seqlen_q, seqlen_k)
    return _cached(mask.bounds, seqlen_q, seqlen_k, block_m, block_n, device, max_table_intervals)


def clear_plan_cache() -> None:
    _PLANS.clear()
