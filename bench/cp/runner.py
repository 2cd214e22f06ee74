"""The CP sweep under torchrun: for each cell (per-GPU seqlen, cp_size, mask, strategy) build,
gate, time fwd and bwd, and have rank 0 write the rows.

Scaling recipe (the published figures): the tokens per GPU are fixed, the total seqlen is
``seqlen_per_gpu * cp_size``. One launch covers every ``cp_size <= WORLD_SIZE``: the runner
builds a sub-group of the first cp_size ranks for each (``dist.new_group``, called by all ranks
together); larger cp sizes get rows ``unsupported`` ("needs N ranks"), which a later, larger
launch does not skip. Ranks outside the current sub-group only join the agreement collectives.

Per cell, in phases, each ending with an agreement (an all_reduce MAX over every rank of a
status code and the measured values, so every rank leaves the cell together and takes the same
next step; the worst status wins, its message is gathered from the rank that raised it):

1. build: the global q, k, v, dout (``bench.problem.make_inputs``, same seed on every
   rank), the strategy (collective), this rank's shards; the global tensors are freed after.
2. gate (the first per-GPU seqlen this process measures for a (strategy, mask, cp_size)): one
   forward and one backward through the strategy, unsharded and compared on rank 0 with FFA's
   reference backend on the global inputs (``bench.gate``: a few row blocks at large S, with
   a copy of dout zero off them, so the gradients are checked at every seqlen; the timed
   backward keeps the whole dout, whose values set the GPU's power draw). Rank 0's verdict is
   broadcast: a wrong output -> both directions ``wrong``; wrong gradients -> bwd ``wrong``;
   nothing of a wrong direction is timed. Later seqlens of a triple that failed are ``wrong`` too.
3. fwd: ``strategy.attention`` under no_grad, timed with CUDA events on each rank (median of
   ``repeat`` after ``warmup`` calls and, with ``hardware.warmup_ms``, untimed calls for about
   that long, their count agreed over the cell's ranks); runtime = the slowest rank's median.
4. bwd: one forward with autograd, then ``torch.autograd.grad(out, (q, k, v), dout,
   retain_graph=True)`` timed alone (every strategy's autograd.Function keeps its tensors in
   ``save_for_backward``, so the graph can be replayed); runtime as for fwd.

Interleaved (``hardware.rounds`` R > 1): every strategy of one (per-GPU seqlen, cp_size, mask)
is built and gated first and kept, then 3 and 4 run for each in turn, R rounds over, so a drift
of the GPU's clocks lands on every strategy alike; a row's runtime is the median of its rounds
(peak and bytes: the max), its peak less what the other kept strategies hold allocated.

Time limit (``time_limit_s``, seconds from the runner's start; Slurm's or a device call's wall
limit less a margin): a point whose build and first round (as the previous point's took) would end
past it is not started, and rounds stop where the next would, like the last one, end past it; the
rows then keep the rounds done (``rounds_done=k`` in the message). Points not started get no row,
so a rerun measures them; the decision is agreed over the ranks like every other step.

Peak memory: ``torch.cuda.max_memory_allocated`` of each rank during the timed calls (the bwd
peak includes the retained forward activations), the max over ranks. Bytes: the strategy's
``comm_bytes`` per call, the max over ranks, in the row's message (``comm_bytes_per_rank=``).
TFLOPs/s/GPU = FLOPs of the whole mask / (runtime * cp_size).

Statuses as in the kernel runner: ``UnsupportedMask``, ``BackendUnavailable``, ImportError and
NotImplementedError -> unsupported (missing when a package is absent, bench.status),
``torch.cuda.OutOfMemoryError`` -> oom, any other Exception -> error; a row, and the sweep goes
on. Cells with a final row in the results folder for the same measured function
(``bench.results.RESUME_KEY``: strategy, target and its code, knobs, local backend) are skipped
unless ``force``. Ctrl-C raises ``SweepInterrupted`` with the number of rows written.

Limits: the agreement only helps when a failure leaves no collective half-entered. An exception
raised on some ranks while the others wait inside a collective of the strategy (an all-to-all,
a p2p recv) leaves those waiting until the process-group timeout (``timeout_min``), which NCCL
turns into an abort of the job, and gloo into an exception whose ranks may then disagree: rows
written so far are kept, and a rerun skips them. Strategies that build their own sub-groups
with ``dist.new_group`` (USP, LoongTrain with both degrees > 1) need every rank of the launch to
call it, so they hang when cp_size < WORLD_SIZE; see bench/cp/_head_context.py.
"""
from __future__ import annotations

