"""What a local kernel call costs in tiles: the features the rate model prices.

A local FFA call runs one mask (an AttnSlice union in local coordinates over ``seqlen_q x
seqlen_k``) with all its q heads. Its time follows the tiles it visits, not its area: a
tile fully inside the mask runs without masking, a *partial* one (a diagonal, a document or
shard edge) pays for its masked cells too, and every q tile pays its prologue (load Q, fill the
pipeline, write O). So a call is described by (q tiles with work, full tile pairs, partial
tile pairs, area), counted exactly from the union's row intervals by the block-sparse planner
the kernels themselves use (``magi_attention.kernels.block_sparse``), at the backend's tiles:

- FA4 runs 128 x 128 tiles. Where its dense / varlen kernels express the mask (``native``:
  ``magi_attention.meta.dispatch_choice.tile_time`` answers), each document is tiled from its
  own start and partial tiles are masked arithmetically; there the tiles are counted cut at the
  slices' bounds. Elsewhere it runs the block-sparse path on the grid, masking partial tiles
  from a bitmap (dearer: the rate model prices the two paths apart).
- The Triton backend's forward (the Gluon kernel) runs 128 x 128 tiles, its backward 64-row
  steps over 128-key tiles; both take the grid's plan or the one cut at the slices, whichever
  visits fewer pairs (``gluon_forward.pick_plan``'s rule).

Counting visits every row once (``union_row_intervals``) and the tile pairs of the rows in
blocks, so a 2M-token mask costs seconds and no dense [tiles x tiles] matrix of it at once.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
import numpy as np

from magi_attention.common.slice_array import SliceArray
from magi_attention.kernels.block_sparse import areas_at, cut_starts, grid_starts, union_row_intervals
from magi_attention.kernels.plan import FlexAttnPlan
from magi_attention.meta.dispatch_choice import tile_time
from magi_attention.meta.runtime_meta import StageAttnArgs

__all__ = ["TileCounts", "BACKEND_TILES", "tile_counts", "mask_key"]

# (block_m, block_n) of each backend and direction (module doc)
BACKEND_TILES = {("fa4", "fwd"): (128, 128), ("fa4", "bwd"): (128, 128),
                 ("triton", "fwd"): (128, 128), ("triton", "bwd"): (64, 128)}
# the Gluon kernels' choice between the grid and the cut plan: pairs + this many per q tile
ITEM_PAIRS = 2.0
# q tiles counted per block of rows: bounds the [q tiles x key tiles] matrix of one block
Q_TILES_PER_BLOCK = 256


@dataclass(frozen=True)
class TileCounts:
    """One call's tiles at its backend's tile shape. ``native``: FA4's arithmetic-mask path
    (always False on Triton). ``partial_intervals``: the partial pairs, each weighed by the
    most key intervals a row of its q tile keeps (the Triton kernels mask a partial tile
    interval by interval; FA4's bitmap costs the same whatever the intervals)."""

    area: int
    q_tiles: int
    full: int
    partial: int
    native: bool = False
    partial_intervals: int = 0

    @property
    def pairs(self) -> int:
        return self.full + self.partial


def mask_key(slices: SliceArray, seqlen_q: int, seqlen_k: int) -> str:
    """A digest of a local mask (its slices and sizes): the cache key of its counts."""
    h = hashlib.sha1(np.array([seqlen_q, seqlen_k], dtype=np.int64).tobytes())
    for column in (slices.q_start, slices.q_end, slices.k_start, slices.k_end, slices.mask_type):
        h.update(np.ascontiguousarray(column, dtype=np.int64).tobytes())
    return h.hexdigest()


def tile_counts(slices: SliceArray, seqlen_q: int, seqlen_k: int, backend: str,
                direction: str) -> TileCounts:
    """The TileCounts of one call of ``backend`` ("fa4" or "triton") in ``direction``."""
    if (backend, direction) not in BACKEND_TILES:
        raise ValueError(f"backend must be 'fa4' or 'triton' and direction 'fwd' or 'bwd', "
                         f"got {backend!r}, {direction!r}")
    # FA4's two directions share their tiles, hence their counts
    key = (mask_key(slices, seqlen_q, seqlen_k), backend, BACKEND_TILES[backend, direction])
    if key not in _COUNTS:
        if len(_COUNTS) >= CACHE_SIZE:
            _COUNTS.clear()
        _COUNTS[key] = _counts(slices, seqlen_q, seqlen_k, backend, direction)
    return _COUNTS[key]


# counts by (mask digest, backend, direction): ring steps of a full or causal mask repeat one
# mask on every rank, and a sweep repeats the cells of every strategy
CACHE_SIZE = 1 << 16
_COUNTS: dict[tuple, TileCounts] = {}


def _counts(slices: SliceArray, seqlen_q: int, seqlen_k: int, backend: str, direction: str
            ) -> TileCounts:
    bounds = FlexAttnPlan.bounds_of(slices)
    intervals = union_row_intervals(bounds, seqlen_k)
    area = int((intervals[2] - intervals[1]).sum())
    if area == 0:
        return TileCounts(0, 0, 0, 0)
    per_row = np.bincount(intervals[0], minlength=seqlen_q)
    block_m, block_n = BACKEND_TILES[backend, direction]
    grid = (grid_starts(seqlen_q, block_m), grid_starts(seqlen_k, block_n))
    cut = (cut_starts(bounds[:, :2].ravel(), seqlen_q, block_m),
           cut_starts(bounds[:, 2:4].ravel(), seqlen_k, block_n))
    if backend == "fa4":
        native = tile_time(StageAttnArgs(slices, seqlen_q, seqlen_k), "fa4") is not None
        counts = _count(intervals, per_row, *(cut if native else grid), block_m, block_n,
                        native)
        return TileCounts(area, *counts[:3], native, counts[3])
    on_grid = _count(intervals, per_row, *grid, block_m, block_n, False)
    same = all(len(a) == len(b) and np.array_equal(a, b) for a, b in zip(grid, cut))
    on_cut = on_grid if same else _count(intervals, per_row, *cut, block_m, block_n, True)
    cost = lambda c: c[1] + c[2] + ITEM_PAIRS * c[0]  # noqa: E731
    counts = on_cut if cost(on_cut) < cost(on_grid) else on_grid
    return TileCounts(area, *counts[:3], False, counts[3])


def _count(intervals, per_row: np.ndarray, q_starts: np.ndarray, k_starts: np.ndarray,
           block_m: int, block_n: int, cut: bool) -> tuple[int, int, int, int]:
    """(q tiles with work, full pairs, partial pairs, partial pairs weighed by their q tile's
    most intervals a row) of the tiles starting at ``q_starts`` x ``k_starts``. Full, as the
    planner rules: on the grid a whole block_m x block_n tile inside the mask; cut at the
    slices, every row of a (maybe shorter) q tile keeping every key of a block_n-wide key
    tile. ``per_row``: each row's number of key intervals.

    The cells of each visited pair are summed from the intervals crossing it where they cross
    few tiles (many short pieces: a ring step of a document mask at large cp), else on the
    dense [q tiles x key tiles] grid a block of q tiles at a time (long rows)."""
    row, lo, hi = intervals
    qt = np.searchsorted(q_starts, row, side="right") - 1
    j_lo = np.searchsorted(k_starts, lo, side="right") - 1
    j_hi = np.searchsorted(k_starts, hi - 1, side="right") - 1
    crossings = int((j_hi - j_lo + 1).sum())
    nqt, nkt = len(q_starts) - 1, len(k_starts) - 1
    if crossings < min(nqt, Q_TILES_PER_BLOCK) * nkt:
        pair_qt, pair_kt, area = _sparse_areas(qt, j_lo, j_hi, lo, hi, k_starts, nkt)
    else:
        pair_qt, pair_kt, area = _dense_areas(intervals, q_starts, k_starts)
    rows = np.diff(q_starts)[pair_qt] if cut else block_m
    is_full = (area == rows * block_n) & (np.diff(k_starts)[pair_kt] == block_n)
    most = np.maximum(np.maximum.reduceat(per_row, q_starts[:-1]), 1)
    partial = ~is_full
    return (len(np.unique(pair_qt)), int(is_full.sum()), int(partial.sum()),
            int(most[pair_qt[partial]].sum()))


def _sparse_areas(qt, j_lo, j_hi, lo, hi, k_starts, nkt: int):
    """(q tile, key tile, cells) of every visited pair, from each interval's crossings."""
    n = j_hi - j_lo + 1
    idx = np.repeat(np.arange(len(qt)), n)
    kt = j_lo[idx] + (np.arange(len(idx)) - np.repeat(np.cumsum(n) - n, n))
    cells = np.minimum(hi[idx], k_starts[kt + 1]) - np.maximum(lo[idx], k_starts[kt])
    keys, inverse = np.unique(qt[idx] * nkt + kt, return_inverse=True)
    area = np.bincount(inverse, weights=cells).astype(np.int64)
    return keys // nkt, keys % nkt, area


def _dense_areas(intervals, q_starts: np.ndarray, k_starts: np.ndarray):
    """As _sparse_areas, on the planner's dense grid of cells a block of q tiles at a time."""
    row, lo, hi = intervals
    out_qt, out_kt, out_area = [], [], []
    for first in range(0, len(q_starts) - 1, Q_TILES_PER_BLOCK):
        starts = q_starts[first:first + Q_TILES_PER_BLOCK + 1]
        a, b = np.searchsorted(row, [starts[0], starts[-1]])
        if a == b:
            continue
        area = areas_at((row[a:b] - starts[0], lo[a:b], hi[a:b]), starts - starts[0], k_starts)
        qt, kt = np.nonzero(area)
        out_qt.append(qt + first)
        out_kt.append(kt)
        out_area.append(area[qt, kt])
    if not out_qt:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    return np.concatenate(out_qt), np.concatenate(out_kt), np.concatenate(out_area)
