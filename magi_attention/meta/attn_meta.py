"""Attention args of one rank: its slices re-expressed on local coordinates, one set per stage.

q rows are local shard positions. Keys are positions in the stage's KV buffer: the rank's own
shard for the host stage, the received buffer of a remote stage. A key buffer is described by
runs ``(global start, global end, buffer offset)`` sorted by global start; each slice piece is
clipped to every run it crosses and shifted.
"""
from __future__ import annotations

import numpy as np

from ..common.mask_type import AttnMaskType
from .comm_meta import RowPieces
from .dispatch import DispatchMeta
from .slice_array import SliceArray


def host_runs(dispatch: DispatchMeta, rank: int) -> np.ndarray:
    """The rank's own chunks as key runs, neighbouring chunks fused: int64 [n, 3]."""
    cs = dispatch.chunk_size
    chunks = np.asarray(dispatch.chunks_of(rank), dtype=np.int64)
    new = np.ones(len(chunks), dtype=bool)
    new[1:] = chunks[1:] != chunks[:-1] + 1
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(chunks)) - 1
    return np.stack([chunks[first] * cs, (chunks[last] + 1) * cs,
                     dispatch.local_offset[chunks[first]]], axis=1)


def local_row_pieces(rows: RowPieces, dispatch: DispatchMeta, rank: int) -> SliceArray:
    """The rank's pieces with q moved to local shard positions (k still global)."""
    mine = rows.pieces.take(rows.rank == rank)
    chunk = mine.q_start // dispatch.chunk_size
    return mine.shift(dispatch.local_offset[chunk] - chunk * dispatch.chunk_size, 0)


def map_keys(pieces: SliceArray, runs: np.ndarray) -> SliceArray:
    """Clip each piece (q local, k global) to the key runs it crosses; k -> buffer positions."""
    runs = np.asarray(runs, dtype=np.int64).reshape(-1, 3)
    if len(pieces) == 0 or len(runs) == 0:
        return SliceArray.empty()
    lo = np.searchsorted(runs[:, 1], pieces.k_start, side="right")
    hi = np.searchsorted(runs[:, 0], pieces.k_end, side="left")
    counts = np.maximum(hi - lo, 0)
    src = np.repeat(np.arange(len(pieces)), counts)
    run = lo[src] + np.arange(len(src)) - np.repeat(np.cumsum(counts) - counts, counts)
    clipped, sub = pieces.take(src).clip(-1 << 40, 1 << 40, runs[run, 0], runs[run, 1])
    run = run[sub]
    return clipped.shift(0, runs[run, 2] - runs[run, 0])


def merge_adjacent(slices: SliceArray) -> SliceArray:
    """The same union in fewer slices: pieces that one slice can express again are fused.

    Dispatch cuts every slice at chunk borders; where consecutive chunks of a document land next
    to each other on one rank, the pieces fit together again. Two fusions, both exact:

    - side by side (same rows, ``a.k_end == b.k_start``, both tight): a's row starts (FULL:
      ``k_start``; INVCAUSAL: the diagonal) and b's row ends (FULL: ``k_end``; CAUSAL: the
      diagonal) describe the union row by row;
    - stacked (``a.q_end == b.q_start``) with the same row rule: FULL with equal k_range, CAUSAL
      with equal k_start and upper diagonal, INVCAUSAL with equal k_end and lower diagonal,
      BICAUSAL with equal diagonals.

    Empty slices are dropped; the kernels take the union, so order does not matter. One pass
    can leave fusions for the next (a one-row piece absorbed last lets two stacked pieces meet:
    a causal document cut at 512-token chunks kept 185 slices for 29 documents after one pass),
    so the passes repeat until one fuses nothing.
    """
    if len(slices) == 0:
        return slices
    live = slices.take(np.flatnonzero(slices.areas() > 0))
    while True:
        merged = _absorb_single_rows(_stack(_side_by_side(live)))
        if len(merged) == len(live):
            return merged
        live = merged


def _fields(arr: SliceArray, i: int) -> list[int]:
    return [int(arr.q_start[i]), int(arr.q_end[i]), int(arr.k_start[i]), int(arr.k_end[i]),
            int(arr.mask_type[i])]


