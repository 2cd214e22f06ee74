"""RingComm: one send to the next rank and one receive from the previous, in flight together."""
from __future__ import annotations

import torch
import torch.distributed as dist

from ._stats import CommStats, comm_range, nbytes


class RingComm:
    """Non-blocking send/receive along a ring, overlapped with compute by the caller.

    ``send_recv`` queues a send of ``to_send`` to ``next_rank`` and a receive of a tensor of
    ``recv_shape`` from ``prev_rank``; ``commit`` starts them; ``wait`` finishes them and returns
    the received tensor. Misuse (send_recv twice, commit with nothing queued, wait with nothing
    in flight) raises RuntimeError instead of deadlocking later. Ranks are global ranks; ``tag``
    keeps two rings between the same pair of ranks apart on gloo (NCCL matches in issue order).
    """

    def __init__(self, group, next_rank: int, prev_rank: int, tag: int, stats: CommStats,
                 direction: str, name: str = "ring") -> None:
        self.group, self.next_rank, self.prev_rank, self.tag = group, next_rank, prev_rank, tag
        self.stats, self.direction, self.name = stats, direction, name
        self._ops: list = []
        self._reqs = None
        self._recv = None

    def send_recv(self, to_send: torch.Tensor, recv_shape) -> None:
        if self._ops or self._reqs is not None:
            raise RuntimeError(f"{self.name}: send_recv while a previous exchange is not waited")
        to_send = to_send.contiguous()
        self._recv = torch.empty(recv_shape, dtype=to_send.dtype, device=to_send.device)
        self._ops = [dist.P2POp(dist.isend, to_send, self.next_rank, self.group, self.tag),
                     dist.P2POp(dist.irecv, self._recv, self.prev_rank, self.group, self.tag)]
        self._sent = nbytes(to_send)

    def commit(self) -> None:
        if not self._ops:
            raise RuntimeError(f"{self.name}: commit without send_recv")
        if self._reqs is not None:
            raise RuntimeError(f"{self.name}: commit while an exchange is in flight")
        with comm_range(f"{self.name} send", self._sent, self._recv.device):
            self._reqs = dist.batch_isend_irecv(self._ops)
        self.stats.add(self.direction, self._sent)
        self._ops = []

    def wait(self) -> torch.Tensor:
        if self._reqs is None:
            raise RuntimeError(f"{self.name}: wait without commit")
        for req in self._reqs:
            req.wait()
        self._reqs = None
        recv, self._recv = self._recv, None
        return recv

    def exchange(self, to_send: torch.Tensor, recv_shape) -> None:
        """send_recv + commit."""
        self.send_recv(to_send, recv_shape)
        self.commit()
