"""Overlap solver: whether and how to hide the remote KV exchange behind computation.

Two ways to run a rank's remote keys (one cost model, per rank, forward + backward):

- fused: one stage; ONE kernel runs over ``[own KV | received KV]``, with no partial-result
  merge: the right choice when the link is fast and the cast small (NVLink, cp 2). The backward
  reuses the forward's buffer (no second cast). Cut by rows (``fused_split``), the kernel of the
  rows that read no received key runs while the cast is in flight (forward) and while the
  remote dK/dV go back (backward), hiding up to its own time; else the communication is exposed.
- staged (``num_stages`` >= 1): the host stage computes while stage 1's KV arrives; stage j + 1
  is prefetched while stage j computes; each stage's partial output is merged by lse (forward)
  and its dq added (backward), a pass over q-sized tensors that is not free (~10 bytes per
  element of q at bf16); the backward's last group_reduce of dK/dV is exposed.

The solver predicts both for 1..max_stages stages on the slowest rank and takes the fastest,
preferring fused, then fewer stages, within ``tolerance``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .fused_split import MIN_LOCAL_SHARE

CUT_CHOICES = ("auto", "none", "fwd", "bwd", "both")
SPLIT_CHOICES = (False, True, "none", "fwd", "bwd", "both")
BALANCE_CHOICES = ("model", "timed")
BWD_COMPUTE_FACTOR = 2.5   # backward FLOPs / forward FLOPs (FlashAttention: 2.5x)
MERGE_BYTES_PER_Q_BYTE = 5.0  # fp32 acc read + write and a bf16 partial read, per bf16 q byte


@dataclass(frozen=True)
class OverlapConfig:
    """num_stages: a fixed stage count, or None to let the cost model choose (1..max_stages).
    fused: force (True) or forbid (False) the fused single stage; None lets the model choose.

    The rates are coarse defaults for an H100/H200 with NVLink; only their ratios matter.
    """

    num_stages: int | None = None
    max_stages: int = 8
    fused: bool | None = None
    # cut the fused stage by rows (fused_split), in both directions (True or "both"), one
    # ("fwd", "bwd") or none (False or "none"). Off by default: on 2 H200s the extra launches
    # cost more than the 20-400 us of cast they hid
    split: bool | str = False
    # the fused stage cut by keys, per direction (own keys' kernel, then the received keys',
    # merged): "none", "fwd", "bwd", "both", or "auto": time both ways of each direction at key
    # time on CUDA and keep the faster (magi_attention.api._tune_cut: seconds per new mask, so
    # asked for, not the default; whole on CPU)
    cut: str = "none"
    # balanced_runs' cuts: by the cost model ("model"), or moved by each rank's kernel time
    # measured at key time on CUDA ("timed": meta.timed_balance, api._tune_balance)
    balance: str = "model"
    # the fused forward launched before the cast lands (DistAttnRuntime.early_start, turned on
    # by the key): the fused buffer is then laid out so the cast lands in one region where
    # global key order would split it (rank order; at cp 2 always one region), as the early
    # path needs. Not with FA4, whose native varlen forms want global order (and which has no
    # early path)
    early_start: bool = False
    # the Triton forwards that run while a collective is in flight (the cut forward's own keys,
    # the row split's local rows, the staged forward's host stage and each stage while the next
    # cast travels) fetch their items from a counter (the Gluon forward's dynamic grid) instead
    # of striding over them: the cast's NCCL kernel holds whole SMs for as long as it travels,
    # and under one hardware queue it reaches them first, so a strided persistent grid's
    # programs on those SMs, and the kernel, end that late. On by default: 2 x H200, Triton,
    # causal 16k cp 2, the key then takes the forward cut and the forward runs 1-4% faster in 5
    # of 5 launches (cells where no forward runs beside a collective are the same code)
    dynamic_grid: bool = True
    compute_tflops: float = 450.0        # attention forward throughput, TFLOPs/s
    comm_gb_per_s: float = 150.0         # per-rank all-to-all bandwidth, GB/s
    hbm_gb_per_s: float = 3000.0         # memory bandwidth of elementwise passes, GB/s
    stage_overhead_us: float = 30.0      # fixed cost per stage (comm + kernel launch)
    tolerance: float = 0.02              # prefer fused / fewer stages within 2% of the best

    def __post_init__(self) -> None:
        if self.num_stages is not None and self.num_stages < 1:
            raise ValueError(f"num_stages must be >= 1 or None, got {self.num_stages}")
        if self.max_stages < 1:
            raise ValueError(f"max_stages must be >= 1, got {self.max_stages}")
        if self.cut not in CUT_CHOICES:
            raise ValueError(f"cut must be one of {CUT_CHOICES}, got {self.cut!r}")
        if self.balance not in BALANCE_CHOICES:
            raise ValueError(f"balance must be one of {BALANCE_CHOICES}, got {self.balance!r}")
        if self.split not in SPLIT_CHOICES:
            raise ValueError(f"split must be one of {SPLIT_CHOICES}, got {self.split!r}")
        if self.fused and self.num_stages not in (None, 1):
            raise ValueError(f"fused runs one stage; got num_stages={self.num_stages}")
        for name in ("compute_tflops", "comm_gb_per_s", "hbm_gb_per_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")

    @property
    def split_directions(self) -> frozenset[str]:
        """The directions ("fwd", "bwd") whose fused stage is cut by rows."""
        return split_directions(self.split)


def split_directions(split: bool | str) -> frozenset[str]:
    """``OverlapConfig.split`` as the set of directions it cuts by rows."""
    if split is True or split == "both":
        return frozenset({"fwd", "bwd"})
    if split in ("fwd", "bwd"):
        return frozenset({split})
    return frozenset()


@dataclass(frozen=True)
class RankCost:
    """One rank's work: host-stage area, remote-stage area (cells), the KV bytes its cast moves
    (the larger of received and sent: ``solver.rank_costs``), the
    bytes of its q shard (what a merge pass reads and writes) and the area of its rows that
    read no remote key (what the fused stage cut by rows runs while communicating)."""

    host_area: float
    remote_area: float
    remote_bytes: float
    q_bytes: float = 0.0
    local_rows_area: float = 0.0


@dataclass(frozen=True)
class StagePlan:
    """The solver's choice and what it predicts for the slowest rank (fwd + bwd, us)."""

    num_stages: int
    fused: bool
    predicted_us: float = 0.0
    comm_us: float = 0.0      # communication time of fwd + bwd (casts and reduces)
    exposed_us: float = 0.0   # of which not hidden behind computation
    split: bool = False       # the fused stage is cut by rows where that pays (fused_split)

    @property
    def hidden_us(self) -> float:
        return max(0.0, self.comm_us - self.exposed_us)


