"""Predict one CP cell: a strategy's programs run against the rate, memory and link models.

    models = Models(rates=fit_rate_model("results", "h100"), backend="fa4")
    for p in predict_cell(choice, mask, cp_size=64, num_heads_q=64, num_heads_kv=8,
                          head_dim=128, models=models):
        p.direction, p.runtime_ms, p.tflops_per_s

Which strategy runs which program (``bench.cp.predict.baselines``, ``magi_programs``), with
the strategy's own knobs resolved as the strategy resolves them (USP's and LoongTrain's
degrees, HybridCP's token capacity, MagiAttention's chunk size, dispatch and stages). Where the
strategy's ``supports`` refuses the cell, so does the prediction, with the same reason.
MagiAttention's choices that the key makes by timing on the GPU (``cut="auto"``: whole or cut
by keys per direction; ``dispatch_alg="timed"``: equal or unequal shares) are made here by
predicting each way and keeping the faster by the key's own margins.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from bench.config import StrategyChoice
from bench.metrics import attn_flops, tflops_per_s

from ..loongtrain import default_window_size
from ..magi import default_chunk_size
from ..usp import default_ulysses_degree, resolve_degrees
from .baselines import head_context_programs, hybrid_cp_programs, ring_allgather_programs
from .links import LinkModel, Topology
from .magi_programs import MagiSolve, magi_programs, solve_magi
from .ops import Kernel, Memory, Program, RankWork, work_summary
from .problem import CPProblem
from .rates import RateModel
from .schedule import Timeline, simulate

__all__ = ["Models", "Prediction", "predict_cell", "MODELLED_MAGI_KNOBS"]

DIRECTIONS = ("fwd", "bwd")
# The margins the key's timed choices keep the faster way by (magi_attention.api's _tune_cut
# MIN_GAIN and _tune_dispatch MIN_GAIN / UNEQUAL_CHUNK; tests/bench/cp/predict hold them equal)
CUT_MIN_GAIN = {"fwd": 0.01, "bwd": 0.02}
DISPATCH_MIN_GAIN = 0.02
UNEQUAL_CHUNK = 32
# knobs of bench.cp.magi the programs follow (balance "timed" is predicted as the cost model's
# cuts: its kernel timing needs the GPU; dynamic_grid changes no program); others
# (fused_split, early_start) change the runtime's path in ways not modelled, and a cell
# setting them is refused
MODELLED_MAGI_KNOBS = {"chunk_size", "num_stages", "dispatch_alg", "cut", "fused", "head_dim",
                       "dtype", "balance", "dynamic_grid"}


@dataclass(frozen=True)
class Models:
    """The models a prediction runs against: local kernel rates of one GPU and backend, HBM
    bandwidth for elementwise passes (and a launch gap per pass), links and node size."""

    rates: RateModel
    backend: str
    memory_gb_per_s: float = 3000.0
    memory_launch_us: float = 4.0
    links: LinkModel = field(default_factory=LinkModel)
    topology: Topology = field(default_factory=Topology)

    def kernel_us(self, direction: str):
        return lambda call: self.rates.kernel_us(call, self.backend, direction)

    def memory_us(self, op: Memory) -> float:
        return self.memory_launch_us + op.nbytes / (self.memory_gb_per_s * 1e3)

    def run(self, programs: list[Program], direction: str) -> Timeline:
        return simulate(programs, self.kernel_us(direction), self.memory_us, self.links,
                        self.topology)


@dataclass(frozen=True)
class Prediction:
    """One predicted (strategy, mask, cp_size, direction) cell: ``status`` "predicted" or
    "unsupported" (``notes`` then says why)."""

    direction: str
    status: str
    notes: str = ""
    runtime_ms: float | None = None
    flops: float | None = None
    cp_size: int = 1
    compute_ms: float | None = None
    exposed_ms: float | None = None
    works: tuple[RankWork, ...] = ()

    @property
    def tflops_per_s(self) -> float | None:
        if self.runtime_ms is None or not self.flops:
            return None
        return tflops_per_s(self.flops, self.runtime_ms, self.cp_size)


def _knobs(choice: StrategyChoice, head_dim: int, dtype: str) -> dict[str, Any]:
    """The strategy's knobs as ``bench.cp.runner.build_strategy`` passes them."""
    knobs = dict(choice.knobs)
    cls = choice.load()
    for name, value in (("head_dim", head_dim), ("dtype", dtype)):
        if name in cls.knob_names and knobs.get(name) is None:
            knobs[name] = value
    return knobs


def predict_cell(choice: StrategyChoice, mask, cp_size: int, num_heads_q: int,
                 num_heads_kv: int, head_dim: int, models: Models, dtype: str = "bfloat16",
                 directions=DIRECTIONS) -> list[Prediction]:
    """One Prediction per direction of ``choice`` on ``mask`` (global, seqlen = mask.seqlen)."""
    knobs = _knobs(choice, head_dim, dtype)
    cls = choice.load()
    reason = cls.supports(mask, num_heads_q, num_heads_kv, cp_size, **knobs)
    if reason is None and choice.name == "magi":
        extra = {k for k, v in knobs.items() if k not in MODELLED_MAGI_KNOBS and v}
        if extra:
            reason = f"predictor: magi knobs {sorted(extra)} are not modelled"
    if reason is not None:
        return [Prediction(d, "unsupported", reason, cp_size=cp_size) for d in directions]
    problem = CPProblem(mask, cp_size, num_heads_q, num_heads_kv, head_dim,
                        2 if dtype in ("bfloat16", "float16") else 4)
    if choice.name == "magi":
        return _predict_magi(problem, knobs, models, directions)
    notes = ""
    out = []
    for direction in directions:
        programs = _baseline_programs(choice.name, knobs, problem, direction)
        out.append(_prediction(problem, programs, direction, models, notes))
    return out


