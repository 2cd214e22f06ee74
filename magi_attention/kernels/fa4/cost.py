"""What a mask costs on the FA4 backend, from the host alone (numpy; flash-attn is not imported):
the terms the CP planner's tile model reads (``meta.dispatch_choice``)."""
from __future__ import annotations

from ..plan import FlexAttnPlan
from ._convert import native_groups_of, native_of, path_cost_terms
from ._native import native_tiles

__all__ = ["native_tile_counts", "path_cost_terms"]


def native_tile_counts(mask: FlexAttnPlan, block_m: int, block_n: int
                       ) -> list[tuple[int, int]] | None:
    """(key tiles, q tiles) of each native FA4 call the mask runs as: its one native form, or
    one call per native group of rows (``_native.native_groups``); None where FA4 runs the mask
    through its bitmaps. Kept in the plan where the forms are."""
    form = native_of(mask)
    if form is not None:
        parts = [(form, mask.seqlen_q, mask.seqlen_k)]
    else:
        groups = native_groups_of(mask)
        if groups is None:
            return None
        parts = [(g.form, g.q_end - g.q_start, g.k_end - g.k_start) for g in groups]
    return [native_tiles(form, seqlen_q, seqlen_k, block_m, block_n)
            for form, seqlen_q, seqlen_k in parts]
