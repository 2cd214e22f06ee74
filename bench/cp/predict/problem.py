"""One CP cell as the program builders see it: the global mask, the group size and the shapes."""
from __future__ import annotations

from dataclasses import dataclass, field

from bench.masks import Mask
from magi_attention.common.slice_array import SliceArray

__all__ = ["CPProblem", "FP32_BYTES"]

FP32_BYTES = 4


@dataclass(frozen=True)
class CPProblem:
    """``mask`` over ``mask.seqlen`` tokens on ``cp_size`` ranks; q, k, v of ``num_heads_q`` /
    ``num_heads_kv`` heads of ``head_dim``, ``element_size`` bytes an element (bf16: 2)."""

    mask: Mask
    cp_size: int
    num_heads_q: int
    num_heads_kv: int
    head_dim: int
    element_size: int = 2
    slices: SliceArray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.cp_size < 1:
            raise ValueError(f"cp_size must be >= 1, got {self.cp_size}")
        if self.num_heads_q % self.num_heads_kv:
            raise ValueError(f"num_heads_q={self.num_heads_q} must be a multiple of "
                             f"num_heads_kv={self.num_heads_kv}")
        object.__setattr__(self, "slices", SliceArray.from_slices(list(self.mask.slices)))

    @property
    def key(self) -> tuple:
        """What the programs of this cell depend on: the mask's cells, the sizes, the shapes."""
        from .tiles import mask_key
        return (mask_key(self.slices, self.seqlen, self.seqlen), self.cp_size, self.num_heads_q,
                self.num_heads_kv, self.head_dim, self.element_size)

    @property
    def seqlen(self) -> int:
        return self.mask.seqlen

    def nbytes(self, tokens: int, heads: int, element_size: int | None = None) -> int:
        """Bytes of a [tokens, heads, head_dim] tensor (q's element size unless given)."""
        size = self.element_size if element_size is None else element_size
        return tokens * heads * self.head_dim * size
