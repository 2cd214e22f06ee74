"""Programs of MagiAttention, written from its solver's meta for every rank.

The solve is the library's own (``magi_attention.meta``): the dispatch ("auto" through
``choose_and_solve`` with the local kernel's cost model, or a named algorithm), the stage plan
of the overlap solver, the transfer table and every rank's runtime meta (host-stage mask,
per-stage group-cast args and masks, the fused stage and its buffer layout). The programs
follow ``DistAttnRuntime.forward_saving`` and ``backward`` (magi_attention/functional/
_dist_runtime.py) path by path:

- no remote stage: the host-stage kernel alone;
- fused, whole: the cast (one all_to_all_v) beside the copy of the own keys into the fused
  buffer, then one kernel over [own | received] keys; backward: one kernel on the forward's
  buffer, then the received keys' dK/dV reduced to their owners (exposed);
- fused, cut by keys (a direction in ``cut``): forward, the own keys' kernel beside the cast,
  then the received keys' kernel on their rows and the merge; backward, the received keys'
  kernel first, so their reduce runs beside the own keys' kernel;
- staged: the host stage's kernel beside stage 1's cast; stage j's kernel beside stage j + 1's
  cast; each stage merged (forward) or its dK/dV reduced while the next computes (backward,
  after casting the KV again).

``cut`` is what ``cut="auto"`` decides on the GPU by timing both ways: the predictor predicts
both and keeps the faster (``bench.cp.predict.predictor``).
"""
from __future__ import annotations

from dataclasses import dataclass

from magi_attention.meta import OverlapConfig, get_dispatch_algorithm, solve_dispatch
from magi_attention.meta.dispatch_choice import choose_and_solve
from magi_attention.meta.solver import AttnShape, solve_for_dispatch

from ..magi import default_chunk_size
from .ops import ALL_TO_ALL, Collective, Kernel, Memory, Program, Wait
from .problem import FP32_BYTES, CPProblem

__all__ = ["MagiSolve", "solve_magi", "magi_programs"]


@dataclass(frozen=True)
class MagiSolve:
    """Every rank's runtime meta of one solve, the dispatch that ran and its chunk size."""

    runtimes: tuple
    algorithm: str
    chunk_size: int
    num_stages: int
    fused: bool
    shard_seqlens: tuple[int, ...]


# solves by (mask digest, sizes, kernel, knobs): magi's arms (magi_timed, magi_whole, ...)
# share them, and a solve at cp 64 takes seconds
_SOLVES: dict[tuple, "MagiSolve"] = {}


def solve_magi(problem: CPProblem, kernel: str, chunk_size: int | None = None,
               dispatch_alg: str = "auto", num_stages: int | None = None,
               fused: bool | None = None) -> MagiSolve:
    """The solve ``magi_attn_flex_key`` makes for this mask on every rank (``kernel``: the
    resolved local backend, "fa4" or "triton", whose cost model "auto" consults); kept per
    process for the same arguments."""
    chunk = chunk_size if chunk_size is not None else default_chunk_size(problem.seqlen,
                                                                         problem.cp_size)
    key = (problem.key, kernel, chunk, dispatch_alg, num_stages, fused)
    if key not in _SOLVES:
        _SOLVES[key] = _solve(problem, kernel, chunk, dispatch_alg, num_stages, fused)
    return _SOLVES[key]


def _solve(problem: CPProblem, kernel: str, chunk: int, dispatch_alg: str,
           num_stages: int | None, fused: bool | None) -> MagiSolve:
    shape = AttnShape(problem.num_heads_q, problem.num_heads_kv, problem.head_dim,
                      problem.element_size)
    overlap = OverlapConfig(num_stages=num_stages, fused=fused)
    slices, cp = problem.slices, problem.cp_size
    chosen, name = None, dispatch_alg
    if dispatch_alg == "auto":
        choice, chosen = choose_and_solve(slices, problem.seqlen, cp, chunk, shape, overlap,
                                          kernel, solve_for_dispatch)
        name = choice.algorithm
    if chosen is None:
        algorithm = get_dispatch_algorithm(name, kernel)
        dispatch = solve_dispatch(slices, problem.seqlen, cp, chunk, algorithm)
        solved = solve_for_dispatch(slices, dispatch, shape, overlap, kernel)
        runtimes = tuple(solved.runtime(r) for r in range(cp))
    else:
        solved, runtimes = chosen
    plan = solved.stage_plan
    return MagiSolve(tuple(runtimes), name, solved.dispatch.chunk_size,
                     runtimes[0].num_stages, plan.fused and runtimes[0].num_stages > 0,
                     solved.dispatch.shard_seqlens)