import datetime
import logging
import math
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.distributed as dist
from tqdm import tqdm

from bench.config import CPBenchConfig, MaskChoice, StrategyChoice
from bench.gate import GateResult, Reference, compare, gate_rows, reference, restrict_dout
from bench.masks import Mask
from bench.metrics import allocated_gb, peak_mem_gb, reset_peak_mem, time_cuda_ms
from bench.problem import Inputs, Shapes, make_inputs
from bench.results import (FINAL_STATUSES, RESUME_KEY, ResultRow, RunMeta, SweepInterrupted,
                           latest_rows, read_results, record_row, repair_file, resume_key,
                           run_meta)
from bench.spec import measured_spec
from bench.sweep import (RowSource, cell_mask, error_message, failure_of, free_memory,
                         supports_failure)

from . import STRATEGIES
from .base import CPStrategy
from .local_kernel import LocalKernel

log = logging.getLogger(__name__)

# StrategyChoice and CPBenchConfig live in bench.config (one configuration layer); named here too
__all__ = ["StrategyChoice", "CPBenchConfig", "CPRunner", "run_sweep", "init_distributed",
           "default_cuda_connections",
           "NEEDS_RANKS"]

# message prefix of the rows of cp sizes larger than the launch; a larger launch re-measures them
NEEDS_RANKS = "needs cp_size ranks:"
# agreement codes: the larger wins
CODES = {"ok": 0, "wrong": 1, "missing": 2, "unsupported": 3, "oom": 4, "error": 5}
STATUS_OF = {v: k for k, v in CODES.items()}
# process-level settings of a CP run, copied into each row's env column
CP_ENV = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
          "NCCL_P2P_DISABLE", "NCCL_IB_DISABLE")


# The hardware work queues of a CUDA context, read when the context is made. One, as the Slurm
# launcher sets it (slurm/env.sh): kernels then reach the GPU in launch order across streams, so
# a collective launched before a copy starts before it (with eight, traces showed MagiAttention's
# cast queued behind the own KV's copy), and a run started by plain torchrun measures what a
# Slurm job measures (the queue count moved baselines by up to ~12%; docs/design/timing_method.md).
# A value already in the environment wins; the rows' env column records it.
CUDA_CONNECTIONS = "1"


def default_cuda_connections() -> None:
    """CUDA_DEVICE_MAX_CONNECTIONS = CUDA_CONNECTIONS where the environment does not say and no
    CUDA call has run yet in this process (anything from reading the GPU's name on may make the
    context, which reads it once); said in a warning where that is too late."""
    if "CUDA_DEVICE_MAX_CONNECTIONS" in os.environ:
        return
    if torch.cuda.is_initialized():
        log.warning("CUDA is initialised before the CP run: CUDA_DEVICE_MAX_CONNECTIONS stays "
                    "at the driver's default (set it before the process starts)")
        return
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = CUDA_CONNECTIONS


# ----------------------------------------------------------------------------- process group
def init_distributed(device: str, timeout_min: float = 10.0) -> bool:
    """Initialise torch.distributed from the torchrun environment (nccl on CUDA, else gloo);
    without torchrun (no RANK variable) a world of one. Sets the CUDA device to LOCAL_RANK
    (and, before that makes the context, CUDA_DEVICE_MAX_CONNECTIONS where it is unset).
    Returns True if this call created the process group (the caller destroys it)."""
    if dist.is_initialized():
        return False
    backend = "nccl" if device == "cuda" else "gloo"
    if device == "cuda":
        default_cuda_connections()
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    timeout = datetime.timedelta(minutes=timeout_min)
    if "RANK" in os.environ:
        dist.init_process_group(backend, timeout=timeout)
    else:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1,
                                timeout=timeout)
    return True


