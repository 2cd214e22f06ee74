"""Runtime meta of one rank: host-stage slices and, per remote stage, its group_cast args and
slices on the received KV buffer. Everything DistAttn needs at run time, nothing more."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..comm.args import GroupCollectiveArgs
from ..kernels.plan import FlexAttnPlan
from .attn_meta import host_runs, local_row_pieces, map_keys, merge_adjacent
from .comm_meta import RowPieces, TransferTable, cast_args
from .dispatch import DispatchMeta
from .slice_array import SliceArray


@dataclass(frozen=True)
class StageAttnArgs:
    """Slices of one stage (q on the local shard, k on the stage's KV buffer of ``seqlen_k``
    tokens) and the FlexAttnPlan the kernels run them from (kernel state cached in it)."""

    slices: SliceArray
    seqlen_q: int
    seqlen_k: int
    plan: FlexAttnPlan = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plan", FlexAttnPlan(self.slices, self.seqlen_q, self.seqlen_k))

    @property
    def num_slices(self) -> int:
        return len(self.slices)

    def tensors(self, device):
        """(q_ranges, k_ranges, attn_type_map) int32 on ``device``, built once per device."""
        return self.plan.tensors(device)

    def area(self) -> int:
        return int(self.slices.areas().sum())


@dataclass(frozen=True)
class RemoteStage:
    cast: GroupCollectiveArgs
    attn: StageAttnArgs


@dataclass(frozen=True)
class DistAttnRuntimeMeta:
    """``fused``: set when the one remote stage runs together with the host stage in one
    kernel over ``[received from lower ranks | own KV | received from higher ranks]``: the own
    shard sits at ``fused_own_offset``, after the received tokens of lower ranks (the cast's
    buffer lists sources in rank order). Where ranks hold increasing runs of the sequence (a
    contiguous dispatch), that buffer is in global key order, so a document cut between ranks
    keeps its keys in one piece (one native varlen segment for FA4)."""

    rank: int
    cp_size: int
    shard_seqlen: int
    host: StageAttnArgs
    stages: tuple[RemoteStage, ...]
    fused: StageAttnArgs | None = None

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    @property
    def fused_own_offset(self) -> int:
        """Position of the own shard in the fused KV buffer: tokens received from lower ranks."""
        return _lower_tokens(self.stages[0].cast, self.rank) if self.stages else 0


def _lower_tokens(cast: GroupCollectiveArgs, rank: int) -> int:
    return sum(cast.recv_split_sizes[:rank])


def fused_runs(host: np.ndarray, recv: np.ndarray, shard_seqlen: int, own_offset: int
               ) -> np.ndarray:
    """Key runs of the fused buffer: own runs after the lower ranks' tokens, received runs of
    higher ranks after the own shard; sorted by global start, runs that continue each other in
    both global and buffer order joined (so a document's keys stay one run)."""
    host = host + np.array([0, 0, own_offset])
    recv = recv + np.array([0, 0, shard_seqlen]) * (recv[:, 2:3] >= own_offset)
    runs = np.concatenate([host, recv])
    runs = runs[np.argsort(runs[:, 0], kind="stable")]
    new = np.ones(len(runs), dtype=bool)
    buffer_end = runs[:-1, 2] + runs[:-1, 1] - runs[:-1, 0]
    new[1:] = (runs[1:, 0] != runs[:-1, 1]) | (runs[1:, 2] != buffer_end)
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(runs)) - 1
    return np.stack([runs[first, 0], runs[last, 1], runs[first, 2]], axis=1)


def build_runtime_meta(rows: RowPieces, dispatch: DispatchMeta, table: TransferTable, rank: int,
                       fused: bool = False) -> DistAttnRuntimeMeta:
    pieces = local_row_pieces(rows, dispatch, rank)
    n = dispatch.shard_seqlen
    own = host_runs(dispatch, rank)
    host = StageAttnArgs(merge_adjacent(map_keys(pieces, own)), n, n)
    stages, recv = [], []
    for stage in range(table.num_stages):
        args, recv_runs = cast_args(table, dispatch, rank, stage)
        attn = StageAttnArgs(merge_adjacent(map_keys(pieces, recv_runs)), n, args.recv_seqlen)
        stages.append(RemoteStage(args, attn))
        recv.append(recv_runs)
    both = None
    if fused and len(stages) == 1:
        cast = stages[0].cast
        runs = fused_runs(own, recv[0], n, _lower_tokens(cast, rank))
        both = StageAttnArgs(merge_adjacent(map_keys(pieces, runs)), n, n + cast.recv_seqlen)
    return DistAttnRuntimeMeta(rank, dispatch.cp_size, dispatch.shard_seqlen, host, tuple(stages),
                               both)
