"""Schedule composition: run every rank's program against the rate and link models.

Each rank has one compute stream (its ``Kernel`` and ``Memory`` ops, back to back, each as long
as the rate model says) and posts communication that runs beside it. A post happens when the
compute stream reaches it (PyTorch makes the communication stream wait for the work issued
before), and a ``Wait`` holds the compute stream until the posted work is done. What overlaps
what therefore follows from each strategy's own order of posts, kernels and waits: a ring
step's KV exchange beside the step's kernel, MagiAttention's cast of stage j + 1 beside stage
j's kernel, Ulysses' blocking all-to-alls before and after its kernel.

A point-to-point message starts when both its sender and its receiver have posted it
(messages of one (sender, receiver, tag) channel match in order, as NCCL's and gloo's do) and
lasts ``Topology.p2p_us``; a collective starts when every member of its group has posted it and
lasts the link model's time for its kind and bytes. The step ends when the last rank's program
does: the runner times each rank and reports the slowest, as here.

    timeline = simulate(programs, kernel_us, memory_us, links, topology)
    timeline.step_us, timeline.exposed_us
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

from .links import LinkModel, Topology
from .ops import ALL_TO_ALL, Collective, Kernel, Memory, P2P, Program, Wait

__all__ = ["Timeline", "simulate"]


@dataclass(frozen=True)
class Timeline:
    """Per rank: when its program ends and how long its compute stream was busy (us)."""

    finish_us: tuple[float, ...]
    compute_us: tuple[float, ...]

    @property
    def step_us(self) -> float:
        return max(self.finish_us, default=0.0)

    @property
    def slowest_rank(self) -> int:
        return max(range(len(self.finish_us)), key=lambda r: self.finish_us[r])

    @property
    def exposed_us(self) -> float:
        """Time the slowest rank's compute stream waited for communication (or for peers)."""
        r = self.slowest_rank
        return self.finish_us[r] - self.compute_us[r]


class _Links:
    """Matching and timing of posted communication, shared by all ranks of one simulation."""

    def __init__(self, links: LinkModel, topology: Topology) -> None:
        self.links, self.topology = links, topology
        self.done: dict[tuple, float] = {}  # transfer key -> finish time
        self._p2p: dict[tuple, dict] = defaultdict(dict)
        self._posted: dict[tuple, int] = defaultdict(int)
        self._collectives: dict[tuple, dict[int, tuple[float, Collective]]] = defaultdict(dict)

    def post_p2p(self, rank: int, op: P2P, now: float) -> list[tuple]:
        keys = []
        for side, peers in (("send", op.sends), ("recv", op.recvs)):
            for peer, nbytes in peers:
                channel = (rank, peer, op.tag) if side == "send" else (peer, rank, op.tag)
                index = self._posted[channel, side]
                self._posted[channel, side] += 1
                key = ("p2p", channel, index)
                self._p2p[key][side] = (now, nbytes)
                self._resolve_p2p(key)
                keys.append(key)
        return keys

    def _resolve_p2p(self, key: tuple) -> None:
        ends = self._p2p[key]
        if "send" in ends and "recv" in ends:
            (t_send, nbytes), (t_recv, _) = ends["send"], ends["recv"]
            src, dst, _ = key[1]
            self.done[key] = max(t_send, t_recv) + self.topology.p2p_us(self.links, src, dst,
                                                                        nbytes)
            del self._p2p[key]

    def post_collective(self, rank: int, op: Collective, now: float) -> list[tuple]:
        if rank not in op.group:
            raise ValueError(f"rank {rank} posts a {op.kind} on group {op.group} without it")
        index = self._posted[("collective", op.group), rank]
        self._posted[("collective", op.group), rank] += 1
        key = ("collective", op.group, index)
        self._collectives[key][rank] = (now, op)
        if len(self._collectives[key]) == len(op.group):
            posts = self._collectives.pop(key)
            start = max(t for t, _ in posts.values())
            self.done[key] = start + self._duration(posts)
        return [key]

    def _duration(self, posts: dict[int, tuple[float, Collective]]) -> float:
        ops = {rank: op for rank, (_, op) in posts.items()}
        kinds = {op.kind for op in ops.values()}
        if len(kinds) != 1:
            raise ValueError(f"ranks post different collectives on one group: {sorted(kinds)}")
        first = next(iter(ops.values()))
        if first.kind == ALL_TO_ALL:
            sent = {rank: dict(op.sends) for rank, op in ops.items()}
            return self.topology.all_to_all_us(self.links, sent)
        block = max(op.block_bytes for op in ops.values())
        return self.topology.ring_collective_us(self.links, first.group, block)


def simulate(programs: list[Program], kernel_us: Callable[[Kernel], float],
             memory_us: Callable[[Memory], float], links: LinkModel, topology: Topology
             ) -> Timeline:
    """Run every rank's program to its end; see the module doc.

    Raises:
        RuntimeError: the programs deadlock (a wait whose peer never posts): a builder's bug.
    """
    n = len(programs)
    pc, now, busy = [0] * n, [0.0] * n, [0.0] * n
    handles: list[dict[str, list[tuple]]] = [{} for _ in range(n)]
    comm = _Links(links, topology)
    remaining = sum(len(p) for p in programs)
    while remaining:
        progressed = 0
        for rank, program in enumerate(programs):
            while pc[rank] < len(program):
                op = program[pc[rank]]
                if isinstance(op, (Kernel, Memory)):
                    spent = kernel_us(op) if isinstance(op, Kernel) else memory_us(op)
                    now[rank] += spent
                    busy[rank] += spent
                elif isinstance(op, P2P):
                    handles[rank][op.handle] = comm.post_p2p(rank, op, now[rank])
                elif isinstance(op, Collective):
                    handles[rank][op.handle] = comm.post_collective(rank, op, now[rank])
                elif isinstance(op, Wait):
                    keys = handles[rank].get(op.handle)
                    if keys is None:
                        raise RuntimeError(f"rank {rank} waits for {op.handle!r}, never posted")
                    if not all(k in comm.done for k in keys):
                        break
                    now[rank] = max([now[rank]] + [comm.done[k] for k in keys])
                    del handles[rank][op.handle]
                else:
                    raise TypeError(f"unknown op {op!r}")
                pc[rank] += 1
                progressed += 1
        if not progressed:
            stuck = {r: programs[r][pc[r]] for r in range(n) if pc[r] < len(programs[r])}
            raise RuntimeError(f"programs deadlock; ranks waiting: {stuck}")
        remaining -= progressed
    return Timeline(tuple(now), tuple(busy))
