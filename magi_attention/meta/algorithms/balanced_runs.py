"""Balanced runs: two contiguous runs per rank, mirrored, with the cut points chosen for balance.

The chunks are halved at the middle; rank ``cp - 1 - i`` takes the i-th run from the outside of
each half (its left run counted from the start, its right run from the end), so at cp 2 rank 1
holds the two outer runs ``[0, a)`` and ``[a + n, N)`` and rank 0 the window ``[a, a + n)``
between them. The left-run lengths minimise the heaviest rank exactly over this family: a
min-max dynamic program over (pair i, left chunks used), O(cp * N * n) on the host at key time
(at cp 2 it is the O(N) scan over ``a``). Ranks hold at most two runs in increasing global
order, so the fused KV buffer stays in global key order for a few block copies
(``fused_layout``) and a document cut between ranks is still one key segment: native for FA4,
unlike min_heap's scattered chunks, and balanced, unlike sequential's contiguous shares of
skewed document masks.

The nesting is restrictive when long documents fill whole ranks (cp 8, 16k tokens per rank,
32k documents: 1.29-1.31 max / mean on the bench masks), so the result is the better, by the
heaviest bucket, of the mirror and sorted_sequential's two equal runs per rank (1.14-1.27
there); both hold at most two runs per rank.
"""
from __future__ import annotations

import numpy as np

from .base import DispatchAlgorithm
from .sorted_sequential import SortedSequentialDispatch


# the finest chunk a cut moves by after dispatch (refine_cut, the timed re-cut): a 128-row tile
MIN_FINE_CHUNK = 128


def halving(chunk_size: int) -> int:
    """2 where the dispatch's chunks can be halved for a finer cut (even, and half a chunk
    still MIN_FINE_CHUNK rows or more), else 1: the chunks' step in the finer cut."""
    return 2 if chunk_size % 2 == 0 and chunk_size // 2 >= MIN_FINE_CHUNK else 1


class BalancedRunsDispatch(DispatchAlgorithm):
    name = "balanced_runs"

    def _solve(self, areas: np.ndarray, num_buckets: int, per_bucket: int) -> list[list[int]]:
        options = [mirror_runs(areas, num_buckets, per_bucket),
                   SortedSequentialDispatch(2)._solve(areas, num_buckets, per_bucket)]
        heaviest = [max(int(areas[b].sum()) for b in buckets) for buckets in options]
        return options[int(np.argmin(heaviest))]  # ties: the mirror


def mirror_runs(areas: np.ndarray, num_buckets: int, per_bucket: int) -> list[list[int]]:
    """The mirror layout (the module's docstring) whose heaviest rank is lightest by ``areas``
    (any non-negative weights per chunk: meta.timed_balance passes measured ones)."""
    prefix = np.concatenate([[0], np.cumsum(areas)])
    total, n = len(areas), per_bucket
    mid = total // 2
    # worst[i, lo]: the heaviest of pairs i.. when pairs < i used lo left chunks (so
    # i * n - lo right ones); take[i, lo]: the left-run length of pair i achieving it
    worst = np.full((num_buckets + 1, mid + 1), np.inf)
    worst[num_buckets, mid] = 0
    take = np.zeros((num_buckets, mid + 1), dtype=np.int64)
    for i in range(num_buckets - 1, -1, -1):
        for lo in range(mid + 1):
            hi = total - (i * n - lo)  # right chunks still free: [mid, hi)
            if not mid <= hi <= total:  # more chunks used than pairs < i hold, or too few
                continue
            left = np.arange(max(0, n - (hi - mid)), min(n, mid - lo) + 1)
            if len(left) == 0:
                continue
            area = prefix[lo + left] - prefix[lo] + prefix[hi] - prefix[hi - (n - left)]
            cost = np.maximum(area, worst[i + 1, lo + left])
            best = int(np.argmin(cost))  # ties: the shorter left run
            worst[i, lo], take[i, lo] = cost[best], left[best]
    buckets: list[list[int]] = [[] for _ in range(num_buckets)]
    lo, hi = 0, total
    for i in range(num_buckets):
        left = int(take[i, lo])
        right = n - left
        buckets[num_buckets - 1 - i] = list(range(lo, lo + left)) + list(range(hi - right, hi))
        lo, hi = lo + left, hi - right
    return buckets
