"""Mask: one built mask pattern, its slices and the parameters that reproduce it."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping

from magi_attention.common import AttnSlice, SliceArray, union_area


@dataclass(frozen=True)
class Mask:
    """A mask over ``seqlen_q = seqlen_k = seqlen`` tokens: the union of its slices.

    Attributes:
        name: pattern name, one of ``MASK_NAMES``; a label of the user's choice for a mask made
            by ``mask_from_slices``.
        seqlen: S.
        slices: the mask shared by all heads; for per-head masks, the mask of KV head 0.
        head_slices: one slice tuple per KV head for per-head masks (block_sparse and
            var_block_sparse with ``num_heads_kv > 1``), else None.
        doc_lens: document lengths (sum S) for the document patterns, else None.
        params: every resolved parameter, defaults and random draws (e.g. prefix_len) included,
            plus ``seed``; ``build_mask(name, seqlen, doc_lens, **params)`` rebuilds the mask.
    """

    name: str
    seqlen: int
    slices: tuple[AttnSlice, ...]
    head_slices: tuple[tuple[AttnSlice, ...], ...] | None
    doc_lens: tuple[int, ...] | None
    params: Mapping[str, Any]

    @property
    def num_mask_heads(self) -> int:
        """1, or num_heads_kv for per-head masks."""
        return 1 if self.head_slices is None else len(self.head_slices)

    @property
    def per_head_slices(self) -> tuple[tuple[AttnSlice, ...], ...]:
        """``head_slices``, or ``(slices,)`` for a mask shared by all heads."""
        return (self.slices,) if self.head_slices is None else self.head_slices

    @cached_property
    def slice_arrays(self) -> tuple[SliceArray, ...]:
        """Per head, the slices as numpy bound arrays (built once: ~1 us a slice)."""
        return tuple(SliceArray.from_slices(s) for s in self.per_head_slices)

    @cached_property
    def area(self) -> float:
        """Exact number of kept (q, k) cells; the mean over KV heads for per-head masks."""
        heads = self.per_head_slices
        return sum(union_area(s, a) for s, a in zip(heads, self.slice_arrays)) / len(heads)

    def __hash__(self) -> int:
        # params is a read-only mapping (unhashable); hash its items so masks can key caches
        return hash((self.name, self.seqlen, self.slices, self.head_slices, self.doc_lens,
                     tuple(sorted(self.params.items()))))

    def __repr__(self) -> str:
        return (f"Mask({self.name!r}, seqlen={self.seqlen}, num_slices={len(self.slices)}, "
                f"num_mask_heads={self.num_mask_heads}, params={dict(self.params)})")
