"""FlashMask column bounds: per key column, one masked row interval below and one above the diagonal."""
from __future__ import annotations

import numpy as np
import torch

from magi_attention.common import SliceArray

from ._rows import all_row_intervals
from .errors import UnsupportedMask


def _masked_gap(cols: np.ndarray, lo: np.ndarray, hi: np.ndarray, seg_start: np.ndarray,
                seg_end: np.ndarray, side: str) -> tuple[np.ndarray, np.ndarray]:
    """Per column j, the one interval of ``[seg_start[j], seg_end[j])`` NOT covered by its kept
    pieces ``(cols, lo, hi)`` (sorted by column then lo, disjoint, inside the segment).

    Kept rows around a single masked gap form at most two pieces: one touching the segment
    start and one touching its end. Anything else needs two masked intervals on one side.
    """
    num_cols = len(seg_start)
    j = np.arange(num_cols)
    first = np.searchsorted(cols, j, side="left")
    count = np.searchsorted(cols, j, side="right") - first
    last = first + count - 1
    pad = lambda a: np.append(a, 0)  # columns with no piece index one past the end
    f_lo, f_hi = pad(lo)[first], pad(hi)[first]
    l_lo, l_hi = pad(lo)[np.maximum(last, 0)], pad(hi)[np.maximum(last, 0)]
    start = np.where(count == 0, seg_start, np.where(f_lo == seg_start, f_hi, seg_start))
    end = np.where(count == 0, seg_end, np.where(l_hi == seg_end, l_lo, seg_end))
    end = np.where((count == 1) & (f_lo == seg_start), seg_end, end)
    ok = (count == 0) | ((count == 1) & ((f_lo == seg_start) | (l_hi == seg_end))) | (
        (count == 2) & (f_lo == seg_start) & (l_hi == seg_end))
    if not ok.all():
        bad = int(np.flatnonzero(~ok)[0])
        raise UnsupportedMask(f"key column {bad} keeps {int(count[bad])} separate row runs "
                              f"{side} the diagonal; FlashMask masks one row interval per side")
    return start, end


def column_bounds(arr: SliceArray, seqlen: int) -> dict[str, np.ndarray]:
    """``lts, lte, uts, ute`` int64 ``[S]`` for one head (see ``convert.to_flashmask``)."""
    cols, lo, hi = all_row_intervals(arr, seqlen, transpose=True)
    j = np.arange(seqlen)
    # lower triangle (rows i >= j) and upper triangle (rows i < j) of each column, separately
    low_lo = np.maximum(lo, cols)
    low = hi > low_lo
    lts, lte = _masked_gap(cols[low], low_lo[low], hi[low], j, np.full(seqlen, seqlen), "on/below")
    up_hi = np.minimum(hi, cols)
    up = up_hi > lo
    uts, ute = _masked_gap(cols[up], lo[up], up_hi[up], np.zeros(seqlen, np.int64), j, "above")
    empty_low, empty_up = lte <= lts, ute <= uts
    return {"lts": np.where(empty_low, seqlen, lts), "lte": np.where(empty_low, seqlen, lte),
            "uts": np.where(empty_up, 0, uts), "ute": np.where(empty_up, 0, ute)}


def from_flashmask(bounds: dict[str, torch.Tensor], seqlen: int) -> torch.Tensor:
    """Dense kept mask ``[S, S]`` (or ``[H, S, S]`` for ``[H, S]`` bounds) from column bounds."""
    i = torch.arange(seqlen)[:, None]
    j = torch.arange(seqlen)[None, :]
    lts, lte, uts, ute = (bounds[k].long().unsqueeze(-2) for k in ("lts", "lte", "uts", "ute"))
    masked = ((i >= j) & (i >= lts) & (i < lte)) | ((i < j) & (i >= uts) & (i < ute))
    return ~masked