# ----------------------------------------------------------------------------- helpers
def build_strategy(choice: StrategyChoice, mask: Mask, group, hw, kernel: LocalKernel
                   ) -> CPStrategy:
    """The strategy of ``choice`` on ``mask`` over ``group`` (collective), with the problem
    facts a strategy may declare as knobs (MagiAttention's cost model) filled from ``hw``."""
    cls = choice.load()
    knobs = dict(choice.knobs)
    for name, value in (("head_dim", hw.head_dim), ("dtype", hw.dtype)):
        if name in cls.knob_names and knobs.get(name) is None:
            knobs[name] = value
    return cls(mask, group, num_heads_q=hw.num_heads_q, num_heads_kv=hw.num_heads_kv,
               kernel=kernel, **knobs)


def timed_call(strategy: CPStrategy, local, direction: str) -> Callable[[], object]:
    """One call of ``direction`` on this rank's (q, k, v, dout) shards, as the sweep times it:
    the forward under no_grad; the backward replays the autograd graph of one forward."""
    q, k, v, dout = local[:4]
    if direction == "fwd":
        def fwd():
            with torch.no_grad():
                return strategy.attention(q, k, v)
        return fwd
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = strategy.attention(q, k, v)
    return lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)


def group_max(value: float, group, device: torch.device) -> float:
    """The max of ``value`` over ``group`` (every member calls it)."""
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return float(t.item())


def agreed_count(group, device: torch.device) -> Callable[[int], int]:
    """time_cuda_ms's ``agree`` over ``group``: the warm-up calls each rank sized for itself,
    made one count, since every call of a strategy is a collective."""
    return lambda n: int(group_max(float(n), group, device))


@dataclass
class _Outcome:
    """One phase's result on this rank, then (after ``_agree``) on all ranks."""

    status: str = "ok"
    message: str = ""
    values: tuple[float, ...] = ()


def _run_phase(member: bool, fn: Callable[[], _Outcome | None]) -> _Outcome:
    if not member:
        return _Outcome()
    try:
        return fn() or _Outcome()
    except Exception as e:  # the sweep goes on; the row carries the status and the error
        status, message = failure_of(e)
        if status == "error":
            log.warning("CP cell failed on rank %d: %s", dist.get_rank(), message)
        return _Outcome(status, message)


@dataclass
class _Cell:
    strategy: StrategyChoice
    mask_label: str
    mask: Mask | None
    seqlen_per_gpu: int
    cp_size: int
    shapes: Shapes


@dataclass
class _State:
    """What the phases of one cell hand on; dropped (and the memory freed) after the cell."""

    strategy: CPStrategy | None = None
    inputs: Inputs | None = None        # global, [1, S, heads, head_dim]; freed after the gate
    local: list[torch.Tensor] = field(default_factory=list)   # q, k, v, dout shards
    notes: str = ""
    rows: torch.Tensor | None = None    # the gate's query rows (dout is zero off them)
    gate_dout: torch.Tensor | None = None  # the local dout of the gate (zero off its rows)
    verdict: GateResult | None = None   # rank 0's, after the gate phase
    resident_gb: float = 0.0            # what the built strategy keeps allocated (CUDA)
    build_ms: float | None = None       # the strategy's build (its key / plan), on this rank


@dataclass
class _Prepared:
    """A built and gated cell waiting to be timed, and its timings so far (per direction, one
    (runtime, peak, sent, hidden) per round)."""

    cell: _Cell
    state: _State | None
    remaining: list[str]
    verdict: GateResult | None
    values: dict[str, list[tuple]] = field(default_factory=dict)
    failure: _Outcome | None = None
    written: set[str] = field(default_factory=set)   # directions whose row is written


