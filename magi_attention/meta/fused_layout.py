"""Where the fused kernel's KV buffer puts each own run and each received range of one rank.

Global key order (every piece placed by its global start) keeps a document's keys in one piece
when its rows are cut between ranks, so FA4 runs the rank's mask as a native varlen staircase.
That costs one block copy per own run that is not where the local shard has it, and one per
received piece when the cast's buffer (sources in rank order, each source's ranges by global
start) does not land in one region. With more than ``MAX_COPIES`` such copies (scattered chunks,
min_heap) the buffer is in rank order instead, ``[received from lower ranks | own | received
from higher ranks]``, which costs at most two. For one contiguous run per rank both orders are
the same buffer. Everything here is planned once; a call only slices with the ints recorded.

Where a received piece sits before an own run in the buffer, that run's keys are shifted
against its rows, so every diagonal tile of its causal documents straddles two key tiles
(tile counts on the CPU: causal_document at 16k a GPU, cp 2, rank 0's fused mask
2007 forward tile pairs, 444 partial, against 1906 / 325 with its keys on its rows' grid).
So the buffer may hold a few unused keys (``pads``, zero-filled by the runtime, read by no
slice) before each segment, placed so that the segment's longest own run starts on the key
tile grid of its rows (``align``). A pad goes only where it splits nothing: at the start, or
between an own and a received piece with a gap in global keys between them (a document's keys
stay one run, the cast still lands in one region and the own runs stay one copy where they
were).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_COPIES = 8  # block copies per call that global order may cost (each a small launch)
# the kernels' key tile (FA4's and the Gluon kernels' BLOCK_N; the backward's 64-row q tiles
# divide it): the grid own runs are aligned to
KEY_TILE = 128


def key_tile_for(kernel: str | None) -> int:
    """The ``align`` of a layout for the local kernel ``kernel``: KEY_TILE, but 1 for FA4, whose
    native varlen kernels tile each document from its own start (a pad gains them nothing, and
    the row-less entries pads make in its native forms have not run on a GPU yet)."""
    return 1 if kernel == "fa4" else KEY_TILE

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
    slices onto it. ``pads``: (buffer offset, tokens) of the unused keys that align own runs
    (the module's docstring); the runtime zero-fills them (a masked key's V still enters P @ V,
    and 0 * NaN is NaN)."""

    size: int
    own_copies: tuple[Copy, ...]
    recv_copies: tuple[Copy, ...]
    runs: np.ndarray
    pads: tuple[tuple[int, int], ...] = ()

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


def plan_fused_layout(own: np.ndarray, recv: np.ndarray, recv_src: np.ndarray, rank: int,
                      align: int = 1, recv_in_place: bool = False) -> FusedLayout:
    """own: [n, 3] (global start, end, local offset); recv: [m, 3] (global start, end, offset
    in the cast's buffer), recv_src: the source rank of each received range. Global order when
    it costs at most MAX_COPIES copies, else rank order. ``align`` > 1: pads that put own runs
    on their rows' key tile grid of that size (``key_tile_for`` the local kernel).
    ``recv_in_place``: rank order wherever global order splits the received part and rank order
    does not (at cp 2 it never does: one source), for a forward that starts before the cast
    lands (nothing may be copied after it; CPU counts at 16k-64k a GPU, cp 2: the
    same tile pairs within 0.4%, partial ones up to 8% more on full_document's rank 0)."""
    own, recv = own.reshape(-1, 3), recv.reshape(-1, 3)
    layout = _place(own, recv, np.concatenate([own[:, 0], recv[:, 0]]), align)
    group = np.concatenate([np.full(len(own), rank), recv_src])  # sources in rank order
    ranked = lambda: _place(own, recv,  # noqa: E731
                            np.concatenate([own[:, 2], recv[:, 2]]) + group * (1 << 42), align)
    if recv_in_place and layout.recv_at is None:
        in_place = ranked()
        if in_place.recv_at is not None:
            return in_place
    return layout if layout.num_copies <= MAX_COPIES else ranked()


def _place(own: np.ndarray, recv: np.ndarray, key: np.ndarray, align: int = 1) -> FusedLayout:
    """Pieces laid out by increasing ``key``, back to back but for the aligning pads."""
    pieces = np.concatenate([own, recv])
    lens = pieces[:, 1] - pieces[:, 0]
    order = np.argsort(key, kind="stable")
    n = len(own)
    at = np.empty(len(pieces), dtype=np.int64)
    pads, pos = [], 0
    for segment in _pad_segments(pieces, order, n):
        offsets = np.cumsum(lens[segment]) - lens[segment]
        owns = [(int(lens[p]), int(o), int(p)) for p, o in zip(segment, offsets)
                if p < n and lens[p] > 0]
        pad = 0
        if align > 1 and owns:  # the segment's longest own run on its rows' tile grid
            _, offset, p = max(owns)
            pad = int(pieces[p, 2] - (pos + offset)) % align
        if pad:
            pads.append((pos, pad))
            pos += pad
        at[segment] = pos + offsets
        pos += int(lens[segment].sum())
    return FusedLayout(pos, _joined(own[:, 2], at[:n], lens[:n]),
                       _joined(recv[:, 2], at[n:], lens[n:]),
                       _key_runs(pieces[:, 0], pieces[:, 1], at), tuple(pads))


def _pad_segments(pieces: np.ndarray, order: np.ndarray, num_own: int) -> list[np.ndarray]:
    """``order`` cut where a pad may go: before an own piece that follows a received one, or
    the other way round, with a gap in global keys between them."""
    own = order < num_own
    gap = pieces[order[1:], 0] != pieces[order[:-1], 1]
    cuts = np.flatnonzero((own[1:] != own[:-1]) & gap) + 1
    return [s for s in np.split(order, cuts) if len(s)]


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
