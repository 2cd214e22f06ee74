"""Sorted sequential dispatch: contiguous runs of chunks, the runs balanced greedily.

The chunk sequence is cut into runs of ``run_length`` chunks; runs are sorted by area and placed
largest first into the lightest bucket with room. A rank then holds ``per_bucket / run_length``
contiguous runs instead of scattered chunks, so the KV ranges it needs are fewer and longer
(less communication meta, larger messages) at some cost in balance. The default gives each
bucket two runs when it can, which for causal masks is the zigzag pairing.
"""
from __future__ import annotations

import numpy as np

from ._greedy import greedy_fill
from .base import DispatchAlgorithm


class SortedSequentialDispatch(DispatchAlgorithm):
    name = "sorted_sequential"

    def __init__(self, runs_per_bucket: int = 2) -> None:
        if runs_per_bucket < 1:
            raise ValueError(f"runs_per_bucket must be >= 1, got {runs_per_bucket}")
        self.runs_per_bucket = runs_per_bucket

    def _solve(self, areas: np.ndarray, num_buckets: int, per_bucket: int) -> list[list[int]]:
        runs = self.runs_per_bucket
        while per_bucket % runs:  # largest run count <= requested that divides the bucket
            runs -= 1
        run_length = per_bucket // runs
        run_areas = areas.reshape(-1, run_length).sum(axis=1)
        run_buckets = greedy_fill(run_areas, num_buckets, runs)
        return [[run * run_length + i for run in b for i in range(run_length)] for b in run_buckets]