class _Rank:
    """Byte sizes of one rank's tensors."""

    def __init__(self, problem: CPProblem, runtime) -> None:
        self.p, self.rt = problem, runtime
        self.n = runtime.shard_seqlen
        self.kv_row = 2 * problem.nbytes(1, problem.num_heads_kv)  # k | v of one token
        self.group = tuple(range(runtime.cp_size))

    def out(self, rows: int, element_size: int | None = None) -> int:
        return self.p.nbytes(rows, self.p.num_heads_q, element_size)

    def lse(self, rows: int) -> int:
        return rows * self.p.num_heads_q * FP32_BYTES

    def merge(self, rows: int, first: int, out: int) -> Memory:
        """merge_out_lse over ``rows``: reads a partial of ``first`` bytes an element and one in
        q's dtype, writes ``out`` bytes an element."""
        e = self.p.element_size
        return Memory(self.out(rows, first) + self.out(rows, e) + self.out(rows, out)
                      + 3 * self.lse(rows), "merge")

    def cast(self, stage: int) -> list:
        args = self.rt.stages[stage].cast
        me = self.rt.rank
        sends = tuple((d, n * self.kv_row) for d, n in enumerate(args.send_split_sizes)
                      if d != me and n)
        return [Collective(f"cast {stage}", ALL_TO_ALL, self.group, sends,
                           stage=f"cast stage {stage + 1}")]

    def reduce(self, stage: int) -> list:
        """group_reduce: the received tokens' partial dK|dV back to their owners."""
        args = self.rt.stages[stage].cast
        me = self.rt.rank
        sends = tuple((s, n * self.kv_row) for s, n in enumerate(args.recv_split_sizes)
                      if s != me and n)
        return [Collective(f"reduce {stage}", ALL_TO_ALL, self.group, sends,
                           stage=f"reduce stage {stage + 1}")]

    def reduce_add(self, stage: int, accumulate_fp32: bool) -> Memory:
        """The reduce's wait adds what arrived into the owner's dK|dV."""
        args = self.rt.stages[stage].cast
        acc = 2 * self.p.nbytes(1, self.p.num_heads_kv, FP32_BYTES) if accumulate_fp32 \
            else self.kv_row
        return Memory(args.send_seqlen * (self.kv_row + 2 * acc), "reduce add")

    def kernel(self, attn, stage: str) -> list:
        if attn.num_slices == 0:
            return []
        return [Kernel(attn.slices, attn.seqlen_q, attn.seqlen_k, self.p.num_heads_q, stage)]


def _fwd(r: _Rank, cut: frozenset[str]) -> Program:
    rt, e = r.rt, r.p.element_size
    if not rt.stages:
        return r.kernel(rt.host, "host")
    if rt.fused is not None:
        return _fused_fwd(r, cut)
    ops: Program = r.cast(0) + r.kernel(rt.host, "host")
    first = e
    for j, stage in enumerate(rt.stages):
        ops.append(Wait(f"cast {j}"))
        if j + 1 < len(rt.stages):
            ops += r.cast(j + 1)
        ops += r.kernel(stage.attn, f"stage {j + 1}")
        last = j + 1 == len(rt.stages)
        ops.append(r.merge(r.n, first, e if last else FP32_BYTES))
        first = FP32_BYTES
    return ops


def _fused_fwd(r: _Rank, cut: frozenset[str]) -> Program:
    rt, e = r.rt, r.p.element_size
    lay, recv = rt.fused_layout, rt.stages[0].cast.recv_seqlen
    if cut >= {"fwd", "bwd"}:  # no fused buffer at all
        ops = r.cast(0) + r.kernel(rt.host, "host") + [Wait("cast 0")]
    else:
        pads = sum(m for _, m in lay.pads)
        ops = [Memory(pads * r.kv_row, "zero pads")] + r.cast(0)
        ops.append(Memory(2 * r.n * r.kv_row, "own keys into the fused buffer"))
        if "fwd" in cut:
            ops += r.kernel(rt.host, "host")
        ops.append(Wait("cast 0"))
        if lay.recv_at is None:  # the cast landed in its own buffer: its pieces copied in
            ops.append(Memory(2 * recv * r.kv_row, "received keys into the fused buffer"))
    if "fwd" not in cut:
        return ops + r.kernel(rt.fused, "fused")
    win = rt.stages[0].window
    if win is None:
        return ops
    rows = win.end - win.start
    ops += r.kernel(win.attn, "received keys") + [r.merge(rows, e, e)]
    if not win.covers(r.n):
        ops.append(Memory(2 * r.out(rows), "merged rows into out"))
    return ops


