"""HybridCP (Megatron's hybrid context parallel): each packed sample gets a CP sub-group sized
to its length (short samples stay on one rank, long ones spread over 2^k ranks), sub-groups are
placed to balance attention work, and each sub-group runs ring attention on its own samples."""
from __future__ import annotations

import bisect
import math
import re

import torch

from magi_attention.common import AttnSlice, union_area

from ._ring_engine import make_ring_plan, ring_bwd, ring_fwd
from ._sharding import Layout, doc_ranges, layout_len, zigzag_layout
from .base import CPStrategy


def _doc_of(starts: list[int], pos: int) -> int:
    return bisect.bisect_right(starts, pos) - 1


def slices_by_doc(slices, docs) -> list[list[AttnSlice]] | str:
    """Each slice under its document, or the reason (a slice reaching across documents).
    Empty slices cover nothing, so they are dropped and never decide support."""
    starts = [d.start for d in docs]
    out: list[list[AttnSlice]] = [[] for _ in docs]
    for s in slices:
        if s.is_empty():
            continue
        i = _doc_of(starts, s.q_range.start)
        d = docs[i]
        if not (s.q_range.end <= d.end and d.start <= s.k_range.start and s.k_range.end <= d.end):
            return (f"slice {s!r} reaches across documents: per-sample sub-groups need every "
                    f"slice inside one document")
        out[i].append(s)
    return out


def sub_group_size(seqlen: int, sample_len: int, cp_size: int) -> int:
    """Smallest power of two g <= cp_size with sample_len / g <= seqlen / cp_size (rank capacity)."""
    need = math.ceil(sample_len * cp_size / seqlen)
    return min(cp_size, 1 << max(need - 1, 0).bit_length())


