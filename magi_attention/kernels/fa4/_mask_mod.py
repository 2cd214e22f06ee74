"""The CuTe-DSL mask_mod FA4 calls on partial tiles: one bit lookup per (q, k) cell.

Imports cutlass, so it is loaded only once flash-attn-4 is known to be installed. The tables it
reads are built by ``_convert`` (layout in its module docstring) and passed as FA4 aux tensors
``[tile_map, tile_bits]``. FA4 calls the mask_mod with token indices (already unpacked for
PackGQA), also for the padded rows and columns of edge tiles: those land in an existing tile's
bitmap and read 0.
"""
from __future__ import annotations

from functools import lru_cache

import cutlass
import cutlass.cute as cute
from flash_attn.cute import utils

from ._convert import BITS_PER_WORD


@lru_cache(maxsize=None)
def tile_bitmap_mask_mod(block_m: int, block_n: int):
    """mask_mod for tiles of ``block_m x block_n``; one object per tile shape, so FA4's compile
    cache (keyed on the function's source and closure) compiles each shape once."""
    words_per_row = block_n // BITS_PER_WORD

    @cute.jit
    def tile_bitmap_mask(batch, head, m_idx, n_idx, seqlen_info, aux_tensors):
        tile_map = aux_tensors[0]
        tile_bits = aux_tensors[1]
        q = m_idx[0]
        k = n_idx[0]
        tile = tile_map[q // block_m, k // block_n]
        word = tile_bits[(tile * block_m + q % block_m) * words_per_row
                         + (k % block_n) // BITS_PER_WORD]
        bit = utils.scalar_to_ssa((word >> (k % BITS_PER_WORD)) & 1, cutlass.Int32)
        return bit != utils.scalar_to_ssa(0, cutlass.Int32)

    return tile_bitmap_mask
