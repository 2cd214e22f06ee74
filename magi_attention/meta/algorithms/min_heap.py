"""Greedy min-heap dispatch: chunks by decreasing area, each into the lightest bucket with room."""
from __future__ import annotations

import numpy as np

from ._greedy import greedy_fill
from .base import DispatchAlgorithm


class MinHeapDispatch(DispatchAlgorithm):
    """Best balance of the three; chunks scatter, so remote KV comes in many short ranges."""

    name = "min_heap"

    def _solve(self, areas: np.ndarray, num_buckets: int, per_bucket: int) -> list[list[int]]:
        return greedy_fill(areas, num_buckets, per_bucket)
