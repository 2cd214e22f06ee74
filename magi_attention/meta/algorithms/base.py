"""The dispatch problem: put chunks (each with a load) into equal-count buckets, minimising the
heaviest bucket. One algorithm per file; each returns a fresh solution (no out-arguments)."""
from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DispatchSolution:
    """``buckets[r]``: sorted chunk ids of bucket r; every bucket holds the same number of chunks."""

    buckets: tuple[tuple[int, ...], ...]

    def bucket_areas(self, areas: np.ndarray) -> np.ndarray:
        return np.array([int(areas[list(b)].sum()) for b in self.buckets], dtype=np.int64)

    def owner(self, num_chunks: int) -> np.ndarray:
        """Bucket of each chunk, int64 [num_chunks]."""
        out = np.full(num_chunks, -1, dtype=np.int64)
        for r, b in enumerate(self.buckets):
            out[list(b)] = r
        return out


class DispatchAlgorithm(abc.ABC):
    """``solve(areas, num_buckets)``: areas int [num_chunks], num_chunks % num_buckets == 0."""

    name: str

    def solve(self, areas: np.ndarray, num_buckets: int) -> DispatchSolution:
        areas = np.asarray(areas, dtype=np.int64)
        if num_buckets <= 0 or len(areas) % num_buckets:
            raise ValueError(f"num_chunks={len(areas)} must be a positive multiple of "
                             f"num_buckets={num_buckets}")
        buckets = self._solve(areas, num_buckets, len(areas) // num_buckets)
        assert sorted(c for b in buckets for c in b) == list(range(len(areas)))
        return DispatchSolution(tuple(tuple(sorted(int(c) for c in b)) for b in buckets))

    @abc.abstractmethod
    def _solve(self, areas: np.ndarray, num_buckets: int, per_bucket: int) -> list[list[int]]:
        """Chunk ids of each bucket, exactly ``per_bucket`` each."""
