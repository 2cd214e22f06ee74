"""Head x context parallelism: Ulysses all-to-all inside groups of U ranks, a (double) ring
across the R = cp_size / U groups. Ulysses (R = 1), Ring P2P (U = 1), USP and LoongTrain are
this one class with different degrees; each public file fixes or exposes them.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

from ._ring_engine import RingAttnFunc, make_ring_plan
from ._sharding import doc_ranges, layout_len, two_level_layout
from ._ulysses import head_to_seq, seq_to_head
from .base import CPStrategy


def kv_head_repeat(num_heads_q: int, num_heads_kv: int, ulysses_degree: int) -> int:
    """Smallest factor r such that num_heads_kv * r splits over ulysses_degree ranks and still
    divides num_heads_q (r = 1 when no repeat is needed; MHA at worst)."""
    return math.lcm(num_heads_kv, ulysses_degree) // num_heads_kv


def head_context_reason(num_heads_q: int, cp_size: int, ulysses_degree: int,
                        window_size: int | None) -> str | None:
    """The reason a (ulysses_degree, window_size) split of cp_size cannot run, or None."""
    if ulysses_degree < 1 or cp_size % ulysses_degree:
        return f"ulysses_degree={ulysses_degree} must divide cp_size={cp_size}"
    if num_heads_q % ulysses_degree:
        return (f"num_heads_q={num_heads_q} is not divisible by the Ulysses degree "
                f"{ulysses_degree}")
    ring_degree = cp_size // ulysses_degree
    if window_size is not None and (window_size < 1 or ring_degree % window_size):
        return f"window_size={window_size} must divide the ring degree {ring_degree}"
    return None


class HeadContextParallel(CPStrategy):
    """Shared body of the Ulysses / ring family; subclasses give ``_degrees(**knobs)``.

    Layout: zigzag (per document when the mask has doc_lens) over the R ring groups, contiguous
    within a group; CP rank = ring_index * U + ulysses_index.
    """

    def _degrees(self, **knobs) -> tuple[int, int]:
        """(ulysses_degree, window_size) for this cp_size."""
        raise NotImplementedError

    def _build(self, **knobs) -> None:
        ulysses_degree, window_size = self._degrees(**knobs)
        self.ulysses_degree, self.window_size = ulysses_degree, window_size
        self.ring_degree = self.cp_size // ulysses_degree
        ring_index, ulysses_index = divmod(self.cp_rank, ulysses_degree)
        docs = doc_ranges(self.mask.seqlen, self.mask.doc_lens)
        self.layouts, group_layouts = two_level_layout(docs, self.ring_degree, ulysses_degree)
        self.repeat = kv_head_repeat(self.num_heads_q, self.num_heads_kv, ulysses_degree)
        if self.repeat > 1:
            self.notes = (f"kv heads repeated {self.repeat}x to {self.num_heads_kv * self.repeat} "
                          f"(all-to-all needs them divisible by ulysses_degree={ulysses_degree})")
        self.ulysses_group = self._ulysses_group(ring_index)
        self.ulysses_lengths = [layout_len(self.layouts[ring_index * ulysses_degree + u])
                                for u in range(ulysses_degree)]
        ring_ranks = self.global_ranks([i * ulysses_degree + ulysses_index
                                        for i in range(self.ring_degree)])
        self.plan = make_ring_plan(list(self.mask.slices), group_layouts, ring_ranks, ring_index,
                                   window_size, self.group)

    def _ulysses_group(self, ring_index: int):
        """The process group of this rank's Ulysses group (new_group is collective: all build all)."""
        u = self.ulysses_degree
        if u == 1:
            return None
        if self.ring_degree == 1:
            return self.group
        mine = None
        for i in range(self.ring_degree):
            g = dist.new_group(self.global_ranks(list(range(i * u, (i + 1) * u))))
            if i == ring_index:
                mine = g
        return mine

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """See ``CPStrategy.attention``; KV heads are repeated first when ``notes`` says so."""
        if self.repeat > 1:
            k, v = k.repeat_interleave(self.repeat, dim=1), v.repeat_interleave(self.repeat, dim=1)
        if self.ulysses_degree > 1:
            q, k, v = (seq_to_head(x, self.ulysses_lengths, self.ulysses_group, self.stats)
                       for x in (q, k, v))
        out = RingAttnFunc.apply(q, k, v, self.plan, self.kernel, self.stats)
        if self.ulysses_degree > 1:
            out = head_to_seq(out, self.ulysses_lengths, self.ulysses_group, self.stats)
        return out
