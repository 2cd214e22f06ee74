"""Sequential dispatch: bucket r takes the contiguous chunks [r * n, (r + 1) * n)."""
from __future__ import annotations

import numpy as np

from .base import DispatchAlgorithm


class SequentialDispatch(DispatchAlgorithm):
    """Least communication (one contiguous run per rank), no balancing: causal masks skew."""

    name = "sequential"

    def _solve(self, areas: np.ndarray, num_buckets: int, per_bucket: int) -> list[list[int]]:
        return [list(range(r * per_bucket, (r + 1) * per_bucket)) for r in range(num_buckets)]