def _side_by_side(arr: SliceArray) -> SliceArray:
    rows = arr.q_end - arr.q_start
    cols = arr.k_end - arr.k_start
    lower, upper = _has_lower(arr.mask_type), _has_upper(arr.mask_type)
    # tight: every row keeps a key (a triangle needs cols >= rows; a band is left alone)
    tight = ~(lower & upper) & np.where(lower | upper, cols >= rows, True)
    order = np.lexsort((arr.k_start, arr.q_end, arr.q_start))
    out: list[list[int]] = []
    can_extend = False  # the last slice of out is tight and has no upper diagonal
    for i in order:
        cur = _fields(arr, i)
        prev = out[-1] if out else None
        if (prev is not None and can_extend and tight[i] and not lower[i]
                and prev[0] == cur[0] and prev[1] == cur[1] and prev[3] == cur[2]):
            prev_lower = _has_lower(np.int64(prev[4]))
            prev[3] = cur[3]
            prev[4] = _type_of(bool(prev_lower), bool(upper[i]))
            can_extend = not upper[i]
            continue
        out.append(cur)
        can_extend = bool(tight[i]) and not upper[i]
    return _to_array(out)


def _stack(arr: SliceArray) -> SliceArray:
    lower_off, upper_off = arr.lower_offset, arr.upper_offset
    lower, upper = _has_lower(arr.mask_type), _has_upper(arr.mask_type)
    # the row rule of a slice: (type, start or lower diagonal, end or upper diagonal)
    start_key = np.where(lower, lower_off, arr.k_start)
    end_key = np.where(upper, upper_off, arr.k_end)
    order = np.lexsort((arr.q_start, end_key, start_key, arr.mask_type))
    out: list[list[int]] = []
    prev_rule = None
    for i in order:
        rule = (int(arr.mask_type[i]), int(start_key[i]), int(end_key[i]))
        cur = _fields(arr, i)
        if out and rule == prev_rule and out[-1][1] == cur[0]:
            last = out[-1]
            last[1] = cur[1]
            if lower[i]:
                last[2] = last[0] + rule[1]
            if upper[i]:
                last[3] = last[1] + rule[2]
            continue
        out.append(cur)
        prev_rule = rule
    return _to_array(out)


def _row_of(s: list[int], q: int) -> tuple[int, int]:
    """Kept keys [lo, hi) of row q under slice s's rule (q may be one row past its ends)."""
    q0, q1, k0, k1, t = s
    lo = q + (k0 - q0) if _has_lower(t) else k0
    hi = q + (k1 - q1) + 1 if _has_upper(t) else k1
    return int(lo), int(hi)


def _absorb_single_rows(arr: SliceArray) -> SliceArray:
    """A one-row FULL piece (clip leaves one where a diagonal meets a corner, e.g. the last row
    of a causal document) joins the slice above or below whose rule gives that row."""
    rows = [_fields(arr, i) for i in range(len(arr))]
    by_end: dict[int, list[int]] = {}
    by_start: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        by_end.setdefault(r[1], []).append(i)
        by_start.setdefault(r[0], []).append(i)
    gone = set()
    for i, r in enumerate(rows):
        if r[1] - r[0] != 1 or r[4] != int(AttnMaskType.FULL):
            continue
        q, keys = r[0], (r[2], r[3])
        for j in by_end.get(q, []):
            s = rows[j]
            if j != i and j not in gone and s[1] == q and _row_of(s, q) == keys:
                s[1] += 1
                s[3] += 1 if _has_upper(s[4]) else 0
                gone.add(i)
                break
        else:
            for j in by_start.get(q + 1, []):
                s = rows[j]
                if j != i and j not in gone and s[0] == q + 1 and _row_of(s, q) == keys:
                    s[0] -= 1
                    s[2] -= 1 if _has_lower(s[4]) else 0
                    gone.add(i)
                    break
    return _to_array([r for i, r in enumerate(rows) if i not in gone])


_LOWER = (int(AttnMaskType.INVCAUSAL), int(AttnMaskType.BICAUSAL))
_UPPER = (int(AttnMaskType.CAUSAL), int(AttnMaskType.BICAUSAL))


def _has_diagonal(mask_type, types: tuple[int, int]):
    # scalars take the plain-int path: np.isin on one value costs tens of microseconds, and the
    # merge loops call this per slice (key build time at cp 8)
    if isinstance(mask_type, (int, np.integer)):
        return int(mask_type) in types
    return (mask_type == types[0]) | (mask_type == types[1])


def _has_lower(mask_type):
    return _has_diagonal(mask_type, _LOWER)


def _has_upper(mask_type):
    return _has_diagonal(mask_type, _UPPER)


def _type_of(lower: bool, upper: bool) -> int:
    return int(AttnMaskType.from_diagonals(lower, upper))


def _to_array(rows: list[list[int]]) -> SliceArray:
    data = np.array(rows, dtype=np.int64).reshape(-1, 5)
    return SliceArray(*data.T.copy())
