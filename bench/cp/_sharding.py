"""Token layouts of CP strategies and the exact sub-masks between two layouts.

A layout says which global tokens a rank holds, in local order: ``list[AttnRange]`` (half-open
global ranges, concatenated). Every strategy here is a layout plus a communication schedule; the
mask of (local q rows) x (a KV block in hand) is the global mask clipped to each pair of ranges
and shifted to local coordinates, so every strategy is exact for any AttnSlice mask.
"""
from __future__ import annotations

import bisect
from typing import Sequence

import torch

from magi_attention.common import AttnRange, AttnSlice

Layout = list[AttnRange]


def split_even(r: AttnRange, num_parts: int) -> list[AttnRange]:
    """``r`` cut into ``num_parts`` consecutive ranges whose lengths differ by at most 1."""
    base, extra = divmod(r.seqlen, num_parts)
    out, start = [], r.start
    for i in range(num_parts):
        end = start + base + (1 if i < extra else 0)
        out.append(AttnRange(start, end))
        start = end
    return out


def _compact(layout: Layout) -> Layout:
    """Drop empty ranges and fuse ranges that touch (same tokens, same local order)."""
    out: Layout = []
    for r in layout:
        if r.is_empty():
            continue
        if out and out[-1].end == r.start:
            out[-1] = AttnRange(out[-1].start, r.end)
        else:
            out.append(r)
    return out


def doc_ranges(seqlen: int, doc_lens: Sequence[int] | None) -> list[AttnRange]:
    """The documents as ranges, or one range over the whole sequence."""
    if not doc_lens:
        return [AttnRange(0, seqlen)]
    out, start = [], 0
    for n in doc_lens:
        out.append(AttnRange(start, start + int(n)))
        start += int(n)
    return out


def zigzag_layout(docs: Sequence[AttnRange], num_parts: int) -> list[Layout]:
    """Each document cut into 2 * num_parts chunks; part r takes chunks r and 2 * num_parts - 1 - r.

    With one document this is the usual causal load balance; per document it is the varlen
    (THD) zigzag. Lengths that do not divide evenly give chunks differing by one token.
    """
    parts: list[Layout] = [[] for _ in range(num_parts)]
    for d in docs:
        chunks = split_even(d, 2 * num_parts)
        for r in range(num_parts):
            parts[r] += [chunks[r], chunks[2 * num_parts - 1 - r]]
    return [_compact(p) for p in parts]


def split_contiguous(layout: Layout, num_parts: int) -> list[Layout]:
    """The tokens of ``layout`` (in its order) cut into ``num_parts`` near-even consecutive runs."""
    total = sum(r.seqlen for r in layout)
    sizes = [p.seqlen for p in split_even(AttnRange(0, total), num_parts)]
    parts: list[Layout] = []
    it, cur, offset = iter(layout), None, 0
    for size in sizes:
        piece: Layout = []
        while size > 0:
            if cur is None or offset == cur.seqlen:
                cur, offset = next(it), 0
                continue
            take = min(size, cur.seqlen - offset)
            piece.append(AttnRange(cur.start + offset, cur.start + offset + take))
            offset += take
            size -= take
        parts.append(_compact(piece))
    return parts


def two_level_layout(docs: Sequence[AttnRange], ring_degree: int, ulysses_degree: int
                     ) -> tuple[list[Layout], list[Layout]]:
    """Layouts of the 2D (head x context) strategies.

    The sequence is zigzag-sharded over ``ring_degree`` ring groups (per document), and each
    group's tokens are cut contiguously over its ``ulysses_degree`` ranks. CP rank
    ``ring_index * ulysses_degree + ulysses_index`` (Ulysses groups are consecutive ranks).

    Returns:
        (rank_layouts [cp_size], group_layouts [ring_degree]): a group's layout is the
        concatenation of its ranks' layouts, i.e. what a rank holds after the Ulysses all-to-all.
    """
    groups = zigzag_layout(docs, ring_degree) if ring_degree > 1 else [_compact(list(docs))]
    ranks = [p for g in groups for p in split_contiguous(g, ulysses_degree)]
    return ranks, groups


def layout_len(layout: Layout) -> int:
    return sum(r.seqlen for r in layout)


def layout_index(layout: Layout, device=None) -> torch.Tensor:
    """int64 [layout_len]: the global token index of each local row."""
    if not layout:
        return torch.zeros(0, dtype=torch.long, device=device)
    return torch.cat([torch.arange(r.start, r.end, device=device) for r in layout])


class _Chunks:
    """A layout's ranges sorted by global start, with their local offsets, for overlap look-ups."""

    def __init__(self, layout: Layout) -> None:
        offsets, off = [], 0
        for r in layout:
            offsets.append(off)
            off += r.seqlen
        order = sorted(range(len(layout)), key=lambda i: layout[i].start)
        self.ranges = [layout[i] for i in order]
        self.offsets = [offsets[i] for i in order]
        self.starts = [r.start for r in self.ranges]
        self.ends = [r.end for r in self.ranges]

    def overlapping(self, r: AttnRange) -> range:
        return range(bisect.bisect_right(self.ends, r.start), bisect.bisect_left(self.starts, r.end))


def local_slices(mask_slices: Sequence[AttnSlice], q_layout: Layout, k_layout: Layout
                 ) -> list[AttnSlice]:
    """The global mask restricted to ``q_layout`` rows x ``k_layout`` keys, in local coordinates.

    Local row i is the i-th token of ``q_layout`` (its ranges concatenated), likewise for keys.
    Exact: each slice is clipped to every pair of overlapping ranges (``AttnSlice.clip``).
    """
    qc, kc = _Chunks(q_layout), _Chunks(k_layout)
    out: list[AttnSlice] = []
    for s in mask_slices:
        for qi in qc.overlapping(s.q_range):
            q_r, q_off = qc.ranges[qi], qc.offsets[qi]
            for ki in kc.overlapping(s.k_range):
                k_r, k_off = kc.ranges[ki], kc.offsets[ki]
                out += [p.shift(q_off - q_r.start, k_off - k_r.start) for p in s.clip(q_r, k_r)]
    return out
