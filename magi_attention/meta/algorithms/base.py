"""The dispatch problem: put chunks (each with a load) into buckets, minimising the heaviest
bucket; equal-count buckets (every rank S / cp tokens) unless an algorithm says otherwise
(``equal_counts = False``: unequal_runs). One algorithm per file; each returns a fresh solution
(no out-arguments)."""
from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DispatchSolution:
    """``buckets[r]``: sorted chunk ids of bucket r (the same count each unless the algorithm
    that made it has ``equal_counts = False``)."""

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
    """``solve(areas, num_buckets)``: areas int [num_chunks], num_chunks % num_buckets == 0
    where ``equal_counts``."""

    name: str
    equal_counts: bool = True

    @classmethod
    def for_kernel(cls, kernel: str | None) -> "DispatchAlgorithm":
        """The algorithm for the local kernel ``kernel`` ("fa4", "triton", ...; None: unknown):
        the same for every kernel unless its cost model knows a kernel's paths."""
        return cls()

    def solve_for_mask(self, slices, total_seqlen: int, chunk_size: int, areas: np.ndarray,
                       num_buckets: int) -> DispatchSolution:
        """The solution for a mask (``solve_dispatch``): ``solve`` on the chunk areas, unless
        the algorithm weighs the mask itself (unequal_runs' tile model)."""
        return self.solve(areas, num_buckets)

    def _check_counts(self, num_chunks: int, num_buckets: int) -> None:
        if self.equal_counts and (num_buckets <= 0 or num_chunks % num_buckets):
            raise ValueError(f"num_chunks={num_chunks} must be a positive multiple of "
                             f"num_buckets={num_buckets}")
        if num_buckets <= 0 or num_chunks < num_buckets:
            raise ValueError(f"num_chunks={num_chunks} must be >= num_buckets={num_buckets} > 0")

    def _solution(self, buckets, num_chunks: int) -> DispatchSolution:
        assert sorted(c for b in buckets for c in b) == list(range(num_chunks))
        assert all(buckets), "every bucket holds at least one chunk"
        return DispatchSolution(tuple(tuple(sorted(int(c) for c in b)) for b in buckets))

    def solve(self, areas: np.ndarray, num_buckets: int) -> DispatchSolution:
        areas = np.asarray(areas, dtype=np.int64)
        self._check_counts(len(areas), num_buckets)
        if self.equal_counts:
            buckets = self._solve(areas, num_buckets, len(areas) // num_buckets)
        else:
            buckets = self._solve_unequal(areas, num_buckets)
        return self._solution(buckets, len(areas))

    def _solve(self, areas: np.ndarray, num_buckets: int, per_bucket: int) -> list[list[int]]:
        """Chunk ids of each bucket, exactly ``per_bucket`` each (equal_counts algorithms)."""
        raise NotImplementedError

    def _solve_unequal(self, areas: np.ndarray, num_buckets: int) -> list[list[int]]:
        """Chunk ids of each bucket, any non-zero count (``equal_counts = False``)."""
        raise NotImplementedError
