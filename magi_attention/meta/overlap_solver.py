"""Overlap solver: how many remote stages to cut the KV exchange into.

A simple cost model, per rank: the host stage computes while stage 1's KV arrives; stage j's
compute waits for its KV; the comm of stage j + 1 runs during the compute of stage j. More
stages hide more communication but pay a fixed overhead each (launch, synchronisation, smaller
kernels). The solver simulates 1..max_stages equal stages for the slowest rank and picks the
fewest stages within ``tolerance`` of the best predicted time.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OverlapConfig:
    """num_stages: a fixed stage count, or None to let the cost model choose (1..max_stages).

    The rates are coarse defaults for an H100/H200 with NVLink; only their ratios matter.
    """

    num_stages: int | None = None
    max_stages: int = 8
    compute_tflops: float = 400.0        # attention forward throughput, TFLOPs/s
    comm_gb_per_s: float = 100.0         # per-rank all-to-all bandwidth, GB/s
    stage_overhead_us: float = 30.0      # fixed cost per extra stage (comm + kernel launch)
    tolerance: float = 0.02              # prefer fewer stages within 2% of the best

    def __post_init__(self) -> None:
        if self.num_stages is not None and self.num_stages < 1:
            raise ValueError(f"num_stages must be >= 1 or None, got {self.num_stages}")
        if self.max_stages < 1:
            raise ValueError(f"max_stages must be >= 1, got {self.max_stages}")
        for name in ("compute_tflops", "comm_gb_per_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class RankCost:
    """One rank's work: host-stage area, remote-stage area (cells) and remote KV bytes."""

    host_area: float
    remote_area: float
    remote_bytes: float


def predicted_time_us(cost: RankCost, num_stages: int, flops_per_cell: float,
                      config: OverlapConfig) -> float:
    """Makespan of host + num_stages equal remote stages with comm prefetched one stage ahead."""
    compute_us = lambda area: area * flops_per_cell / (config.compute_tflops * 1e6)
    comm_us = cost.remote_bytes / num_stages / (config.comm_gb_per_s * 1e3) + config.stage_overhead_us
    stage_compute = compute_us(cost.remote_area / num_stages) + config.stage_overhead_us
    comm_done = 0.0
    compute_done = compute_us(cost.host_area)
    for _ in range(num_stages):
        comm_done += comm_us  # comm runs back to back on its own stream
        compute_done = max(compute_done, comm_done) + stage_compute
    return compute_done


def choose_num_stages(costs: list[RankCost], flops_per_cell: float, config: OverlapConfig) -> int:
    """The stage count for the whole group (every rank must run the same collectives)."""
    if config.num_stages is not None:
        return config.num_stages
    if not any(c.remote_bytes for c in costs):
        return 1
    times = [max(predicted_time_us(c, n, flops_per_cell, config) for c in costs)
             for n in range(1, config.max_stages + 1)]
    best = min(times)
    return next(n for n, t in enumerate(times, start=1) if t <= best * (1 + config.tolerance))