def place_samples(sizes: list[int], works: list[int], cp_size: int) -> list[int]:
    """Block index of each sample (sub-group = ranks [b * g, (b + 1) * g)), greedily by work:
    the heaviest first, each onto the aligned block whose busiest rank ends least loaded."""
    load = [0.0] * cp_size
    blocks = [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: (-works[i], i)):
        g = sizes[i]
        costs = [max(load[b * g:(b + 1) * g]) for b in range(cp_size // g)]
        b = costs.index(min(costs))
        blocks[i] = b
        for r in range(b * g, (b + 1) * g):
            load[r] += works[i] / g
    return blocks


def place_samples_capped(lengths: list[int], works: list[int], min_sizes: list[int],
                         cp_size: int, capacity: float) -> tuple[list[int], list[int]]:
    """(sub-group size, block index) of each sample when a rank may hold at most ``capacity``
    tokens, as Megatron's dynamic CP scheduler packs a micro-batch: heaviest first, each sample
    takes the sub-group size (at least its minimum, powers of two) and aligned block whose
    busiest rank ends least loaded among those whose members stay within capacity (a larger
    group than the minimum where that is lower). A sample that fits nowhere, which Megatron
    defers to the next micro-batch, spreads over all ranks here: one step holds every token."""
    load, tokens = [0.0] * cp_size, [0.0] * cp_size
    sizes, blocks = list(min_sizes), [0] * len(lengths)
    for i in sorted(range(len(lengths)), key=lambda i: (-works[i], i)):
        best = None  # (busiest member's load after it, size, block)
        g = min_sizes[i]
        while g <= cp_size:
            for b in range(cp_size // g):
                members = range(b * g, (b + 1) * g)
                if all(tokens[r] + lengths[i] / g <= capacity for r in members):
                    cand = (max(load[r] for r in members) + works[i] / g, g, b)
                    best = cand if best is None or cand < best else best
            g *= 2
        _, g, b = best if best is not None else (None, cp_size, 0)
        sizes[i], blocks[i] = g, b
        for r in range(b * g, (b + 1) * g):
            load[r] += works[i] / g
            tokens[r] += lengths[i] / g
    return sizes, blocks


def place_documents(mask, cp_size: int, token_capacity: float | None = None):
    """(documents, each one's slices, sub-group sizes, block indices): HybridCP's placement of
    ``mask``'s documents over ``cp_size`` ranks (the mask must keep its slices inside documents:
    ``HybridCP.supports``). ``token_capacity``: None balances work alone (ranks may end with
    unequal token counts); else a rank holds at most token_capacity * S / cp_size tokens
    (``place_samples_capped``)."""
    docs = doc_ranges(mask.seqlen, mask.doc_lens)
    per_doc = slices_by_doc(mask.slices, docs)
    sizes = [sub_group_size(mask.seqlen, d.seqlen, cp_size) for d in docs]
    works = [union_area(s) for s in per_doc]
    if token_capacity is None:
        return docs, per_doc, sizes, place_samples(sizes, works, cp_size)
    sizes, blocks = place_samples_capped([d.seqlen for d in docs], works, sizes, cp_size,
                                         token_capacity * mask.seqlen / cp_size)
    return docs, per_doc, sizes, blocks


TOKEN_SHARE_KEY = "tokens_per_rank="


def token_share_note(tokens_per_rank: list[int]) -> str:
    """The row note when ranks hold unequal token counts (the placement balances attention
    work, as Megatron's scheduler does, not tokens; magi and the ring family hold S / cp each,
    and the rest of a model layer runs on whatever share a rank holds)."""
    low, high = min(tokens_per_rank), max(tokens_per_rank)
    return "" if low == high else f"{TOKEN_SHARE_KEY}{low}-{high}"


def unequal_token_share(message) -> str:
    """The ``low-high`` token counts a row's message names (``token_share_note``), else ""."""
    match = re.search(TOKEN_SHARE_KEY + r"(\d+-\d+)", message if isinstance(message, str) else "")
    return match.group(1) if match else ""


def _joined(parts: list[torch.Tensor]) -> torch.Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _covers(rows: slice, x: torch.Tensor) -> bool:
    return rows.start == 0 and rows.stop == x.shape[0]


class HybridFunc(torch.autograd.Function):
    """Levels (sub-group sizes cp_size, ..., 2, 1) in a fixed order, one ring per level."""

    @staticmethod
    def forward(ctx, q, k, v, strategy):
        outs, lses = [], []
        for rows, plan in strategy.levels:
            o, l = ring_fwd(q[rows], k[rows], v[rows], plan, strategy.kernel, strategy.stats)
            outs.append(o)
            lses.append(l)
        out = _joined(outs).to(q.dtype) if outs else torch.zeros_like(q)
        lse = _joined(lses) if lses else q.new_zeros(q.shape[:2], dtype=torch.float32)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.strategy = strategy
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        strategy = ctx.strategy
        if len(strategy.levels) == 1 and _covers(strategy.levels[0][0], q):  # e.g. cp 1: no copies
            rows, plan = strategy.levels[0]
            return (*ring_bwd(dout.contiguous(), q, k, v, out, lse, plan, strategy.kernel,
                              strategy.stats), None)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for rows, plan in strategy.levels:
            dq[rows], dk[rows], dv[rows] = ring_bwd(dout[rows].contiguous(), q[rows], k[rows],
                                                    v[rows], out[rows], lse[rows], plan,
                                                    strategy.kernel, strategy.stats)
        return dq, dk, dv, None


class HybridCP(CPStrategy):
    """Samples: the mask's documents (doc_lens), or the whole sequence as one sample. Each
    sample's sub-group size is the smallest power of two that fits it into ceil(S / cp_size)
    tokens per rank; within a sub-group the sample is zigzag-sharded. The local rows are grouped
    by level (sub-group size, largest first). Any shared AttnSlice mask whose slices stay inside
    one document; a slice across documents (share_question, causal_blockwise) is X.

    Knob ``token_capacity`` (default None): None places documents by attention work alone, so
    ranks may hold unequal token counts (rows note them); a number caps each rank at that many
    times S / cp_size tokens, as Megatron's dynamic CP scheduler caps a micro-batch's packed
    tokens per rank (``place_samples_capped``; 1.0: the even share magi and the rings hold)."""

    name = "hybrid_cp"
    knob_names = ("token_capacity",)

    @classmethod
    def _check(cls, mask, num_heads_q, num_heads_kv, cp_size, token_capacity=None, **knobs):
        if cp_size & (cp_size - 1):
            return f"cp_size={cp_size} is not a power of two (sub-groups are 2^k ranks)"
        if token_capacity is not None and not token_capacity > 0:
            raise ValueError(f"hybrid_cp: token_capacity must be > 0 or None, got {token_capacity}")
        grouped = slices_by_doc(mask.slices, doc_ranges(mask.seqlen, mask.doc_lens))
        return grouped if isinstance(grouped, str) else None

    def _build(self, token_capacity: float | None = None) -> None:
        docs, _, sizes, blocks = place_documents(self.mask, self.cp_size, token_capacity)
        self.sub_group_sizes, self.blocks = sizes, blocks
        self.layouts = [[] for _ in range(self.cp_size)]
        level_layouts = []
        g = self.cp_size
        while g >= 1:
            members: list[list[Layout]] = [[[] for _ in range(g)] for _ in range(self.cp_size // g)]
            for d, size, b in zip(docs, sizes, blocks):
                if size == g:
                    for m, part in enumerate(zigzag_layout([d], g)):
                        members[b][m] += part
            level_layouts.append((g, members))
            for r in range(self.cp_size):
                self.layouts[r] += members[r // g][r % g]
            g //= 2
        self.levels = self._plans(level_layouts)
        self.notes = token_share_note([layout_len(layout) for layout in self.layouts])

    def _plans(self, level_layouts) -> list[tuple[slice, object]]:
        """(local rows, ring plan) of each level in which this rank's sub-group has tokens."""
        levels, offset = [], 0
        for g, members in level_layouts:
            block, index = divmod(self.cp_rank, g)
            mine = members[block]
            rows = slice(offset, offset + layout_len(mine[index]))
            offset = rows.stop
            if not any(mine):
                continue
            ranks = self.global_ranks(list(range(block * g, (block + 1) * g)))
            levels.append((rows, make_ring_plan(list(self.mask.slices), mine, ranks, index, g,
                                                self.group)))
        return levels

    def attention(self, q, k, v):
        """See ``CPStrategy.attention``."""
        return HybridFunc.apply(q, k, v, self)
