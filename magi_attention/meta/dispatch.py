"""Dispatch meta: the global mask cut into q chunks of chunk_size, chunks balanced over cp ranks.

Rank r's local shard is the concatenation of its chunks in increasing global order, for q, k and
v alike (self-attention: the same permutation applies to all three). Shards hold S / cp tokens
each, except under an algorithm without ``equal_counts`` (unequal_runs), where
``shard_seqlen_of(rank)`` differs by rank. Cross-attention dispatches k and v on their own
sequence (``contiguous_dispatch``): one DispatchMeta for q, one for kv.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..common import AttnSlice
from .algorithms import DispatchAlgorithm, DispatchSolution, get_dispatch_algorithm
from .slice_array import SliceArray, chunk_areas


@dataclass(frozen=True)
class DispatchMeta:
    total_seqlen: int
    chunk_size: int
    cp_size: int
    solution: DispatchSolution
    chunk_areas: np.ndarray   # int64 [num_chunks]: load of each q chunk
    owner: np.ndarray         # int64 [num_chunks]: rank holding each chunk
    local_offset: np.ndarray  # int64 [num_chunks]: token offset of each chunk in its owner's shard

    @property
    def num_chunks(self) -> int:
        return self.total_seqlen // self.chunk_size

    @property
    def shard_seqlens(self) -> tuple[int, ...]:
        """Tokens of each rank's shard."""
        return tuple(len(b) * self.chunk_size for b in self.solution.buckets)

    @property
    def equal_shards(self) -> bool:
        return len(set(self.shard_seqlens)) == 1

    def shard_seqlen_of(self, rank: int) -> int:
        return self.shard_seqlens[rank]

    @property
    def shard_seqlen(self) -> int:
        """Tokens of every rank's shard (equal shards only: else ``shard_seqlen_of(rank)``)."""
        if not self.equal_shards:
            raise ValueError(f"shards are unequal ({self.shard_seqlens} tokens): "
                             f"use shard_seqlen_of(rank)")
        return self.total_seqlen // self.cp_size

    def chunks_of(self, rank: int) -> tuple[int, ...]:
        return self.solution.buckets[rank]

    def bucket_areas(self) -> np.ndarray:
        return self.solution.bucket_areas(self.chunk_areas)

    def imbalance(self) -> float:
        """max / mean of the bucket areas (1.0 is perfect balance)."""
        areas = self.bucket_areas()
        return float(areas.max() / areas.mean()) if areas.sum() else 1.0

    def position_ids(self, rank: int) -> np.ndarray:
        """Global token index of each local token of ``rank``: int64 [shard_seqlen_of(rank)]."""
        chunks = np.asarray(self.chunks_of(rank), dtype=np.int64)
        return (chunks[:, None] * self.chunk_size + np.arange(self.chunk_size)).reshape(-1)

    def permutation(self) -> np.ndarray:
        """Chunk ids in dispatched order (rank 0's chunks, then rank 1's, ...)."""
        return np.concatenate([np.asarray(b, dtype=np.int64) for b in self.solution.buckets])


def check_dispatch_args(total_seqlen: int, cp_size: int, chunk_size: int,
                        name: str = "total_seqlen") -> None:
    """``name``: the argument ``total_seqlen`` came from, for the message."""
    if cp_size < 1:
        raise ValueError(f"cp_size must be >= 1, got {cp_size}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if total_seqlen % (cp_size * chunk_size):
        raise ValueError(
            f"{name}={total_seqlen} must be a multiple of cp_size * chunk_size = "
            f"{cp_size} * {chunk_size} = {cp_size * chunk_size}; pad the sequence (and leave the "
            f"padding out of every slice) or pick another chunk_size")


def solve_dispatch(slices: SliceArray | Sequence[AttnSlice], total_seqlen: int, cp_size: int,
                   chunk_size: int, algorithm: str | DispatchAlgorithm = "min_heap"
                   ) -> DispatchMeta:
    """Cut the mask into q chunks, weigh each by its area, and solve the bucket assignment."""
    check_dispatch_args(total_seqlen, cp_size, chunk_size)
    if not isinstance(slices, SliceArray):
        slices = SliceArray.from_slices(slices)
    areas = chunk_areas(slices, total_seqlen, chunk_size)
    solution = get_dispatch_algorithm(algorithm).solve_for_mask(slices, total_seqlen, chunk_size,
                                                                areas, cp_size)
    return dispatch_meta(areas, total_seqlen, cp_size, chunk_size, solution)


def dispatch_meta(areas: np.ndarray, total_seqlen: int, cp_size: int, chunk_size: int,
                  solution: DispatchSolution) -> DispatchMeta:
    """The DispatchMeta of a bucket assignment of chunks weighing ``areas``."""
    owner = solution.owner(len(areas))
    local_offset = np.zeros(len(areas), dtype=np.int64)
    for bucket in solution.buckets:
        local_offset[list(bucket)] = np.arange(len(bucket)) * chunk_size
    return DispatchMeta(total_seqlen, chunk_size, cp_size, solution, areas, owner, local_offset)


def contiguous_dispatch(slices: SliceArray, total_seqlen: int, cp_size: int) -> DispatchMeta:
    """The keys' dispatch of a cross-attention key: rank r holds the one contiguous run
    ``[r * S_k / cp, (r + 1) * S_k / cp)`` (one chunk a rank; ``chunk_areas``: the cells whose
    key lies in each run).

    Where the keys sit moves no compute (a rank computes the rows of its q chunks, whichever
    rank holds their keys), only communication; and a cross-attention's q rows commonly read
    every key (a text or image context), so no placement spares a transfer there. Contiguous
    shares keep each rank's keys one run (one key segment in the fused buffer, a varlen
    document whole where it fits in one share), the same memory on every rank, and need only
    S_k to be a multiple of cp_size.
    """
    if total_seqlen < cp_size or total_seqlen % cp_size:
        raise ValueError(f"total_seqlen_k={total_seqlen} must be a positive multiple of "
                         f"cp_size={cp_size} "
                         f"(each rank holds S_k / cp_size keys); pad the keys and leave the "
                         f"padding out of every slice")
    chunk = total_seqlen // cp_size
    areas = chunk_areas(slices.transpose(), total_seqlen, chunk)  # columns as rows
    solution = DispatchSolution(tuple((r,) for r in range(cp_size)))
    return dispatch_meta(areas, total_seqlen, cp_size, chunk, solution)
