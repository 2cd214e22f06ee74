"""Converters: a Mask in, one peer kernel's mask representation out, or UnsupportedMask("why").

Every converter reads the mask's slices (never its name), so a pattern is accepted exactly when
its geometry fits the target.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from magi_attention.common import (AttnMaskType, AttnSlice, SliceArray, region_to_slices,
                                   slices_to_tensors)
from magi_attention.common import to_dense as _slices_to_dense
from magi_attention.common import union_area

from ._block_index import BlockSparseIndex, block_sparse_index
from ._flashmask import column_bounds, from_flashmask
from ._rows import all_row_intervals
from .errors import UnsupportedMask
from .mask import Mask

__all__ = ["BlockSparseIndex", "UnsupportedMask", "from_flashmask", "to_block_sparse",
           "to_cu_seqlens", "to_dense", "to_flashmask", "to_mask_mod", "to_slices_tensors",
           "to_window"]


def to_dense(mask: Mask, device: str | torch.device = "cpu") -> torch.Tensor:
    """Dense kept mask: bool ``[S, S]``, or ``[H, S, S]`` for a mask with head_slices.
    Materialises S^2 cells: small S only."""
    dense = [_slices_to_dense(h, mask.seqlen, device=device) for h in mask.per_head_slices]
    return dense[0] if mask.head_slices is None else torch.stack(dense)


def _single_head(mask: Mask, target: str) -> tuple[AttnSlice, ...]:
    if mask.head_slices is not None:
        raise UnsupportedMask(f"{target} takes one mask for all heads; {mask.name} has "
                              f"{mask.num_mask_heads} per-head masks")
    return mask.slices


def to_cu_seqlens(mask: Mask) -> tuple[list[int], bool]:
    """``(cu_seqlens, is_causal)`` when the mask is a block diagonal of all-full or all-causal
    documents (full: one document; causal: one causal document).

    Documents are the connected components of the slices' ``q_range | k_range`` spans; the mask
    is accepted when its area equals that of the candidate block diagonal and adding the
    candidate's slices does not grow the union (mask inside candidate, equal size: equal).

    Raises:
        UnsupportedMask: anything else (e.g. share_question, sliding windows, per-head masks).
    """
    slices = list(_single_head(mask, "cu_seqlens"))
    arr = mask.slice_arrays[0]
    # spans of the kept cells, not of the rectangles: a loose rectangle must not join documents
    q_first, q_last = arr.nonempty_rows()
    k_first, k_last = arr.nonempty_cols()
    live = q_last > q_first
    starts, ends = np.minimum(q_first, k_first)[live], np.maximum(q_last, k_last)[live]
    order = np.argsort(starts, kind="stable")
    cu, reach = [0], 0
    for start, end in zip(starts[order].tolist(), ends[order].tolist()):  # sorted by start: a component ends where no span reaches past it
        if start > reach:
            raise UnsupportedMask(f"rows [{reach}, {start}) attend to nothing; cu_seqlens "
                                  f"documents cover every token")
        if start == reach and reach != cu[-1]:
            cu.append(reach)
        reach = max(reach, end)
    if reach != mask.seqlen:
        raise UnsupportedMask(f"rows [{reach}, {mask.seqlen}) attend to nothing")
    cu.append(reach)
    area = mask.area
    for is_causal, mask_type in ((True, AttnMaskType.CAUSAL), (False, AttnMaskType.FULL)):
        docs = [AttnSlice.make(a, b, a, b, mask_type) for a, b in zip(cu[:-1], cu[1:])]
        doc_area = sum(d.area() for d in docs)
        if doc_area == area and union_area(slices + docs) == doc_area:
            return cu, is_causal
    raise UnsupportedMask(f"{mask.name} is not a block diagonal of full or causal documents")


def to_window(mask: Mask) -> tuple[int, int]:
    """FlashAttention ``(window_left, window_right)``, -1 meaning unbounded, when the mask keeps
    exactly the cells with ``-window_left <= k - q <= window_right`` (full: (-1, -1); causal:
    (-1, 0); sliding_window_causal w: (w, 0); sliding_window w: (w, w)).

    The candidate window is the mask's own extent (largest q - k and k - q over kept cells), so
    the mask lies inside it; equal areas then prove equality.

    Raises:
        UnsupportedMask: the mask is not one window over the whole sequence.
    """
    _single_head(mask, "window_size")
    arr = mask.slice_arrays[0]
    first, last = arr.nonempty_rows()
    live = last > first
    if not live.any():
        raise UnsupportedMask(f"{mask.name} keeps no cell")
    arr, first, last = arr.take(live), first[live], last[live]
    # k - q is largest at a slice's first kept row (right end), q - k at its last (left end)
    right = int((np.minimum(arr.k_end, first + arr.upper_offset + 1) - 1 - first).max())
    left = int((last - 1 - np.maximum(arr.k_start, last - 1 + arr.lower_offset)).max())
    if left < 0 or right < 0:
        raise UnsupportedMask(f"{mask.name} excludes the diagonal; a window always keeps it")
    window = region_to_slices(0, mask.seqlen, 0, mask.seqlen, -left, right)
    if sum(s.area() for s in window) != mask.area:
        raise UnsupportedMask(f"{mask.name} is not a single sliding window (its extent is "
                              f"left={left}, right={right}, but it keeps fewer cells)")
    unbounded = mask.seqlen - 1
    return (-1 if left >= unbounded else left), (-1 if right >= unbounded else right)


def to_flashmask(mask: Mask, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """FlashMask column bounds (startend_row_indices): int32 tensors ``[S]`` (``[H, S]`` with
    head_slices) under keys ``lts, lte, uts, ute``.

    For key column j, rows ``i >= j`` in ``[lts[j], lte[j])`` and rows ``i < j`` in
    ``[uts[j], ute[j])`` are masked out; every other row is kept. No masking below the diagonal
    is ``lts = lte = S``, none above is ``uts = ute = 0``. ``from_flashmask`` inverts this.

    Raises:
        UnsupportedMask: a column whose kept rows on one side of the diagonal are not
            "everything but one interval" (e.g. hash_sparse, block_sparse).
    """
    per_head = [column_bounds(h, mask.seqlen) for h in mask.slice_arrays]
    out = {k: torch.from_numpy(np.stack([b[k] for b in per_head]).astype(np.int32)).to(device)
           for k in ("lts", "lte", "uts", "ute")}
    return out if mask.head_slices is not None else {k: v[0] for k, v in out.items()}


def to_block_sparse(mask: Mask, block_q: int = 128, block_k: int = 128,
                    device: str | torch.device = "cpu", padded_full: bool = False
                    ) -> BlockSparseIndex:
    """Full and partial key blocks per (head, query block); tensors ``[H, nq(, nk)]``, H = 1 for a
    mask shared by all heads. See ``BlockSparseIndex``; ``padded_full``: short edge tiles are
    partial, as create_block_mask makes them. Cost: O(kept row intervals), no S x S."""
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block_q and block_k must be >= 1, got {block_q}, {block_k}")
    return block_sparse_index(mask.slice_arrays, mask.seqlen, block_q, block_k, device,
                              padded_full)


def to_mask_mod(mask: Mask, device: str | torch.device = "cpu") -> Callable[..., torch.Tensor]:
    """FlexAttention ``mask_mod(b, h, q_idx, kv_idx) -> bool`` built from the slices.

    Each query row's kept keys, merged into disjoint sorted intervals, go into padded tables
    ``lo, hi: [H, S, M]`` int32 (M = most intervals in a row, rounded up to a power of two;
    padding is ``lo = S + 1``, never <= a key). The mask_mod binary-searches row ``q_idx`` for
    the last interval starting at or before ``kv_idx`` (log2(M) gathers) and tests its end.
    It is pointwise (no reductions: inductor refuses ``any`` inside a mask_mod), so it runs
    under vmap and torch.compile. h is the KV head for per-head masks (pass
    ``h // (num_heads_q // num_heads_kv)`` under GQA); b is unused.
    """
    tables = [_interval_table(h, mask.seqlen) for h in mask.slice_arrays]
    width = 1 << max(0, max(t[0].shape[1] for t in tables) - 1).bit_length()
    pad = lambda t, value: torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value)
    lo = torch.stack([pad(t[0], mask.seqlen + 1) for t in tables]).to(device)
    hi = torch.stack([pad(t[1], 0) for t in tables]).to(device)
    steps = [width >> i for i in range(1, width.bit_length())]  # width/2, ..., 1
    shared = mask.head_slices is None

    def mask_mod(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor
                 ) -> torch.Tensor:
        head = 0 if shared else h
        pos = torch.zeros_like(q_idx)
        for step in steps:  # unrolled binary search over the row's sorted interval starts
            pos = torch.where(lo[head, q_idx, pos + step] <= kv_idx, pos + step, pos)
        return (lo[head, q_idx, pos] <= kv_idx) & (kv_idx < hi[head, q_idx, pos])

    mask_mod.__name__ = f"mask_mod_{mask.name}"
    return mask_mod


def to_pattern_mask_mod(mask: Mask, device: str | torch.device = "cpu"
                        ) -> Callable[..., torch.Tensor] | None:
    """A FlexAttention ``mask_mod`` written from the pattern's own definition, the way a
    FlexAttention user writes it, for the patterns whose rows hold many key intervals (where
    ``to_mask_mod``'s binary search is long): block_sparse / var_block_sparse by their kept-block
    table (``kept[h, q_block, k_block]``), hash_sparse by its buckets (``bucket[q] ==
    bucket[k] and k <= q``), qk_sparse by its dropped rows and columns (``k <= q and not
    dropped_row[q] and not dropped_col[k]``). None for the other patterns, or where the pattern rebuilt from
    ``mask.params`` does not give the mask's own slices (a user's slices under that name). h as
    in ``to_mask_mod``; the function's name says which pattern it is."""
    builder = {"block_sparse": _block_table_mask_mod, "var_block_sparse": _block_table_mask_mod,
               "hash_sparse": _bucket_mask_mod, "qk_sparse": _dropped_mask_mod}.get(mask.name)
    if builder is None or not _rebuilt_from_params(mask):
        return None
    return builder(mask, torch.device(device))


def _rebuilt_from_params(mask: Mask) -> bool:
    """Whether ``build_mask`` on the mask's name and params gives its own slices (so tables drawn
    from the params describe it)."""
    from .build import build_mask
    try:
        again = build_mask(mask.name, mask.seqlen, mask.doc_lens, **mask.params)
    except (TypeError, ValueError):
        return False
    return again.slices == mask.slices and again.head_slices == mask.head_slices


def _block_table_mask_mod(mask: Mask, device: torch.device):
    """kept[h, q_block(q), k_block(k)]: one lookup (uniform blocks: the block is q // block_q;
    variable ones: a per-token block id, two more)."""
    from .registry import block_grid
    q_edges, k_edges, kept = block_grid(mask.seqlen, dict(mask.params))
    kept_t = torch.from_numpy(np.ascontiguousarray(kept)).to(device)
    shared = mask.head_slices is None
    if "block_q" in mask.params:
        block_q, block_k = int(mask.params["block_q"]), int(mask.params["block_k"])

        def mask_mod(b, h, q_idx, kv_idx):
            return kept_t[0 if shared else h, q_idx // block_q, kv_idx // block_k]
    else:
        block_of = lambda edges: torch.from_numpy(  # noqa: E731
            np.searchsorted(edges, np.arange(mask.seqlen), side="right") - 1).to(device)
        q_block, k_block = block_of(q_edges), block_of(k_edges)

        def mask_mod(b, h, q_idx, kv_idx):
            return kept_t[0 if shared else h, q_block[q_idx], k_block[kv_idx]]
    mask_mod.__name__ = f"mask_mod_{mask.name}_table"
    return mask_mod


def _dropped_mask_mod(mask: Mask, device: torch.device):
    """Causal without the dropped query rows and key columns: two flag lookups."""
    from .registry import _drops
    from .sparse import _token_flags
    dropped_rows, dropped_cols = _drops(mask.seqlen, dict(mask.params))
    row_kept = ~_token_flags(mask.seqlen, dropped_rows).to(device)
    col_kept = ~_token_flags(mask.seqlen, dropped_cols).to(device)

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & row_kept[q_idx] & col_kept[kv_idx]
    mask_mod.__name__ = f"mask_mod_{mask.name}_flags"
    return mask_mod


def _bucket_mask_mod(mask: Mask, device: torch.device):
    """Causal within a bucket: bucket[q // run_len] == bucket[k // run_len] and k <= q."""
    from .registry import _run_buckets
    run_len = int(mask.params["run_len"])
    buckets = torch.as_tensor(_run_buckets(mask.seqlen, dict(mask.params)),
                              dtype=torch.int32).to(device)

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & (buckets[q_idx // run_len] == buckets[kv_idx // run_len])
    mask_mod.__name__ = f"mask_mod_{mask.name}_buckets"
    return mask_mod


def _interval_table(arr: SliceArray, seqlen: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``lo, hi: [S, M]`` int32, row q's kept intervals in order, then ``[S + 1, 0)`` padding."""
    rows, lo, hi = all_row_intervals(arr, seqlen)
    counts = np.bincount(rows, minlength=seqlen)
    width = max(1, int(counts.max()) if len(counts) else 1)
    slot = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
    lo_t = np.full((seqlen, width), seqlen + 1, dtype=np.int32)
    hi_t = np.zeros((seqlen, width), dtype=np.int32)
    lo_t[rows, slot], hi_t[rows, slot] = lo, hi
    return torch.from_numpy(lo_t), torch.from_numpy(hi_t)


def to_slices_tensors(mask: Mask, device: str | torch.device = "cpu", head: int | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(q_ranges [n, 2], k_ranges [n, 2], attn_type_map [n])`` int32 for FFA / MagiAttention.

    For a per-head mask pass ``head`` (the KV head); without it, UnsupportedMask.
    """
    if head is None:
        slices = _single_head(mask, "FFA slice tensors (without head=)")
    else:
        slices = mask.per_head_slices[head]
    return slices_to_tensors(slices, device=device)