def _bwd(r: _Rank, cut: frozenset[str]) -> Program:
    rt = r.rt
    if not rt.stages:
        return r.kernel(rt.host, "host")
    if rt.fused is not None:
        return _cut_bwd(r) if "bwd" in cut else _fused_bwd(r)
    kv32 = 2 * r.p.nbytes(r.n, r.p.num_heads_kv, FP32_BYTES)
    kv = r.n * r.kv_row
    ops: Program = r.cast(0) + r.kernel(rt.host, "host")
    ops.append(Memory(r.out(r.n) + r.out(r.n, FP32_BYTES) + 2 * kv + kv32, "fp32 dq, dkv"))
    for j, stage in enumerate(rt.stages):
        ops.append(Wait(f"cast {j}"))
        if j + 1 < len(rt.stages):
            ops += r.cast(j + 1)
        label = f"stage {j + 1}"
        ops += r.kernel(stage.attn, label)
        ops.append(Memory(2 * r.out(r.n, FP32_BYTES) + r.out(r.n), "dq add", label))
        if j > 0:
            ops += [Wait(f"reduce {j - 1}"), r.reduce_add(j - 1, True)]
        recv = stage.cast.recv_seqlen
        ops.append(Memory(2 * recv * r.kv_row, "cat dk, dv", label))
        ops += r.reduce(j)
    last = len(rt.stages) - 1
    ops += [Wait(f"reduce {last}"), r.reduce_add(last, True),
            Memory(r.out(r.n, FP32_BYTES) + r.out(r.n) + kv32 + kv, "dq, dk, dv casts")]
    return ops


def _reduce_into_own(r: _Rank) -> Program:
    """``_reduce_into_own``'s finish: added into dk, dv in place, else through fp32."""
    in_place = r.rt.stages[0].cast.sends_each_token_once
    ops: Program = [Wait("reduce 0"), r.reduce_add(0, not in_place)]
    if not in_place:
        kv32 = 2 * r.p.nbytes(r.n, r.p.num_heads_kv, FP32_BYTES)
        ops.insert(0, Memory(2 * r.n * r.kv_row + kv32, "own dkv to fp32"))
        ops.append(Memory(kv32 + r.n * r.kv_row, "dk, dv cast"))
    return ops


def _fused_bwd(r: _Rank) -> Program:
    rt = r.rt
    lay, recv = rt.fused_layout, rt.stages[0].cast.recv_seqlen
    ops = r.kernel(rt.fused, "fused")
    ops.append(Memory(4 * recv * r.kv_row, "gather received dk, dv"))
    if lay.own_at is None:
        ops.append(Memory(2 * r.n * r.kv_row, "gather own dk, dv"))
    return ops + r.reduce(0) + _reduce_into_own(r)


def _cut_bwd(r: _Rank) -> Program:
    rt = r.rt
    recv = rt.stages[0].cast.recv_seqlen
    win = rt.stages[0].window
    ops: Program = []
    if win is not None:
        ops += r.kernel(win.attn, "received keys")
    ops.append(Memory(2 * recv * r.kv_row, "cat received dk, dv"))
    ops += r.reduce(0) + r.kernel(rt.host, "host")
    if win is not None:
        rows = win.end - win.start
        ops.append(Memory(3 * r.out(rows), "dq add", "received keys"))
    return ops + _reduce_into_own(r)


def magi_programs(problem: CPProblem, solve: MagiSolve, direction: str,
                  cut: frozenset[str] = frozenset()) -> list[Program]:
    """Every rank's program of one direction; ``cut``: the directions whose fused stage runs
    cut by keys (ignored where there is no fused stage)."""
    build = _fwd if direction == "fwd" else _bwd
    return [build(_Rank(problem, rt), cut) for rt in solve.runtimes]
