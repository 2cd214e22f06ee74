"""The whole MagiAttention solve for one rank: dispatch, stage count, transfer table, runtime meta."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..common import AttnSlice
from .algorithms import DispatchAlgorithm, get_dispatch_algorithm
from .attn_meta import host_runs
from .comm_meta import (RowPieces, TransferTable, build_transfer_table, merge_ranges,
                        needed_ranges, remote_ranges, row_pieces)
from .dispatch import DispatchMeta, check_dispatch_args, contiguous_dispatch, solve_dispatch
from .dispatch_choice import DispatchChoice, choose_and_solve
from .fused_split import meets
from .overlap_solver import OverlapConfig, RankCost, StagePlan, choose_stage_plan
from .fused_layout import key_tile_for
from .runtime_meta import DistAttnRuntimeMeta, build_runtime_meta
from .slice_array import SliceArray


@dataclass(frozen=True)
class AttnShape:
    """What the cost model needs of the tensors: heads, head_dim and bytes per element."""

    num_heads_q: int
    num_heads_kv: int
    head_dim: int
    element_size: int = 2

    @property
    def flops_per_cell(self) -> float:
        return 4.0 * self.num_heads_q * self.head_dim

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.num_heads_kv * self.head_dim * self.element_size


@dataclass(frozen=True)
class MagiMeta:
    """``algorithm``: the dispatch that ran (for "auto", the chosen one; ``choice`` then holds
    every candidate's prediction)."""

    dispatch: DispatchMeta
    table: TransferTable
    runtime: DistAttnRuntimeMeta
    stage_plan: StagePlan
    algorithm: str = "min_heap"
    choice: DispatchChoice | None = None
    dispatch_kv: DispatchMeta | None = None  # cross-attention: the keys' own; None: q's

    @property
    def kv_dispatch(self) -> DispatchMeta:
        """The dispatch of k and v: ``dispatch_kv``, or under self-attention q's."""
        return self.dispatch if self.dispatch_kv is None else self.dispatch_kv


@dataclass(frozen=True)
class DispatchSolve:
    """What every rank's solve of one dispatch shares: the row pieces, the stage plan and the
    transfer table; ``runtime(rank)`` is the only per-rank part."""

    dispatch: DispatchMeta
    rows: RowPieces
    stage_plan: StagePlan
    table: TransferTable
    align: int = 1  # the fused buffer's key tile grid (fused_layout.key_tile_for)
    recv_in_place: bool = False  # the cast lands in one region where it can (early_start)
    kv_dispatch: DispatchMeta | None = None  # cross-attention: the keys' own; None: q's

    def runtime(self, rank: int) -> DistAttnRuntimeMeta:
        return build_runtime_meta(self.rows, self.dispatch, self.table, rank,
                                  fused=self.stage_plan.fused, split=self.stage_plan.split,
                                  align=self.align, recv_in_place=self.recv_in_place,
                                  kv_dispatch=self.kv_dispatch)


def solve_for_dispatch(slices: SliceArray, dispatch: DispatchMeta, shape: AttnShape,
                       overlap: OverlapConfig, kernel: str | None = None,
                       kv_dispatch: DispatchMeta | None = None) -> DispatchSolve:
    """``kernel``: the local backend, which sets the fused buffer's alignment; ``kv_dispatch``:
    the keys' dispatch of a cross-attention (None: the keys follow ``dispatch``, q's)."""
    kv = dispatch if kv_dispatch is None else kv_dispatch
    rows = row_pieces(slices, dispatch)
    local_rows = bool(overlap.split_directions)
    plan = choose_stage_plan(rank_costs(rows, dispatch, shape, local_rows=local_rows,
                                        kv_dispatch=kv_dispatch),
                             shape.flops_per_cell, overlap)
    table = build_transfer_table(rows, kv, plan.num_stages)
    return DispatchSolve(dispatch, rows, plan, table, key_tile_for(kernel),
                         overlap.early_start and kernel != "fa4", kv_dispatch)


def solve_magi_meta(slices: SliceArray | Sequence[AttnSlice], total_seqlen: int, cp_size: int,
                    chunk_size: int, rank: int, shape: AttnShape,
                    algorithm: str | DispatchAlgorithm = "min_heap",
                    overlap: OverlapConfig = OverlapConfig(), kernel: str | None = None
                    ) -> MagiMeta:
    """``algorithm`` "auto": ``dispatch_choice.choose_dispatch`` picks among its candidates
    with the cost model of ``kernel``, the resolved local backend ("fa4", "triton"; any other,
    e.g. None or "reference": min_heap unevaluated); the chosen candidate's solve is reused,
    not repeated."""
    if not 0 <= rank < cp_size:
        raise ValueError(f"rank={rank} outside cp group of size {cp_size}")
    if not isinstance(slices, SliceArray):
        slices = SliceArray.from_slices(slices)
    choice = chosen = None
    if algorithm == "auto":
        choice, chosen = choose_and_solve(slices, total_seqlen, cp_size, chunk_size, shape,
                                          overlap, kernel, solve_for_dispatch)
        algorithm = choice.algorithm
    algorithm = get_dispatch_algorithm(algorithm, kernel)  # a cost model may know the kernel
    if chosen is None:
        dispatch = solve_dispatch(slices, total_seqlen, cp_size, chunk_size, algorithm)
        solved = solve_for_dispatch(slices, dispatch, shape, overlap, kernel)
        runtime = solved.runtime(rank)
    else:
        solved, runtimes = chosen
        runtime = runtimes[rank]
    return MagiMeta(solved.dispatch, solved.table, runtime, solved.stage_plan, algorithm.name,
                    choice)


def solve_cross_meta(slices: SliceArray | Sequence[AttnSlice], total_seqlen_q: int,
                     total_seqlen_k: int, cp_size: int, chunk_size: int, rank: int,
                     shape: AttnShape, algorithm: str | DispatchAlgorithm = "min_heap",
                     overlap: OverlapConfig = OverlapConfig(), kernel: str | None = None
                     ) -> MagiMeta:
    """The solve of a cross-attention (slices over a q sequence of ``total_seqlen_q`` tokens and
    a kv sequence of ``total_seqlen_k``): q chunks balanced by ``algorithm`` (each weighs the
    area of its rows), k and v in contiguous shares of their own sequence
    (``dispatch.contiguous_dispatch``); the transfer table moves to each rank the keys its rows
    read from the ranks that hold them, and the backward's partial dK/dV go back the same way.
    ``algorithm``: one with equal counts (min_heap, sequential, sorted_sequential,
    balanced_runs)."""
    if not 0 <= rank < cp_size:
        raise ValueError(f"rank={rank} outside cp group of size {cp_size}")
    if not isinstance(slices, SliceArray):
        slices = SliceArray.from_slices(slices)
    algorithm = get_dispatch_algorithm(algorithm, kernel)
    if not algorithm.equal_counts:
        raise ValueError(f"dispatch algorithm {algorithm.name!r} gives ranks unequal shares, "
                         f"which cross-attention keys do not support")
    check_dispatch_args(total_seqlen_q, cp_size, chunk_size, "total_seqlen_q")
    dispatch = solve_dispatch(slices, total_seqlen_q, cp_size, chunk_size, algorithm)
    kv_dispatch = contiguous_dispatch(slices, total_seqlen_k, cp_size)
    solved = solve_for_dispatch(slices, dispatch, shape, overlap, kernel, kv_dispatch)
    return MagiMeta(dispatch, solved.table, solved.runtime(rank), solved.stage_plan,
                    algorithm.name, None, kv_dispatch)


def choose_dispatch(slices: SliceArray | Sequence[AttnSlice], total_seqlen: int, cp_size: int,
                    chunk_size: int, shape: AttnShape, overlap: OverlapConfig,
                    kernel: str | None) -> DispatchChoice:
    """The candidate "auto" runs; see ``dispatch_choice.choose_and_solve``."""
    if not isinstance(slices, SliceArray):
        slices = SliceArray.from_slices(slices)
    return choose_and_solve(slices, total_seqlen, cp_size, chunk_size, shape, overlap, kernel,
                            solve_for_dispatch)[0]


def rank_costs(rows: RowPieces, dispatch: DispatchMeta, shape: AttnShape,
               local_rows: bool = False, kv_dispatch: DispatchMeta | None = None
               ) -> list[RankCost]:
    """Per rank: area split into host / remote in proportion to the keys it needs from each;
    the KV bytes its cast moves, the larger of what it receives and what it sends (one
    collective: a rank's wait ends when its sends are done too, so a rank that receives almost
    nothing still waits for the keys it sends); ``local_rows``: also the area of the rows reading
    no remote key (only the fused stage cut by rows uses it). ``kv_dispatch``: where the keys
    are (cross-attention; None: q's ``dispatch``)."""
    kv = dispatch if kv_dispatch is None else kv_dispatch
    dst, start, end = needed_ranges(rows, dispatch.cp_size)
    needed = np.bincount(dst, weights=end - start, minlength=dispatch.cp_size).astype(np.float64)
    r_dst, r_src, r_start, r_end = remote_ranges(dst, start, end, kv)
    remote = np.bincount(r_dst, weights=r_end - r_start,
                         minlength=dispatch.cp_size).astype(np.float64)
    sent = np.bincount(r_src, weights=r_end - r_start,
                       minlength=dispatch.cp_size).astype(np.float64)
    areas = dispatch.bucket_areas().astype(np.float64)
    frac = np.divide(remote, needed, out=np.zeros_like(remote), where=needed > 0)
    q_bytes = [n * shape.num_heads_q * shape.head_dim * shape.element_size
               for n in dispatch.shard_seqlens]
    local = local_rows_areas(rows, kv) if local_rows else np.zeros(dispatch.cp_size)
    moved = np.maximum(remote, sent)
    return [RankCost(a * (1 - f), a * f, float(t) * shape.kv_bytes_per_token, qb, lo)
            for a, f, t, qb, lo in zip(areas, frac, moved, q_bytes, local)]


def local_rows_areas(rows: RowPieces, dispatch: DispatchMeta) -> np.ndarray:
    """Per rank, the area of the row pieces on rows that read only the rank's own keys (no
    piece on the same rows reaches a key another rank holds): float64 [cp_size]. ``dispatch``:
    the keys' (``rows`` already name each piece's rank)."""
    out = np.zeros(dispatch.cp_size)
    for rank in range(dispatch.cp_size):
        mine = rows.pieces.take(np.flatnonzero(rows.rank == rank))
        if len(mine) == 0:
            continue
        runs = host_runs(dispatch, rank)  # sorted by global start
        at = np.searchsorted(runs[:, 0], mine.k_start, side="right") - 1
        own = (at >= 0) & (mine.k_end <= runs[np.maximum(at, 0), 1])
        _, lo, hi = merge_ranges(np.zeros(int((~own).sum()), dtype=np.int64),
                                 mine.q_start[~own], mine.q_end[~own])
        shares_rows = meets(mine.q_start, mine.q_end, np.stack([lo, hi], axis=1))
        out[rank] = float(mine.areas()[~shares_rows].sum())
    return out
