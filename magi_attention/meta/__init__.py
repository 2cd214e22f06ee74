"""MagiAttention solvers: dispatch (chunks -> ranks), comm meta (remote KV ranges per stage),
overlap (stage count) and the per-rank runtime meta they produce."""
from .algorithms import DISPATCH_ALGORITHMS, DispatchAlgorithm, get_dispatch_algorithm
from .comm_meta import TransferTable, build_transfer_table, row_pieces
from .dispatch import DispatchMeta, check_dispatch_args, contiguous_dispatch, solve_dispatch
from .dispatch_choice import DispatchChoice
from .overlap_solver import OverlapConfig, RankCost, StagePlan, choose_num_stages, choose_stage_plan
from .runtime_meta import DistAttnRuntimeMeta, RemoteStage, StageAttnArgs, build_runtime_meta
from .slice_array import SliceArray, chunk_areas
from .solver import AttnShape, MagiMeta, choose_dispatch, solve_cross_meta, solve_magi_meta

__all__ = [
    "AttnShape", "DISPATCH_ALGORITHMS", "DispatchAlgorithm", "DispatchChoice", "DispatchMeta",
    "DistAttnRuntimeMeta", "choose_dispatch",
    "MagiMeta", "OverlapConfig", "RankCost", "RemoteStage", "SliceArray", "StageAttnArgs",
    "StagePlan", "choose_stage_plan",
    "TransferTable", "build_runtime_meta", "build_transfer_table", "check_dispatch_args",
    "choose_num_stages", "chunk_areas", "contiguous_dispatch", "get_dispatch_algorithm",
    "row_pieces", "solve_cross_meta", "solve_dispatch", "solve_magi_meta",
]