class CPRunner:
    """Runs one ``CPBenchConfig`` on every rank of the default process group; ``run()``
    returns the rows rank 0 wrote (empty on the other ranks)."""

    def __init__(self, config: CPBenchConfig) -> None:
        if not dist.is_initialized():
            raise ValueError("torch.distributed is not initialised: call init_distributed first")
        if config.hardware.device == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"hardware {config.hardware.name!r} wants device 'cuda', but CUDA "
                             f"is not available; use hardware=cpu or hardware=auto")
        self.config = config
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.device = (torch.device("cuda", torch.cuda.current_device())
                       if config.hardware.device == "cuda" else torch.device("cpu"))
        # the agreement collectives run on the default group: NCCL needs device tensors
        self.comm_device = self.device if dist.get_backend() == "nccl" else torch.device("cpu")
        self.meta: RunMeta = run_meta()
        extra = [f"{k}={os.environ[k]}" for k in CP_ENV if k in os.environ]
        extra += [f"world_size={self.world_size}", f"dist_backend={dist.get_backend()}"]
        if config.hardware.warmup_ms:  # how the cells were warmed changes what they measure
            extra.append(f"warmup_ms={config.hardware.warmup_ms:g}")
        if config.hardware.rounds > 1:  # and how they were interleaved
            extra.append(f"rounds={config.hardware.rounds}")
        self.env = ";".join([self.meta.env] * bool(self.meta.env) + extra)
        self.source = RowSource(self.meta, config.hardware.name, self.env)
        self.kernel = LocalKernel(backend=config.local_kernel)
        # what each label measures, for the resume key and the rows
        self.specs = {s.label: measured_spec(s.name, {**s.knobs, "target": s.target,
                                                       "local_kernel": config.local_kernel})
                      for s in config.strategies}
        self.versions: dict[str, str] = {}
        self.done = self._done_cells()
        # group of the first p ranks for each cp_size p <= world size (new_group: all ranks)
        self.groups = {p: dist.new_group(list(range(p)))
                       for p in sorted(config.cp_sizes) if p <= self.world_size}
        # (label, mask, cp_size) -> {direction: message} of the directions that failed the gate
        self.gated: dict[tuple, dict[str, str]] = {}
        self.ref_cache: dict[tuple, Reference] = {}
        self.rows: list[ResultRow] = []
        limit = config.time_limit_s
        self.deadline = time.monotonic() + limit if limit is not None else None
        self.point_s = 0.0      # the last point's build and first round: what a point needs
        self.skipped = 0        # points not started for lack of time

    # -- rows --------------------------------------------------------------------------------
    def _done_cells(self) -> set[tuple]:
        """Final rows' cell keys (rank 0 reads, everyone gets the same set)."""
        done: set[tuple] = set()
        if self.rank == 0:
            repair_file(self.config.out_file)  # a torn last row from a crash: repaired first
        if self.rank == 0 and not self.config.force and self.config.results_dir.exists():
            frame = latest_rows(read_results(self.config.results_dir), RESUME_KEY)
            if not frame.empty:
                keep = frame["status"].isin(FINAL_STATUSES) & \
                    ~frame["message"].str.startswith(NEEDS_RANKS)
                done = {resume_key(r) for r in frame[keep].to_dict("records")}
        box = [done]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def _key(self, cell: _Cell, direction: str) -> tuple:
        label = cell.strategy.label
        return self.source.key(label=label, mask_label=cell.mask_label, shapes=cell.shapes,
                               direction=direction, cp_size=cell.cp_size, spec=self.specs[label],
                               version=self._version(cell))

    def _version(self, cell: _Cell) -> str:
        label = cell.strategy.label
        if label not in self.versions:
            self.versions[label] = self._probe_version(cell)
        return self.versions[label]

    def _probe_version(self, cell: _Cell) -> str:
        choice = cell.strategy
        origin = choice.target or STRATEGIES[choice.name].split(":")[0]
        knobs = ",".join(f"{k}={v}" for k, v in sorted(choice.knobs.items()) if v is not None)
        try:
            s = cell.shapes
            probe = torch.empty(1, s.num_heads_q, s.head_dim, dtype=s.torch_dtype,
                                device=self.device)
            local = self.kernel.resolved(probe, probe[:, :s.num_heads_kv])
        except Exception as e:  # a version probe must not lose the row
            local = f"unknown ({error_message(e)})"
        return f"{origin}[{knobs}] local={local}" if knobs else f"{origin} local={local}"

    def _write(self, cell: _Cell, direction: str, status: str, message: str = "",
               runtime_ms: float | None = None, peak: float | None = None,
               build_ms: float | None = None) -> None:
        if self.rank != 0:
            return
        label = cell.strategy.label
        row = self.source.row(label=label, version=self._version(cell), spec=self.specs[label],
                              mask_label=cell.mask_label, mask=cell.mask, shapes=cell.shapes,
                              direction=direction, cp_size=cell.cp_size, status=status,
                              message=message, runtime_ms=runtime_ms, peak_mem_gb=peak,
                              build_ms=build_ms)
        record_row(self.config.out_file, row, self.rows)

    # -- agreement ---------------------------------------------------------------------------
    def _agree(self, outcome: _Outcome, num_values: int = 0) -> _Outcome:
        """All ranks: the worst status, its message, and the max of each value (NaN -> 0)."""
        values = list(outcome.values) + [0.0] * (num_values - len(outcome.values))
        values = [0.0 if v is None or math.isnan(v) else float(v) for v in values]
        t = torch.tensor([CODES[outcome.status]] + values, dtype=torch.float64,
                         device=self.comm_device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        code, agreed = int(t[0].item()), tuple(float(v) for v in t[1:].tolist())
        if code == CODES["ok"]:
            return _Outcome("ok", outcome.message, agreed)
        gathered: list = [None] * self.world_size
        dist.all_gather_object(gathered, (CODES[outcome.status], outcome.message))
        message = next(msg for c, msg in gathered if c == code)
        return _Outcome(STATUS_OF[code], message, agreed)

    def _phase(self, cell: _Cell, fn: Callable[[], _Outcome | None], num_values: int = 0) -> _Outcome:
        return self._agree(_run_phase(self.rank < cell.cp_size, fn), num_values)

    def _out_of_time(self, needed_s: float) -> bool:
        """All ranks: whether ``needed_s`` more seconds would end past ``time_limit_s`` on any
        rank (the clocks differ a little: the earliest deadline wins). No limit: False, and no
        collective (every rank has the same config)."""
        if self.deadline is None:
            return False
        late = time.monotonic() + needed_s > self.deadline
        return group_max(float(late), None, self.comm_device) > 0

    # -- phases ------------------------------------------------------------------------------
    def _build(self, cell: _Cell, state: _State, gate_now: bool) -> None:
        config = self.config
        inputs = make_inputs(cell.shapes, self.device, seed=config.seed)
        # untimed in the rows' runtime, but a user pays it once per mask (magi's key: its solver
        # and its timed choices); the ranks build together, so rank 0's wall time is the group's
        start = time.perf_counter()
        state.strategy = build_strategy(cell.strategy, cell.mask, self.groups[cell.cp_size],
                                        config.hardware, self.kernel)
        state.build_ms = (time.perf_counter() - start) * 1e3
        state.local = [state.strategy.shard(t[0]) for t in (inputs.q, inputs.k, inputs.v,
                                                            inputs.dout)]
        state.notes = state.strategy.notes
        if gate_now:  # same rows on every rank: same seed
            gate = config.gate
            state.rows = gate_rows(cell.shapes.seqlen, rows=gate.rows,
                                   full_max_seqlen=gate.full_max_seqlen, seed=gate.seed)
            # the gate's dout is zero off its rows; the timed backward keeps the whole one (the
            # values change the GPU's clocks: bench.kernels.base.Prepared.set_dout). The global
            # dout is restricted in place, which a shard may view: the local one is copied first
            state.local[3] = state.local[3].clone()
            restrict_dout(inputs, state.rows)
            state.gate_dout = state.strategy.shard(inputs.dout[0])
            state.inputs = inputs

    def _gate(self, cell: _Cell, state: _State) -> None:
        """Members: one forward and one backward through the strategy, unsharded; rank 0
        compares with the reference and keeps the verdict in ``state.verdict``."""
        strategy = state.strategy
        q, k, v = (t.detach().requires_grad_() for t in state.local[:3])
        out_local = strategy.attention(q, k, v)
        out = strategy.unshard(out_local.detach())
        grads = [strategy.unshard(g) for g in
                 torch.autograd.grad(out_local, (q, k, v), state.gate_dout)]
        del out_local, q, k, v
        if self.rank != 0:
            return
        ref_key = (cell.mask_label, cell.shapes.seqlen)
        if ref_key not in self.ref_cache:
            self.ref_cache.clear()
            self.ref_cache[ref_key] = reference(cell.mask, cell.shapes, state.inputs, state.rows)
        state.verdict = compare(self.ref_cache[ref_key], out[None],
                                tuple(g[None] for g in grads), cell.shapes.dtype,
                                self.config.gate.seed)

    def _share_verdict(self, state: _State) -> GateResult:
        """Rank 0's gate verdict, on every rank (the same next step everywhere)."""
        box = [state.verdict]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def _time(self, state: _State, direction: str, others_gb: float = 0.0) -> _Outcome:
        """values: (runtime_ms, peak GiB, bytes sent per call) of this rank; ``others_gb``: what
        other strategies built beside this one keep allocated, left out of its peak."""
        hw, strategy = self.config.hardware, state.strategy
        call = timed_call(strategy, state.local, direction)
        calls = [0]  # the comm counters add up over every call, warm-up ones included

        def fn():
            calls[0] += 1
            call()
        strategy.reset_comm_stats()
        reset_peak_mem(self.device)
        agree = agreed_count(strategy.group, self.comm_device)
        runtime = time_cuda_ms(fn, hw.warmup, hw.repeat, hw.warmup_ms, agree)
        peak = peak_mem_gb(self.device)
        peak = peak - others_gb if peak is not None else None
        sent = strategy.comm_bytes().get(direction, 0) / calls[0]
        # comm time the strategy's overlap hides (serial - overlapped), sent as 1 + ms so that
        # 0 (what ranks outside the cell and NaN agree as) means "not measured"
        hidden = 0.0
        set_overlap = getattr(strategy, "set_overlap", None)
        if set_overlap is not None and set_overlap(False):
            try:
                hidden = 1.0 + max(0.0, time_cuda_ms(fn, hw.warmup, hw.repeat, hw.warmup_ms,
                                                      agree) - runtime)
            finally:
                set_overlap(True)
        del call, fn
        return _Outcome("ok", "", (runtime, peak if peak is not None else float("nan"), sent,
                                   hidden))

    # -- cells -------------------------------------------------------------------------------
    def _run_point(self, todo: list[tuple[_Cell, list[str]]], bar: tqdm) -> None:
        """The strategies of one (mask, seqlen, cp_size), every rank. ``hardware.rounds`` 1: each
        built, gated and timed in turn, and freed; > 1: all built and gated first, then timed in
        turn, round after round, so a drift of the GPU's clocks lands on all alike."""
        rounds, step = self.config.hardware.rounds, len(self.config.directions)
        prepared: list[_Prepared] = []
        started = time.monotonic()
        try:
            for cell, pending in todo:
                bar.set_postfix_str(f"{cell.strategy.label} {cell.mask_label} "
                                    f"{cell.seqlen_per_gpu}x{cell.cp_size}")
                p = self._prepare(cell, pending)
                if p is not None and rounds == 1:
                    self._measure([p], 1)
                elif p is not None:
                    prepared.append(p)
                bar.update(step)
            if prepared:
                bar.set_postfix_str(f"{len(prepared)} strategies x {rounds} rounds "
                                    f"{todo[0][0].mask_label}")
                self._measure(prepared, rounds, started)
            else:
                self.point_s = time.monotonic() - started
        finally:
            prepared.clear()
            free_memory(self.device)

    def _prepare(self, cell: _Cell, pending: list[str]) -> _Prepared | None:
        """Every rank calls it (members work, the others join the agreements): the cell built and
        gated, or None once every pending direction has its row (refused, failed, wrong)."""
        config = self.config
        if cell.cp_size > self.world_size:
            for d in pending:
                self._write(cell, d, "unsupported",
                            f"{NEEDS_RANKS} {cell.cp_size}, this launch has WORLD_SIZE="
                            f"{self.world_size}")
            return None
        triple = (cell.strategy.label, cell.mask_label, cell.cp_size)
        for d, msg in self.gated.get(triple, {}).items():  # failed the gate at a smaller seqlen
            if d in pending:
                self._write(cell, d, "wrong", msg)
                pending = [x for x in pending if x != d]
        if not pending:
            return None
        refused = supports_failure(  # the same on every rank: no agreement needed
            lambda: cell.strategy.load().supports(cell.mask, cell.shapes.num_heads_q,
                                                  cell.shapes.num_heads_kv, cell.cp_size,
                                                  **dict(cell.strategy.knobs)))
        if refused is not None:
            for d in pending:
                self._write(cell, d, *refused)
            return None
        state, remaining, verdict = _State(), list(pending), None
        before = allocated_gb(self.device)
        gate_now = config.gate.enabled and triple not in self.gated
        outcome = self._phase(cell, lambda: self._build(cell, state, gate_now))
        if outcome.status == "ok" and gate_now:
            outcome = self._phase(cell, lambda: self._gate(cell, state))
            state.inputs = state.gate_dout = None
            if outcome.status == "ok":
                verdict = self._share_verdict(state)
                wrong = [d for d in config.directions if verdict.status(d) == "wrong"]
                # later seqlens of this (strategy, mask, cp_size) inherit the verdict
                self.gated[triple] = {d: verdict.message(d) for d in wrong}
                for d in wrong:
                    if d in remaining:
                        self._write(cell, d, "wrong", verdict.message(d))
                        remaining.remove(d)
        state.inputs = state.gate_dout = None
        free_memory(self.device)
        if outcome.status != "ok":
            for d in remaining:
                self._write(cell, d, outcome.status, self._oom_note(outcome))
            remaining = []
        if not remaining:
            del state
            free_memory(self.device)
            return None
        state.resident_gb = allocated_gb(self.device) - before
        return _Prepared(cell, state, remaining, verdict)

    def _measure(self, prepared: list[_Prepared], rounds: int,
                 started: float | None = None) -> None:
        """Time the prepared cells' directions in turn, ``rounds`` times over; a direction's row
        is written once its last round is timed (the median over its rounds; peak, bytes and
        hidden communication: the max over them), so a cut run keeps it. Where ``time_limit_s``
        leaves no time for the next round, every live cell's rows are written with the rounds
        done. A cell whose timing fails is dropped from later rounds; its directions not timed
        in every round get the failure's row. ``started``: when the point's builds began."""
        try:
            for done in range(1, rounds + 1):
                round_start = time.monotonic()
                live = [p for p in prepared if p.failure is None]
                resident = sum(p.state.resident_gb for p in live)
                for p in live:
                    others = resident - p.state.resident_gb  # 0 for a lone strategy
                    for direction in p.remaining:
                        outcome = self._phase(p.cell, lambda: self._time(p.state, direction,
                                                                          others), num_values=4)
                        if outcome.status != "ok":
                            p.failure = outcome
                            break
                        p.values.setdefault(direction, []).append(outcome.values)
                        if done == rounds:
                            self._write_timed(p, direction)
                if done == 1 and started is not None:
                    self.point_s = time.monotonic() - started
                if done < rounds and self._out_of_time(time.monotonic() - round_start):
                    for p in prepared:
                        if p.failure is None:
                            for direction in p.remaining:
                                self._write_timed(p, direction, rounds_done=done)
                    break
            for p in prepared:
                for direction in p.remaining:
                    if direction not in p.written:
                        self._write(p.cell, direction, p.failure.status,
                                    self._oom_note(p.failure))
        finally:
            for p in prepared:
                p.state = None
            free_memory(self.device)

    def _oom_note(self, outcome: _Outcome) -> str:
        """An oom's message says where interleaving kept the cell's other strategies allocated."""
        if outcome.status == "oom" and self.config.hardware.rounds > 1:
            return (f"{outcome.message} (hardware.rounds={self.config.hardware.rounds}: the "
                    f"other strategies of this cell stayed allocated; rounds=1 frees each first)")
        return outcome.message

    def _write_timed(self, p: _Prepared, direction: str, rounds_done: int | None = None) -> None:
        """``rounds_done``: the rounds timed where ``time_limit_s`` stopped them early."""
        p.written.add(direction)
        values = p.values[direction]
        runtime = statistics.median(v[0] for v in values)
        peak, sent, hidden = (max(v[i] for v in values) for i in (1, 2, 3))
        gate_msg = p.verdict.message(direction) if p.verdict is not None else ""
        notes = [gate_msg, f"comm_bytes_per_rank={int(sent)}", p.state.notes]
        if rounds_done is not None:
            notes.append(f"rounds_done={rounds_done} (time_limit_s)")
        if hidden > 0:  # measured; the largest over the ranks
            notes.append(f"hidden_comm_ms={hidden - 1.0:.3f}")
        self._write(p.cell, direction, "ok", "; ".join(n for n in notes if n), runtime,
                    peak if self.device.type == "cuda" else None, p.state.build_ms)

    def _mask_phase(self, choice: MaskChoice, seqlen: int) -> tuple[Mask | None, str]:
        """Build the mask on every rank (deterministic) and agree on success."""
        box: dict = {}

        def build():
            box["mask"] = cell_mask(choice, seqlen, self.config.data,
                                    self.config.hardware.num_heads_kv)
        outcome = self._agree(_run_phase(True, build))
        return box.get("mask") if outcome.status == "ok" else None, outcome.message

    def run(self) -> list[ResultRow]:
        config = self.config
        grid = [(n, p, m) for n in config.seqlen_per_gpu for p in config.cp_sizes
                for m in config.masks]
        total = len(grid) * len(config.strategies) * len(config.directions)
        bar = tqdm(total=total, desc="cp cells", unit="cell",
                   disable=not config.progress or self.rank != 0)
        try:
            self._run_grid(grid, bar)
        finally:  # also on Ctrl-C, so the entry point's last line starts on a line of its own
            bar.close()
        if self.skipped and self.rank == 0:
            log.warning("time_limit_s=%g: %d (seqlen, cp_size, mask) points not started; a "
                        "rerun measures them", self.config.time_limit_s, self.skipped)
        dist.barrier()
        return self.rows

    def _run_grid(self, grid: list[tuple[int, int, MaskChoice]], bar: tqdm) -> None:
        config = self.config
        for seqlen_per_gpu, cp_size, choice in grid:
            seqlen = seqlen_per_gpu * cp_size
            shapes = config.shapes(seqlen)
            cells = [_Cell(s, choice.label, None, seqlen_per_gpu, cp_size, shapes)
                     for s in config.strategies]
            todo = [(c, [d for d in config.directions if self._key(c, d) not in self.done])
                    for c in cells]
            todo = [(c, pending) for c, pending in todo if pending]
            if todo and self._out_of_time(self.point_s):
                self.skipped += 1
                todo = []
            if todo:
                mask, error = self._mask_phase(choice, seqlen)
                for cell, pending in todo:
                    cell.mask = mask
                    if mask is None:
                        for d in pending:
                            self._write(cell, d, "error", f"mask: {error}")
                if mask is None:
                    bar.update(len(config.directions) * len(todo))
                else:
                    self._run_point(todo, bar)
            bar.update(len(config.directions) * (len(cells) - len(todo)))
            self.ref_cache.clear()


def run_sweep(config: CPBenchConfig) -> list[ResultRow]:
    """Run the CP sweep of ``config`` on every rank (collective); rank 0 appends rows to
    ``config.out_file`` as they are measured and, with ``report``, draws the CP figures and the
    MagiAttention ratio tables of those rows under ``<plots_dir>/cp``.

    Returns:
        The rows written by this call (rank 0; other ranks get []).

    Raises:
        ValueError: torch.distributed not initialised, a CUDA preset without CUDA.
        SweepInterrupted: Ctrl-C; it carries the number of rows written (rank 0).

    Example:
        >>> created = init_distributed(config.hardware.device)
        >>> rows = run_sweep(config)   # config: CPBenchConfig
    """
    runner = CPRunner(config)
    try:
        rows = runner.run()
    except KeyboardInterrupt:
        raise SweepInterrupted(len(runner.rows), config.out_file) from None
    if config.report and dist.get_rank() == 0 and config.plots_dir is not None \
            and config.out_file.exists():
        from .plot import plot_cp_results, write_ratios
        # this run's rows only: other files in the folder are other experiments (bench.report)
        plot_cp_results(config.out_file, config.plots_dir / "cp")
        write_ratios(config.out_file, config.plots_dir / "cp")
    return rows