def _rates(cost: RankCost, flops_per_cell: float, config: OverlapConfig):
    compute = lambda area: area * flops_per_cell / (config.compute_tflops * 1e6)  # noqa: E731
    comm = cost.remote_bytes / (config.comm_gb_per_s * 1e3)
    merge = cost.q_bytes * MERGE_BYTES_PER_Q_BYTE / (config.hbm_gb_per_s * 1e3)
    return compute, comm, merge


def predicted_fused_us(cost: RankCost, flops_per_cell: float, config: OverlapConfig
                       ) -> tuple[float, float, float]:
    """(time, comm, exposed) of the fused single stage: cast, one kernel; backward: one kernel
    on the forward's buffer, reduce of the remote dK/dV; the local rows' kernel (where the
    split pays: ``fused_split.MIN_LOCAL_SHARE``) hides each up to its own time."""
    compute, comm, _ = _rates(cost, flops_per_cell, config)
    area = cost.host_area + cost.remote_area
    split = config.split_directions
    local = cost.local_rows_area if (split and
                                     cost.local_rows_area >= MIN_LOCAL_SHARE * area) else 0.0
    exposed = calls = 0.0
    for direction, factor in (("fwd", 1.0), ("bwd", BWD_COMPUTE_FACTOR)):
        cut = bool(local) and direction in split
        exposed += max(0.0, comm - factor * compute(local)) if cut else comm
        calls += 2 if cut else 1  # the local rows' call and at least one block's
    time = exposed + (1 + BWD_COMPUTE_FACTOR) * compute(area) + calls * config.stage_overhead_us
    return time, 2 * comm, exposed


def predicted_time_us(cost: RankCost, num_stages: int, flops_per_cell: float,
                      config: OverlapConfig) -> float:
    """Makespan of the staged forward and backward with ``num_stages`` equal remote stages."""
    return _staged(cost, num_stages, flops_per_cell, config)[0]


def _staged(cost: RankCost, n: int, flops_per_cell: float, config: OverlapConfig):
    compute, comm, merge = _rates(cost, flops_per_cell, config)
    stage_comm = comm / n + config.stage_overhead_us
    total, exposed = 0.0, 0.0
    for factor, reduces in ((1.0, False), (BWD_COMPUTE_FACTOR, True)):
        stage_compute = factor * compute(cost.remote_area / n) + merge + config.stage_overhead_us
        comm_done, compute_done, reduce_done = 0.0, factor * compute(cost.host_area), 0.0
        for _ in range(n):
            comm_done += stage_comm  # casts run back to back on their own stream
            exposed += max(0.0, comm_done - compute_done)
            compute_done = max(compute_done, comm_done) + stage_compute
            if reduces:  # this stage's dK/dV go back while the next stage computes
                reduce_done = max(reduce_done, compute_done) + stage_comm
        end = max(compute_done, reduce_done)
        exposed += end - compute_done  # the last reduce
        total += end
    return total, 3 * comm, exposed


def choose_stage_plan(costs: list[RankCost], flops_per_cell: float, config: OverlapConfig
                      ) -> StagePlan:
    """The stage plan for the whole group (every rank must run the same collectives)."""
    if not any(c.remote_bytes for c in costs):
        return StagePlan(1, False)

    def worst(fn):
        return max((fn(c) for c in costs), key=lambda r: r[0])

    options: list[StagePlan] = []  # in order of preference
    if config.fused is not False and config.num_stages in (None, 1):
        t, c, e = worst(lambda cost: predicted_fused_us(cost, flops_per_cell, config))
        options.append(StagePlan(1, True, t, c, e, split=bool(config.split_directions)))
    if not config.fused:
        counts = [config.num_stages] if config.num_stages else range(1, config.max_stages + 1)
        for n in counts:
            t, c, e = worst(lambda cost: _staged(cost, n, flops_per_cell, config))
            options.append(StagePlan(n, False, t, c, e))
    best = min(p.predicted_us for p in options)
    return next(p for p in options if p.predicted_us <= best * (1 + config.tolerance))


def choose_num_stages(costs: list[RankCost], flops_per_cell: float, config: OverlapConfig) -> int:
    """The stage count of ``choose_stage_plan`` (1 for the fused plan)."""
    return choose_stage_plan(costs, flops_per_cell, config).num_stages
