"""Runtime meta of one rank: host-stage slices and, per remote stage, its group_cast args and
slices on the received KV buffer. Everything DistAttn needs at run time, nothing more."""
from __future__ import annotations

from dataclasses import dataclass, field


from ..comm.args import GroupCollectiveArgs
from .attn_meta import host_runs, local_row_pieces, map_keys
from .comm_meta import RowPieces, TransferTable, cast_args
from .dispatch import DispatchMeta
from .slice_array import SliceArray


@dataclass(frozen=True)
class StageAttnArgs:
    """Slices of one stage (q on the local shard, k on the stage's KV buffer) and their tensors."""

    slices: SliceArray
    _tensor_cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_slices(self) -> int:
        return len(self.slices)

    def tensors(self, device):
        """(q_ranges, k_ranges, attn_type_map) int32 on ``device``, built once per device."""
        key = str(device)
        if key not in self._tensor_cache:
            self._tensor_cache[key] = self.slices.to_tensors(device)
        return self._tensor_cache[key]

    def area(self) -> int:
        return int(self.slices.areas().sum())


@dataclass(frozen=True)
class RemoteStage:
    cast: GroupCollectiveArgs
    attn: StageAttnArgs


@dataclass(frozen=True)
class DistAttnRuntimeMeta:
    rank: int
    cp_size: int
    shard_seqlen: int
    host: StageAttnArgs
    stages: tuple[RemoteStage, ...]

    @property
    def num_stages(self) -> int:
        return len(self.stages)


def build_runtime_meta(rows: RowPieces, dispatch: DispatchMeta, table: TransferTable, rank: int
                       ) -> DistAttnRuntimeMeta:
    pieces = local_row_pieces(rows, dispatch, rank)
    host = StageAttnArgs(map_keys(pieces, host_runs(dispatch, rank)))
    stages = []
    for stage in range(table.num_stages):
        args, recv_runs = cast_args(table, dispatch, rank, stage)
        stages.append(RemoteStage(args, StageAttnArgs(map_keys(pieces, recv_runs))))
    return DistAttnRuntimeMeta(rank, dispatch.cp_size, dispatch.shard_seqlen, host, tuple(stages))
