"""A strategy's step as one program per rank, and what it computes and moves (areas, bytes).

The program of a rank lists, in the order its code issues them, the work of one forward or one
backward: local attention calls (``Kernel``: the exact local mask), elementwise passes over
HBM (``Memory``: merges, casts, copies), and communication, posted (``P2P``: one
``batch_isend_irecv`` of a ring step; ``Collective``: all-to-all, all-gather, reduce-scatter)
and later waited for (``Wait``). Every op carries the stage it belongs to ("ring step 2",
"cast stage 1", ...). The builders (``bench.cp.predict.baselines``, ``bench.cp.predict.magi``)
write these from the strategies' own layouts and plans; ``bench.cp.predict.schedule`` runs
them against the link and rate models; ``work_summary`` sums them per rank.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from magi_attention.common.slice_array import SliceArray
from magi_attention.kernels.block_sparse import union_row_intervals
from magi_attention.kernels.plan import FlexAttnPlan

from .links import Topology
from .tiles import CACHE_SIZE, mask_key

__all__ = ["Kernel", "Memory", "P2P", "Collective", "Wait", "Op", "Program", "RankWork",
           "union_area", "work_summary", "ALL_TO_ALL", "ALL_GATHER", "REDUCE_SCATTER"]

ALL_TO_ALL, ALL_GATHER, REDUCE_SCATTER = "all_to_all", "all_gather", "reduce_scatter"


@dataclass(frozen=True, eq=False)
class Kernel:
    """One local attention call: ``slices`` in local coordinates over seqlen_q x seqlen_k, run
    for ``num_heads_q`` query heads."""

    slices: SliceArray
    seqlen_q: int
    seqlen_k: int
    num_heads_q: int
    stage: str = ""

    @property
    def area(self) -> int:
        return union_area(self.slices, self.seqlen_k)


@dataclass(frozen=True)
class Memory:
    """An elementwise pass on the compute stream that reads and writes ``nbytes`` of HBM."""

    nbytes: float
    what: str = ""
    stage: str = ""


@dataclass(frozen=True)
class P2P:
    """Posts this rank's sends ((dst, bytes), ...) and receives ((src, bytes), ...) of one
    batch of point-to-point ops on ``tag``; ``Wait(handle)`` ends when all of them are done."""

    handle: str
    sends: tuple[tuple[int, int], ...]
    recvs: tuple[tuple[int, int], ...]
    tag: int
    stage: str = ""


@dataclass(frozen=True)
class Collective:
    """Posts this rank's part of a collective over ``group`` (ranks in group order).

    ``sends``: (dst, bytes) this rank sends each member, as the collective's call counts them
    (an all-gather's padded block to every other member). ``block_bytes``: the per-rank block
    of a ring all-gather or reduce-scatter (ignored by all-to-all)."""

    handle: str
    kind: str
    group: tuple[int, ...]
    sends: tuple[tuple[int, int], ...]
    block_bytes: int = 0
    stage: str = ""


@dataclass(frozen=True)
class Wait:
    handle: str


Op = Kernel | Memory | P2P | Collective | Wait
Program = list[Op]


def union_area(slices: SliceArray, seqlen_k: int) -> int:
    """Cells of the union of ``slices`` (overlapping slices count once, as the kernels do)."""
    if len(slices) == 0:
        return 0
    key = mask_key(slices, 0, seqlen_k)
    if key not in _AREAS:
        if len(_AREAS) >= CACHE_SIZE:
            _AREAS.clear()
        _, lo, hi = union_row_intervals(FlexAttnPlan.bounds_of(slices), seqlen_k)
        _AREAS[key] = int((hi - lo).sum())
    return _AREAS[key]


_AREAS: dict[str, int] = {}  # by mask digest (a ring's step masks repeat over ranks)


@dataclass
class RankWork:
    """One rank's step: attention area per stage (cells, times the share of the q heads the
    rank runs them for: Ulysses' whole-sequence call on heads / cp counts 1 / cp), bytes sent
    and received per stage and link class, and its kernel calls' cells in program order."""

    area: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    sent: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    received: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    call_areas: list[int] = field(default_factory=list)

    @property
    def total_area(self) -> int:
        return sum(self.area.values())

    def sent_bytes(self, link: str | None = None) -> int:
        return sum(n for (_, c), n in self.sent.items() if link in (None, c))

    def received_bytes(self, link: str | None = None) -> int:
        return sum(n for (_, c), n in self.received.items() if link in (None, c))


def work_summary(programs: list[Program], topology: Topology, num_heads_q: int | None = None
                 ) -> list[RankWork]:
    """Per rank: areas of its kernel calls (weighed by the share of ``num_heads_q`` each runs,
    when given) and the bytes it sends and receives (a receive counted from what its peers'
    ops send it), per stage and link class."""
    works = [RankWork() for _ in programs]
    for rank, program in enumerate(programs):
        for op in program:
            if isinstance(op, Kernel):
                area = op.area
                share = op.num_heads_q / num_heads_q if num_heads_q else 1.0
                works[rank].area[op.stage] += area * share
                works[rank].call_areas.append(area)
            elif isinstance(op, (P2P, Collective)):
                for dst, nbytes in op.sends:
                    if dst == rank or nbytes == 0:
                        continue
                    link = topology.link(rank, dst)
                    works[rank].sent[op.stage, link] += int(nbytes)
                    works[dst].received[op.stage, link] += int(nbytes)
    return works


def area_of(programs: list[Program]) -> np.ndarray:
    """Total attention area of each rank's calls, int64 [cp_size]."""
    return np.array([sum(op.area for op in p if isinstance(op, Kernel)) for p in programs],
                    dtype=np.int64)
