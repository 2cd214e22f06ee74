"""Unequal runs: token counts free, each rank one run of the sequence (at cp 2 also the window /
outside pair), cut where the slowest rank is fastest. Opt-in: the rest of a layer (MLP, norms)
then runs on unequal shards.

Every other algorithm gives each rank S / cp tokens. When one document's attention outweighs a
rank's share of the rest (the bench's 16k document masks at cp 2: an 8192-token document holds
59% of causal_document's area), equal shards force it to be cut, and the rank holding its tail
receives its head's keys (~28 MB at cp 2). Megatron's HybridCP instead places whole documents
with unequal token counts and communicates nothing (8192 and 24576 tokens there). This dispatch
takes the same freedom and keeps MagiAttention's cut: a rank's cost is the tile model of
``dispatch_choice`` over its rows, each slice's rows tiled from their own start as FA4's varlen
runs them (0.68 us per 128 x 128 key tile a q tile visits, 2.2 us per q tile, so a short
document costs a whole q tile), plus its received keys at the cast's rate (exposed: the fused
stage waits for them). Cut points lie on chunk boundaries.

- any cp: one contiguous run per rank, in order (the linear partition: binary search on the
  slowest rank's cost, each rank's run grown as far as the bound allows);
- cp 2 also: rank 0 a window ``[a, b)``, rank 1 the two outer runs (balanced_runs' shape with
  free lengths), searched over every pair of cut points, so one heavy document in the middle
  of the sequence can sit alone on a rank, as HybridCP places it.

``max_share`` bounds a rank's tokens at that many times S / cp (default 2.0).
"""
from __future__ import annotations

import numpy as np

from ...common.slice_array import UNBOUNDED
from .base import DispatchAlgorithm, DispatchSolution

TILE = 128
# ns, the FA4 forward's fit on an H200 (64 q heads, head_dim 128; dispatch_choice's
# FA4_US_PER_TILE and FA4_US_PER_Q_TILE); a received token (k and v, 8 heads x 128 x bf16 =
# 4 KB) at the 28 MB / 130 us NCCL measured for the cast at cp 2
NS_PER_TILE, NS_PER_Q_TILE, NS_PER_RECV_TOKEN = 680, 2200, 19
# FA4 (``for_kernel("fa4")``): a rank whose rows meet one slice is one entry (its keys, own and
# received, one segment of the fused buffer), run by FA4's dense kernel instead of its varlen
# one: this much of the time per tile; other kernels have one path (factor 1). Fit on CP ranks
# (2 x H200, FA4 forward, 16k a GPU):
# the 8192-token causal document alone (dense) <= 1.54 ms against 1.72 ms with 32 + 96 tokens
# of its neighbours (varlen), 0.90; full, 0.72 us a tile on the 8192-token document alone
# against 0.83 on 7456 of its rows and a 1376-token document, 0.86. The kernel alone on one
# document shows less of it,
# 0.93-0.95 forward at 8k-16k (0.995 on causal 16k): the rest of the ranks' gap is not the path
# alone. Placed with 0.88, full_document 16k ran 1.01x / 1.06x HybridCP.
DENSE_TILE_FACTOR = 0.88
# cp 2's window search evaluates every pair of cut points against every slice: at most
# WINDOW_BUDGET (pairs x slices, ~0.5 s of numpy on the host) and MAX_WINDOW_POINTS points (a
# document mask of 31 slices: ~570 points; hash_sparse at 32k, 13082 slices: ~27)
MAX_WINDOW_POINTS, MIN_WINDOW_POINTS, WINDOW_BUDGET = 1024, 16, 10_000_000


class UnequalRunsDispatch(DispatchAlgorithm):
    name = "unequal_runs"
    equal_counts = False

    def __init__(self, max_share: float = 2.0, dense_factor: float = 1.0) -> None:
        if max_share < 1.0:
            raise ValueError(f"max_share must be >= 1.0 (a rank's tokens over S / cp), "
                             f"got {max_share}")
        if not 0.0 < dense_factor <= 1.0:
            raise ValueError(f"dense_factor must be in (0, 1], got {dense_factor}")
        self.max_share, self.dense_factor = max_share, dense_factor

    @classmethod
    def for_kernel(cls, kernel: str | None) -> "UnequalRunsDispatch":
        """The dispatch whose tile model knows ``kernel``'s paths (FA4's dense kernel)."""
        return cls(dense_factor=DENSE_TILE_FACTOR if kernel == "fa4" else 1.0)

    def solve_for_mask(self, slices, total_seqlen: int, chunk_size: int, areas: np.ndarray,
                       num_buckets: int) -> DispatchSolution:
        cost = RowCost(slices, self.dense_factor)
        n = total_seqlen // chunk_size
        self._check_counts(n, num_buckets)
        max_len = self._max_len(n, num_buckets)
        ends = _partition(cost, chunk_size, n, num_buckets, max_len)
        buckets = _runs(ends)
        if num_buckets == 2:
            best = max(cost.run(0, ends[0] * chunk_size), cost.run(ends[0] * chunk_size,
                                                                   total_seqlen))
            bounds = np.concatenate([slices.q_start, slices.q_end])
            window = _window(cost, chunk_size, n, max_len, best, bounds)
            if window is not None:
                a, b = window
                buckets = [list(range(a, b)), list(range(a)) + list(range(b, n))]
        return self._solution(buckets, n)

    def _solve_unequal(self, areas: np.ndarray, num_buckets: int) -> list[list[int]]:
        """Without the mask (``solve(areas)``): the linear partition of the chunk areas."""
        prefix = np.concatenate([[0], np.cumsum(areas)])
        return _runs(_partition(lambda s, e: prefix[e] - prefix[s], 1, len(areas), num_buckets,
                                self._max_len(len(areas), num_buckets)))

    def _max_len(self, num_chunks: int, num_buckets: int) -> int:
        """The most chunks a rank may hold: ``max_share`` x the equal share."""
        return max(1, int(self.max_share * num_chunks / num_buckets))


