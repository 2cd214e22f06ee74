"""Single-sequence patterns: full, causal, sliding windows, global + sliding window, prefix LM.

Each generator returns list[AttnSlice]; next to it, ``*_reference`` is the MASKS.md definition
as a vectorised ``(q_idx, k_idx) -> bool`` predicate (tensors broadcast), for tests.
"""
from __future__ import annotations

from typing import Callable

import torch

from magi_attention.common import AttnMaskType, AttnSlice, region_to_slices

Predicate = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _named(fn: Predicate, name: str) -> Predicate:
    fn.__name__ = name
    return fn


def full(seqlen: int) -> list[AttnSlice]:
    return [AttnSlice.make(0, seqlen, 0, seqlen, AttnMaskType.FULL)]


def full_reference() -> Predicate:
    return _named(lambda q, k: torch.ones_like(q + k, dtype=torch.bool), "full")


def causal(seqlen: int) -> list[AttnSlice]:
    # CAUSAL is aligned to the bottom-right corner; on a square that is k <= q
    return [AttnSlice.make(0, seqlen, 0, seqlen, AttnMaskType.CAUSAL)]


def causal_reference() -> Predicate:
    return _named(lambda q, k: k <= q, "causal")


def sliding_window(seqlen: int, window: int) -> list[AttnSlice]:
    """abs(q - k) <= window: a top-left corner, a band and a bottom-right corner (<= 4 slices)."""
    return region_to_slices(0, seqlen, 0, seqlen, -window, window)


def sliding_window_reference(window: int) -> Predicate:
    return _named(lambda q, k: (q - k).abs() <= window, f"sliding_window_{window}")


def sliding_window_causal(seqlen: int, window: int) -> list[AttnSlice]:
    """0 <= q - k <= window: one CAUSAL corner for rows <= window, one BICAUSAL band below.

    Written out rather than via region_to_slices, which splits the band's last row off as an
    INVCAUSAL piece (its upper diagonal ends exactly at k_end there).
    """
    corner = min(window + 1, seqlen)
    slices = [AttnSlice.make(0, corner, 0, corner, AttnMaskType.CAUSAL)]
    if corner < seqlen:
        # k_start = 1 puts the lower diagonal at k >= q - window; k_end = S the upper at k <= q
        slices.append(AttnSlice.make(corner, seqlen, 1, seqlen, AttnMaskType.BICAUSAL))
    return slices


def sliding_window_causal_reference(window: int) -> Predicate:
    return _named(lambda q, k: (q - k >= 0) & (q - k <= window), f"sliding_window_causal_{window}")


def global_sliding_window(seqlen: int, window: int, num_global: int) -> list[AttnSlice]:
    """sliding_window plus tokens [0, num_global) that attend to and are attended by all."""
    g = min(num_global, seqlen)
    slices = [AttnSlice.make(0, g, 0, seqlen)] if g else []
    if g < seqlen:
        # rows below the global rows: the global key columns, then the window clipped to k >= g
        if g:
            slices.append(AttnSlice.make(g, seqlen, 0, g))
        slices += region_to_slices(g, seqlen, g, seqlen, -window, window)
    return slices


def global_sliding_window_reference(window: int, num_global: int) -> Predicate:
    def pred(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return ((q - k).abs() <= window) | (q < num_global) | (k < num_global)
    return _named(pred, f"global_sliding_window_{window}_{num_global}")


def prefix_lm_causal(seqlen: int, prefix_len: int) -> list[AttnSlice]:
    """Rows [0, p) see keys [0, p); rows [p, S) see keys [0, q] (a CAUSAL slice ending at S)."""
    slices = [AttnSlice.make(0, prefix_len, 0, prefix_len)] if prefix_len else []
    if prefix_len < seqlen:
        slices.append(AttnSlice.make(prefix_len, seqlen, 0, seqlen, AttnMaskType.CAUSAL))
    return slices


def prefix_lm_causal_reference(prefix_len: int) -> Predicate:
    def pred(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (k <= q) | ((q < prefix_len) & (k < prefix_len))
    return _named(pred, f"prefix_lm_causal_{prefix_len}")
