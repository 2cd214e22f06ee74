"""Where the fused kernel's KV buffer puts each own run and each received range of one rank.

Global key order (every piece placed by its global start) keeps a document's keys in one piece
when its rows are cut between ranks, so FA4 runs the rank's mask as a native varlen staircase.
That costs one block copy per own run that is not where the local shard has it, and one per
received piece when the cast's buffer (sources in rank order, each source's ranges by global
start) does not land in one region. With more than ``MAX_COPIES`` such copies (scattered chunks,
min_heap) the buffer is in rank order instead, ``[received from lower ranks | own | received
from higher ranks]``, which costs at most two. For one contiguous run per rank both orders are
the same buffer. Everything here is planned once; a call only slices with the ints recorded.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_COPIES = 8  # block copies per call that global order may cost (each a small launch)

Copy = tuple[int, int, int]  # (source offset, buffer offset, tokens)


@dataclass(frozen=True)
class FusedLayout:
    """``own_copies``: local shard -> buffer, by local offset; ``recv_copies``: the cast's
    buffer -> buffer, by received offset (both cover their source once, in order, so the
    backward reads the same lists to gather dK/dV back). ``own_at`` / ``recv_at``: the offset
    where that side is one piece in source order, else None: the cast then writes the received
    part in place, and the backward reads the own part's dK/dV as a view (the forward writes
    k and v into the own runs either way, while the cast is in flight). ``runs``: the buffer's
    key runs (global start, global end, buffer offset) sorted by global start, for mapping
    slices onto it."""

    size: int
    own_copies: tuple[Copy, ...]
    recv_copies: tuple[Copy, ...]
    runs: np.ndarray

    @property
    def own_at(self) -> int | None:
        return _in_place(self.own_copies, self.size)

    @property
    def recv_at(self) -> int | None:
        return _in_place(self.recv_copies, self.size)

    @property
    def num_copies(self) -> int:
        """Block copies a step makes beyond one write per side: the own runs' where the own part
        is not one piece (the backward gathers their dK/dV back), the received pieces' where the
        cast does not land in one region."""
        return sum(len(c) for c in (self.own_copies, self.recv_copies) if _in_place(c, 0) is None)


def _in_place(copies: tuple[Copy, ...], empty_at: int) -> int | None:
    if not copies:
        return empty_at
    return copies[0][1] if len(copies) == 1 else None


def plan_fused_layout(own: np.ndarray, recv: np.ndarray, recv_src: np.ndarray, rank: int
                      ) -> FusedLayout:
    """own: [n, 3] (global start, end, local offset); recv: [m, 3] (global start, end, offset
    in the cast's buffer), recv_src: the source rank of each received range. Global order when
    it costs at most MAX_COPIES copies, else rank order."""
    own, recv = own.reshape(-1, 3), recv.reshape(-1, 3)
    layout = _place(own, recv, np.concatenate([own[:, 0], recv[:, 0]]))
    if layout.num_copies <= MAX_COPIES:
        return layout
    group = np.concatenate([np.full(len(own), rank), recv_src])  # sources in rank order
    return _place(own, recv, np.concatenate([own[:, 2], recv[:, 2]]) + group * (1 << 42))


def _place(own: np.ndarray, recv: np.ndarray, key: np.ndarray) -> FusedLayout:
    """Pieces laid out back to back by increasing ``key``."""
    pieces = np.concatenate([own, recv])
    lens = pieces[:, 1] - pieces[:, 0]
    order = np.argsort(key, kind="stable")
    at = np.empty(len(pieces), dtype=np.int64)
    at[order] = np.cumsum(lens[order]) - lens[order]
    n = len(own)
    return FusedLayout(int(lens.sum()), _joined(own[:, 2], at[:n], lens[:n]),
                       _joined(recv[:, 2], at[n:], lens[n:]),
                       _key_runs(pieces[:, 0], pieces[:, 1], at))


def _joined(src: np.ndarray, dst: np.ndarray, lens: np.ndarray) -> tuple[Copy, ...]:
    """(src, dst, len) by src, pieces that continue each other on both sides as one copy."""
    order = np.argsort(src, kind="stable")
    src, dst, lens = src[order], dst[order], lens[order]
    out: list[list[int]] = []
    for s, d, m in zip(src.tolist(), dst.tolist(), lens.tolist()):
        if m == 0:
            continue
        if out and out[-1][0] + out[-1][2] == s and out[-1][1] + out[-1][2] == d:
            out[-1][2] += m
        else:
            out.append([s, d, m])
    return tuple(tuple(c) for c in out)


def _key_runs(start: np.ndarray, end: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Sorted by global start; runs that continue each other in global and buffer order joined
    (so a document's keys stay one run)."""
    runs = np.stack([start, end, at], axis=1)
    runs = runs[np.argsort(start, kind="stable")]
    if len(runs) == 0:
        return runs.reshape(0, 3)
    new = np.ones(len(runs), dtype=bool)
    new[1:] = (runs[1:, 0] != runs[:-1, 1]) | (runs[1:, 2] != runs[:-1, 2] + runs[:-1, 1]
                                               - runs[:-1, 0])
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(runs)) - 1
    return np.stack([runs[first, 0], runs[last, 1], runs[first, 2]], axis=1)