# programs by (strategy, knobs, cell, direction): a sweep predicts a cell once per local
# kernel, and the programs do not depend on it
_PROGRAMS: dict[tuple, list[Program]] = {}


def _baseline_programs(name: str, knobs: Mapping[str, Any], problem: CPProblem,
                       direction: str) -> list[Program]:
    key = (name, tuple(sorted((k, str(v)) for k, v in knobs.items())), problem.key, direction)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = _build_programs(name, knobs, problem, direction)
    return _PROGRAMS[key]


def _build_programs(name: str, knobs: Mapping[str, Any], problem: CPProblem,
                    direction: str) -> list[Program]:
    cp = problem.cp_size
    if name == "single_gpu":
        return [[Kernel(problem.slices, problem.seqlen, problem.seqlen, problem.num_heads_q,
                        "whole")]]
    if name == "ulysses":
        return head_context_programs(problem, cp, 1, direction)
    if name == "ring_p2p":
        return head_context_programs(problem, 1, cp, direction)
    if name == "usp":
        ulysses, ring = resolve_degrees(cp, knobs.get("ulysses_degree"), knobs.get("ring_degree"))
        return head_context_programs(problem, ulysses, ring, direction)
    if name == "loongtrain":
        hp = knobs.get("head_parallel_degree") or default_ulysses_degree(cp)
        window = knobs.get("window_size") or default_window_size(cp // hp)
        return head_context_programs(problem, hp, window, direction)
    if name == "ring_allgather":
        return ring_allgather_programs(problem, direction)
    if name == "hybrid_cp":
        return hybrid_cp_programs(problem, direction, knobs.get("token_capacity"))
    raise ValueError(f"the predictor has no program for strategy {name!r}")


def _prediction(problem: CPProblem, programs: list[Program], direction: str, models: Models,
                notes: str, timeline: Timeline | None = None) -> Prediction:
    timeline = timeline or models.run(programs, direction)
    flops = attn_flops(problem.mask.area, problem.num_heads_q, problem.head_dim, 1, direction)
    slowest = timeline.slowest_rank
    return Prediction(direction, "predicted", notes, timeline.step_us / 1e3, flops,
                      problem.cp_size, timeline.compute_us[slowest] / 1e3,
                      timeline.exposed_us / 1e3,
                      tuple(work_summary(programs, models.topology, problem.num_heads_q)))


def _magi_way(problem: CPProblem, solve: MagiSolve, models: Models, cut_knob: str,
              directions) -> tuple[dict[str, tuple], frozenset[str]]:
    """{direction: (programs, timeline)} and the cut, ``cut_knob`` resolved as the key does
    ("auto": each direction cut by keys where that is faster by its MIN_GAIN)."""
    fixed = {"none": frozenset(), "fwd": frozenset({"fwd"}), "bwd": frozenset({"bwd"}),
             "both": frozenset({"fwd", "bwd"})}
    cut = fixed.get(cut_knob, frozenset())
    if cut_knob == "auto" and solve.fused:
        for direction in DIRECTIONS:
            whole = models.run(magi_programs(problem, solve, direction, frozenset()), direction)
            by_keys = models.run(magi_programs(problem, solve, direction,
                                               frozenset({direction})), direction)
            if by_keys.step_us < whole.step_us * (1 - CUT_MIN_GAIN[direction]):
                cut |= {direction}
    runs = {}
    for direction in directions:
        programs = magi_programs(problem, solve, direction, cut)
        runs[direction] = (programs, models.run(programs, direction))
    return runs, cut


def _predict_magi(problem: CPProblem, knobs: Mapping[str, Any], models: Models, directions
                  ) -> list[Prediction]:
    chunk = knobs.get("chunk_size") or default_chunk_size(problem.seqlen, problem.cp_size)
    alg = knobs.get("dispatch_alg", "auto")
    cut_knob = knobs.get("cut", "auto")
    solve_args = dict(num_stages=knobs.get("num_stages"), fused=knobs.get("fused"))
    candidates = {alg: chunk}
    if alg == "timed":  # unequal_runs on finer chunks where the sequence allows
        fine = problem.seqlen % (problem.cp_size * UNEQUAL_CHUNK) == 0 and UNEQUAL_CHUNK < chunk
        candidates = {"auto": chunk, "unequal_runs": UNEQUAL_CHUNK if fine else chunk}
    ways = {}
    for name, chunk_size in candidates.items():
        solve = solve_magi(problem, models.backend, chunk_size, name, **solve_args)
        runs, cut = _magi_way(problem, solve, models, cut_knob, DIRECTIONS)
        ways[name] = (solve, runs, cut, sum(t.step_us for _, t in runs.values()))
    chosen = alg
    if alg == "timed":  # unequal shares kept only where faster by the key's margin
        chosen = ("unequal_runs" if ways["unequal_runs"][3]
                  < ways["auto"][3] * (1 - DISPATCH_MIN_GAIN) else "auto")
    solve, runs, cut, _ = ways[chosen]
    notes = (f"chunk_size={solve.chunk_size}; dispatch={solve.algorithm}; "
             f"num_stages={solve.num_stages}; fused={solve.fused}; "
             f"cut={','.join(sorted(cut)) or '-'}")
    if len(set(solve.shard_seqlens)) > 1:
        notes += f"; tokens_per_rank={min(solve.shard_seqlens)}-{max(solve.shard_seqlens)}"
    return [_prediction(problem, runs[d][0], d, models, notes, runs[d][1]) for d in directions]
