"""GroupCollectiveArgs: what one rank sends and receives in one group_cast (or its reverse,
group_reduce). Ranges are half-open ``[start, end)`` token ranges of the rank's local buffer."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass(frozen=True)
class GroupCollectiveArgs:
    """One rank's side of a group_cast over a group of ``len(send_split_sizes)`` ranks.

    send_ranges: int64 [num_ranges, 2], local token ranges gathered in this order and sent,
        ``send_split_sizes[d]`` tokens to group rank d (ranges grouped by destination, in rank order).
    recv_split_sizes: tokens received from each group rank; the received buffer is their
        concatenation in rank order.
    group_reduce is the transpose: it sends ``recv_split_sizes`` back and sums what it receives
    into ``send_ranges``.
    """

    send_ranges: np.ndarray
    send_split_sizes: tuple[int, ...]
    recv_split_sizes: tuple[int, ...]
    _index_cache: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        lens = self.send_ranges[:, 1] - self.send_ranges[:, 0] if len(self.send_ranges) else []
        if int(np.sum(lens)) != sum(self.send_split_sizes):
            raise ValueError(f"send_ranges hold {int(np.sum(lens))} tokens but send_split_sizes "
                             f"sum to {sum(self.send_split_sizes)}")
        if len(self.send_split_sizes) != len(self.recv_split_sizes):
            raise ValueError("send_split_sizes and recv_split_sizes must have one entry per rank")

    @property
    def send_seqlen(self) -> int:
        return sum(self.send_split_sizes)

    @property
    def recv_seqlen(self) -> int:
        return sum(self.recv_split_sizes)

    @property
    def sends_each_token_once(self) -> bool:
        """No local token is in two send ranges (so group_reduce adds at most one partial into
        each row: a plain add, no atomics, no fp32 accumulator needed)."""
        if "once" not in self._index_cache:
            r = self.send_ranges[np.argsort(self.send_ranges[:, 0], kind="stable")] \
                if len(self.send_ranges) else self.send_ranges.reshape(0, 2)
            self._index_cache["once"] = bool(np.all(r[1:, 0] >= r[:-1, 1]))
        return self._index_cache["once"]

    def send_index(self, device) -> torch.Tensor:
        """Local token index of each sent token, int64 [send_seqlen], built once per device."""
        key = str(device)
        if key not in self._index_cache:
            self._index_cache[key] = torch.from_numpy(ranges_to_index(self.send_ranges)).to(device)
        return self._index_cache[key]


def ranges_to_index(ranges: np.ndarray) -> np.ndarray:
    """[[s0, e0], [s1, e1], ...] -> [s0, .., e0 - 1, s1, .., e1 - 1] (int64)."""
    ranges = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    lens = ranges[:, 1] - ranges[:, 0]
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(ranges[:, 0] - (np.cumsum(lens) - lens), lens)
    return starts + np.arange(total, dtype=np.int64)