def _runs(ends: list[int]) -> list[list[int]]:
    """Chunk ids of the contiguous runs ending (exclusive) at ``ends``."""
    return [list(range(s, e)) for s, e in zip([0] + ends[:-1], ends)]


class RowCost:
    """The tile model's ns for a rank holding rows [s, e) (``run``), or [0, a) and [b, S)
    (``outer``): every slice's rows there as one varlen entry each, plus the keys they read
    outside the rank's rows, received. ``s``, ``e``, ``a``, ``b`` may be arrays (of one shape):
    the costs of many candidates at once. ``dense_factor``: the tile time of a rank whose rows
    meet one slice (one entry: FA4's dense kernel), relative to several."""

    def __init__(self, slices, dense_factor: float = 1.0) -> None:
        self.dense_factor = dense_factor
        # by q start, so that the slices with rows in [s, e) are one stretch (``_meeting``)
        order = np.argsort(slices.q_start, kind="stable")
        self.q0, self.q1 = slices.q_start[order], slices.q_end[order]
        self.k0, self.k1 = slices.k_start[order], slices.k_end[order]
        self.upper = slices.upper_offset[order]  # row q keeps keys <= q + upper (UNBOUNDED: none)
        self.causal = self.upper < UNBOUNDED  # bottom-right diagonal: CAUSAL, BICAUSAL
        # the last row + 1 of any slice up to each one: those before the first reaching past s
        # have no row from s on
        self.reach = np.maximum.accumulate(self.q1) if len(self.q1) else self.q1

    def __call__(self, s, e):
        return self.run(s, e)

    def run(self, s, e):
        s, e = _col(s), _col(e)
        m = self._meeting(s, e)
        lo, hi, keys = self._piece(s, e, m)
        recv = keys - _overlap(self.k0[m], self.k0[m] + keys, s, e)
        return self._dense(self._tiles_ns(lo, hi, keys, m), hi > lo) \
            + _total(NS_PER_RECV_TOKEN * recv)

    def outer(self, a, b, total: int):
        a, b = _col(a), _col(b)
        tiles = recv = entries = 0
        m = slice(None)  # the two runs hold rows at both ends of the sequence
        for s, e in ((np.zeros_like(a), a), (b, np.full_like(b, total))):
            lo, hi, keys = self._piece(s, e, m)
            tiles = tiles + self._tiles_ns(lo, hi, keys, m)
            entries = entries + (hi > lo)
            recv = recv + _overlap(self.k0, self.k0 + keys, a, b)  # keys the window holds
        return self._dense(tiles, entries) + _total(NS_PER_RECV_TOKEN * recv)

    def _meeting(self, s, e) -> slice:
        """The stretch of slices (by q start) that may have rows in [min s, max e): the others
        have none there and cost nothing, so a run over a few of many slices (block-sparse
        masks: 10^5 of them at 64k) prices those alone."""
        first = int(np.searchsorted(self.reach, np.min(s), side="right"))
        return slice(first, max(first, int(np.searchsorted(self.q0, np.max(e), side="left"))))

    def _dense(self, tile_ns, entries):
        """The summed tile time of each candidate, times dense_factor where one slice has rows."""
        count = np.asarray(entries).sum(axis=-1)
        factor = np.where(count == 1, self.dense_factor, 1.0)
        return _total(tile_ns) * (factor if count.ndim else float(factor))

    def _piece(self, s, e, m: slice):
        """Each slice's (of ``m``) rows inside [s, e) and the keys its last such row reads
        (from k0)."""
        lo, hi = np.maximum(self.q0[m], s), np.minimum(self.q1[m], e)
        hi = np.maximum(hi, lo)
        k0 = self.k0[m]
        keys = np.clip(hi + self.upper[m] - k0, 0, self.k1[m] - k0)  # row hi - 1's keys
        return lo, hi, np.where(hi > lo, keys, 0)

    def _tiles_ns(self, lo, hi, keys, m: slice):
        rows = hi - lo
        q_tiles = -(-rows // TILE)
        key_tiles = -(-keys // TILE)
        # causal entry, shift = keys - rows: q tile t visits t + 1 + ceil(shift / 128) key tiles,
        # the last one ceil(keys / 128)
        shift_tiles = -(-np.maximum(keys - rows, 0) // TILE)
        tri = (q_tiles - 1) * q_tiles // 2 + (q_tiles - 1) * shift_tiles + key_tiles
        tiles = np.where(self.causal[m], np.where(q_tiles > 0, tri, 0), q_tiles * key_tiles)
        return np.where(keys > 0, tiles * NS_PER_TILE, 0) + q_tiles * NS_PER_Q_TILE


def _col(x):
    """Scalars stay scalars; an array of candidates becomes a column against the slices."""
    x = np.asarray(x, dtype=np.int64)
    return x if x.ndim == 0 else x[..., None]


def _total(ns):
    out = np.asarray(ns, dtype=np.float64).sum(axis=-1)
    return float(out) if out.ndim == 0 else out


def _overlap(lo, hi, s: int, e: int) -> np.ndarray:
    return np.maximum(0, np.minimum(hi, e) - np.maximum(lo, s))


def _partition(cost, unit: int, n: int, num_runs: int, max_len: int) -> list[int]:
    """End chunk of each of ``num_runs`` non-empty runs in order, each at most ``max_len``
    chunks, minimising the costliest (``cost(s, e)`` of rows [s * unit, e * unit), growing with
    e): the least bound whose greedy fill covers every chunk, found by bisection on the costs
    of the candidate runs."""
    if num_runs * max_len < n:
        raise ValueError(f"{n} chunks do not fit {num_runs} runs of at most {max_len}")

    def fill(bound: float) -> list[int] | None:
        start, ends = 0, []
        while start < n:
            if len(ends) == num_runs:
                return None
            lo, hi = start + 1, min(n, start + max_len)  # the longest run within the bound
            if cost(start * unit, lo * unit) > bound:
                return None
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if cost(start * unit, mid * unit) <= bound:
                    lo = mid
                else:
                    hi = mid - 1
            ends.append(lo)
            start = lo
        return ends

    lo, hi = 0.0, float(cost(0, n * unit))
    for _ in range(48):  # relative precision ~1e-14 of the whole cost
        mid = (lo + hi) / 2
        if fill(mid) is None:
            lo = mid
        else:
            hi = mid
    ends = fill(hi)
    if ends is None:  # max_len binds harder than the cost: equal runs
        ends = [min(n, (i + 1) * -(-n // num_runs)) for i in range(num_runs)]
    while len(ends) < num_runs:  # fewer runs than ranks: halve the longest (none gets costlier)
        starts = [0] + ends[:-1]
        i = int(np.argmax([e - s for s, e in zip(starts, ends)]))
        ends.insert(i, (starts[i] + ends[i]) // 2)
    return ends


def _window(cost: RowCost, unit: int, n: int, max_len: int, beat: float,
            slice_bounds: np.ndarray):
    """cp 2: the (a, b) chunk pair whose window [a, b) (rank 0) and outside (rank 1) have the
    lowest costlier side, if below ``beat``. Cut points: every ``step``-th chunk boundary and,
    for masks of few slices, the chunk boundaries around each slice's rows (where a document
    can be kept whole); fewer points the more slices there are (``WINDOW_BUDGET``)."""
    budget = int(np.sqrt(2 * WINDOW_BUDGET / max(1, len(cost.q0))))
    max_points = min(MAX_WINDOW_POINTS, max(MIN_WINDOW_POINTS, budget))
    step = max(1, -(-n // max_points))
    points = set(range(0, n + 1, step)) | {n}
    if len(slice_bounds) <= max_points // 2:
        points |= set((slice_bounds // unit).tolist()) | set((-(-slice_bounds // unit)).tolist())
    points = np.array(sorted(p for p in points if 0 <= p <= n), dtype=np.int64)
    total = n * unit
    best, pair = beat, None
    for a in points[:-1]:
        b = points[points > a]
        b = b[(b - a <= max_len) & (n - (b - a) <= max_len) & ~((a == 0) & (b == n))]
        if not len(b):
            continue
        starts, ends = np.full_like(b, a) * unit, b * unit
        side = np.maximum(cost.run(starts, ends), cost.outer(starts, ends, total))
        i = int(np.argmin(side))
        if side[i] < best:
            best, pair = float(side[i]), (int(a), int(b[i]))
    return pair
