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
from .fused_layout import FusedLayout, plan_fused_layout
from .fused_split import BlockGeometry, split_rows
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
class RowWindow:
    """The rows [start, end) of the local shard that read a stage's keys, and the stage's args
    on those rows alone. Run cut by keys, the received keys' kernel and its merge (or dq add)
    then touch these rows only: where a rank receives a few keys that a few rows read, the
    rest of the shard is not read or written again."""

    start: int
    end: int
    attn: StageAttnArgs

    @classmethod
    def of(cls, attn: StageAttnArgs) -> "RowWindow | None":
        """The window of ``attn``'s rows (``attn`` itself where they are every row); None
        where it has no slices."""
        if not attn.num_slices:
            return None
        start, end = int(attn.slices.q_start.min()), int(attn.slices.q_end.max())
        if start == 0 and end == attn.seqlen_q:
            return cls(start, end, attn)
        return cls(start, end, StageAttnArgs(attn.slices.shift(-start, 0), end - start,
                                             attn.seqlen_k))

    def covers(self, seqlen_q: int) -> bool:
        """Whether the window is every row (its args are then the stage's own)."""
        return self.start == 0 and self.end == seqlen_q


@dataclass(frozen=True)
class RemoteStage:
    """``window``: the stage's rows alone (``RowWindow``), for the fused stage cut by keys."""

    cast: GroupCollectiveArgs
    attn: StageAttnArgs
    window: RowWindow | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "window", RowWindow.of(self.attn))


@dataclass(frozen=True)
class RemoteBlock:
    """One remote block of the fused split (``fused_split``): its geometry and kernel args."""

    geometry: BlockGeometry
    attn: StageAttnArgs


@dataclass(frozen=True)
class FusedSplit:
    """The fused stage cut by rows: ``local`` (every row reading no received key, on the whole
    fused buffer) runs while the cast is in flight, then each block over its rows and keys."""

    local: StageAttnArgs
    blocks: tuple[RemoteBlock, ...]

    def stage_args(self) -> tuple[StageAttnArgs, ...]:
        return (self.local, *(b.attn for b in self.blocks))


@dataclass(frozen=True)
class DistAttnRuntimeMeta:
    """``fused``: set when the one remote stage runs together with the host stage in one
    kernel over one KV buffer holding the own runs and the received ranges, placed as
    ``fused_layout`` says (global key order where that costs a few block copies, so a document
    cut between ranks keeps its keys in one piece: one native varlen segment for FA4)."""

    rank: int
    cp_size: int
    shard_seqlen: int
    host: StageAttnArgs
    stages: tuple[RemoteStage, ...]
    fused: StageAttnArgs | None = None
    fused_layout: FusedLayout | None = None
    fused_split: FusedSplit | None = None
    shard_seqlen_kv: int | None = None  # the local k, v rows (None given: shard_seqlen's)

    def __post_init__(self) -> None:
        if self.shard_seqlen_kv is None:  # self-attention: k and v are dispatched as q is
            object.__setattr__(self, "shard_seqlen_kv", self.shard_seqlen)

    @property
    def num_stages(self) -> int:
        return len(self.stages)


def build_runtime_meta(rows: RowPieces, dispatch: DispatchMeta, table: TransferTable, rank: int,
                       fused: bool = False, split: bool = False, align: int = 1,
                       recv_in_place: bool = False, kv_dispatch: DispatchMeta | None = None
                       ) -> DistAttnRuntimeMeta:
    """``split``: cut the fused stage by rows where that pays (``fused_split``); ``align``: the
    fused buffer's key tile grid for own runs, ``recv_in_place``: the cast landing in one region
    where it can (both ``plan_fused_layout``); ``kv_dispatch``: the keys' dispatch of a
    cross-attention (None: the keys follow q's ``dispatch``)."""
    kv = dispatch if kv_dispatch is None else kv_dispatch
    pieces = local_row_pieces(rows, dispatch, rank)
    n = dispatch.shard_seqlen_of(rank)
    own = host_runs(kv, rank)
    host = StageAttnArgs(merge_adjacent(map_keys(pieces, own)), n, kv.shard_seqlen_of(rank))
    stages, recv = [], []
    for stage in range(table.num_stages):
        args, recv_runs = cast_args(table, kv, rank, stage)
        attn = StageAttnArgs(merge_adjacent(map_keys(pieces, recv_runs)), n, args.recv_seqlen)
        stages.append(RemoteStage(args, attn))
        recv.append(recv_runs)
    both = layout = cut = None
    if fused and len(stages) == 1:
        cast = stages[0].cast
        bounds = np.cumsum(cast.recv_split_sizes)
        src = np.searchsorted(bounds, recv[0][:, 2], side="right")  # the cast's source order
        layout = plan_fused_layout(own, recv[0], src, rank, align=align,
                                   recv_in_place=recv_in_place)
        both = StageAttnArgs(merge_adjacent(map_keys(pieces, layout.runs)), n, layout.size)
        if split:
            cut = _fused_split(both, layout, n)
    return DistAttnRuntimeMeta(rank, dispatch.cp_size, n, host, tuple(stages),
                               both, layout, cut, kv.shard_seqlen_of(rank))


def _fused_split(both: StageAttnArgs, layout: FusedLayout, n: int) -> FusedSplit | None:
    rows = split_rows(both.slices, n, layout.recv_copies, layout.own_copies)
    if rows is None:
        return None
    blocks = tuple(RemoteBlock(g, StageAttnArgs(merge_adjacent(g.slices), g.q_end - g.q_start,
                                                g.k_end - g.k_start)) for g in rows.blocks)
    return FusedSplit(StageAttnArgs(merge_adjacent(rows.local), n, layout.size), blocks)
