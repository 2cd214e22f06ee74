"""Mask algebra over lists of AttnSlice: exact union area, dense form (small S), normalisation."""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import torch

from .mask_type import AttnMaskType
from .range import AttnRange, RangeError
from .slice import AttnSlice
from .slice_array import SliceArray


def union_area(slices: Sequence[AttnSlice], arrays: SliceArray | None = None) -> int:
    """Exact number of (q, k) cells covered by at least one slice.

    Slices are grouped into bands that chain-overlap in q. A band whose k_ranges are pairwise
    disjoint has pairwise disjoint rectangles, so its area is the sum of closed-form slice areas
    (vectorised); only the other bands are resolved row by row (O(rows of the band), never
    O(S^2)). ``arrays``, if given, must be ``SliceArray.from_slices(slices)``.
    """
    if not slices:
        return 0
    arr = SliceArray.from_slices(slices) if arrays is None else arrays
    areas = arr.areas()
    live = np.flatnonzero(areas > 0)
    arr, areas = arr.take(live), areas[live]
    if len(arr) == 0:
        return 0
    order = np.lexsort((arr.k_start, arr.q_start))
    qs, qe = arr.q_start[order], arr.q_end[order]
    reach = np.maximum.accumulate(qe)
    band = np.concatenate([[0], np.cumsum(qs[1:] >= reach[:-1])])
    # within each band, disjoint k_ranges sorted by start have every start >= the previous end
    by_k = np.lexsort((arr.k_start[order], band))
    ks, ke, bnd = arr.k_start[order][by_k], arr.k_end[order][by_k], band[by_k]
    clash = (bnd[1:] == bnd[:-1]) & (ks[1:] < ke[:-1])
    is_bad = np.isin(band, np.unique(bnd[1:][clash]))
    total = int(areas[order][~is_bad].sum())
    if is_bad.any():
        total += _overlapping_union_area([slices[i] for i in live[order[is_bad]]])
    return total


def _overlapping_union_area(slices: list[AttnSlice]) -> int:
    """union_area, slice by slice: closed form for isolated rectangles, rows for overlapping groups."""
    total = 0
    for group in _overlap_groups(slices):
        if len(group) == 1:
            total += group[0].area()
        else:
            total += _group_union_area(group)
    return total


def _overlap_groups(slices: list[AttnSlice]) -> list[list[AttnSlice]]:
    """Connected groups of slices whose rectangles intersect (sweep along q, then along k)."""
    groups: list[list[AttnSlice]] = []
    order = sorted(slices, key=lambda s: s.q_range.start)
    band: list[AttnSlice] = []
    band_end = -1
    for s in order + [None]:
        if s is None or s.q_range.start >= band_end:
            groups.extend(_split_by_k(band))
            band, band_end = [], -1
            if s is None:
                break
        band.append(s)
        band_end = max(band_end, s.q_range.end)
    return groups


def _split_by_k(band: list[AttnSlice]) -> list[list[AttnSlice]]:
    """Within slices that chain-overlap in q, split into groups that also overlap in k (union-find)."""
    if len(band) <= 1:
        return [band] if band else []
    parent = list(range(len(band)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    # rectangles intersect iff both projections do; n is small inside one q-band in practice,
    # but sort by k so each pair test can stop early
    idx = sorted(range(len(band)), key=lambda i: band[i].k_range.start)
    for a_pos, a in enumerate(idx):
        ra = band[a]
        for b in idx[a_pos + 1:]:
            rb = band[b]
            if rb.k_range.start >= ra.k_range.end:
                break
            if rb.q_range.start < ra.q_range.end and ra.q_range.start < rb.q_range.end:
                parent[find(a)] = find(b)
    groups: dict[int, list[AttnSlice]] = {}
    for i, s in enumerate(band):
        groups.setdefault(find(i), []).append(s)
    return list(groups.values())


def _group_union_area(group: list[AttnSlice]) -> int:
    q_start = min(s.q_range.start for s in group)
    q_end = max(s.q_range.end for s in group)
    rows = np.arange(q_start, q_end, dtype=np.int64)
    bounds = [s.row_bounds(rows) for s in group]
    lo = np.stack([b[0] for b in bounds])
    hi = np.stack([b[1] for b in bounds])
    hi = np.maximum(hi, lo)  # empty rows become zero-length intervals
    order = np.argsort(lo, axis=0, kind="stable")
    lo = np.take_along_axis(lo, order, axis=0)
    hi = np.take_along_axis(hi, order, axis=0)
    covered = np.zeros(rows.shape, dtype=np.int64)
    reach = np.full(rows.shape, np.iinfo(np.int64).min)
    for i in range(lo.shape[0]):  # sweep intervals of every row at once, sorted by start
        start = np.maximum(lo[i], reach)
        covered += np.maximum(hi[i] - start, 0)
        reach = np.maximum(reach, hi[i])
    return int(covered.sum())


def to_dense(slices: Iterable[AttnSlice], seqlen_q: int, seqlen_k: int | None = None,
             device: str | torch.device = "cpu") -> torch.Tensor:
    """Dense ``[seqlen_q, seqlen_k]`` bool mask. Materialises S^2 cells: small sizes only."""
    seqlen_k = seqlen_q if seqlen_k is None else seqlen_k
    mask = torch.zeros(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    for s in slices:
        check_slice_bounds(s, seqlen_q, seqlen_k)
        q = torch.arange(s.q_range.start, s.q_range.end, device=device)[:, None]
        k = torch.arange(s.k_range.start, s.k_range.end, device=device)[None, :]
        keep = torch.ones(q.shape[0], k.shape[1], dtype=torch.bool, device=device)
        if s.lower_offset is not None:
            keep &= k >= q + s.lower_offset
        if s.upper_offset is not None:
            keep &= k <= q + s.upper_offset
        mask[s.q_range.start:s.q_range.end, s.k_range.start:s.k_range.end] |= keep
    return mask


def check_slice_bounds(s: AttnSlice, seqlen_q: int, seqlen_k: int) -> None:
    s.q_range.check_within(seqlen_q, "q_range")
    s.k_range.check_within(seqlen_k, "k_range")


def normalize(slices: Iterable[AttnSlice]) -> list[AttnSlice]:
    """Tight, sorted slices with empty ones dropped and FULL neighbours fused.

    The union is unchanged. Slices are not made disjoint: kernels and the area merge overlaps.
    """
    pieces = sorted((p for s in slices for p in s.tight_pieces()),
                    key=lambda s: (s.q_range.start, s.k_range.start, s.q_range.end, s.k_range.end,
                                   int(s.mask_type)))
    out: list[AttnSlice] = []
    for p in pieces:
        if out and p == out[-1]:
            continue
        prev = out[-1] if out else None
        if (prev is not None and prev.mask_type == p.mask_type == AttnMaskType.FULL
                and prev.q_range == p.q_range and prev.k_range.end == p.k_range.start):
            out[-1] = AttnSlice(prev.q_range, AttnRange(prev.k_range.start, p.k_range.end))
            continue
        out.append(p)
    return _fuse_rows(out)


def _fuse_rows(slices: list[AttnSlice]) -> list[AttnSlice]:
    """Fuse FULL slices with equal k_range and touching q_ranges."""
    by_k: dict[AttnRange, list[AttnSlice]] = {}
    rest: list[AttnSlice] = []
    for s in slices:
        (by_k.setdefault(s.k_range, []) if s.mask_type == AttnMaskType.FULL else rest).append(s)
    for k_range, group in by_k.items():
        group.sort(key=lambda s: s.q_range.start)
        cur = group[0]
        for s in group[1:]:
            if s.q_range.start == cur.q_range.end:
                cur = AttnSlice(AttnRange(cur.q_range.start, s.q_range.end), k_range)
            else:
                rest.append(cur)
                cur = s
        rest.append(cur)
    return sorted(rest, key=lambda s: (s.q_range.start, s.k_range.start, int(s.mask_type)))


def slices_to_tensors(slices: Sequence[AttnSlice], device="cpu"
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(q_ranges [n, 2] int32, k_ranges [n, 2] int32, attn_type_map [n] int32)."""
    q = torch.tensor([[s.q_range.start, s.q_range.end] for s in slices], dtype=torch.int32)
    k = torch.tensor([[s.k_range.start, s.k_range.end] for s in slices], dtype=torch.int32)
    t = torch.tensor([int(s.mask_type) for s in slices], dtype=torch.int32)
    return q.reshape(-1, 2).to(device), k.reshape(-1, 2).to(device), t.to(device)


def slices_from_tensors(q_ranges: torch.Tensor, k_ranges: torch.Tensor,
                        attn_type_map: torch.Tensor | None = None) -> list[AttnSlice]:
    """Inverse of slices_to_tensors; validates shapes and range bounds (RangeError names the range)."""
    if q_ranges.dim() != 2 or q_ranges.shape[-1] != 2:
        raise ValueError(f"q_ranges must be [num_slices, 2], got {tuple(q_ranges.shape)}")
    if k_ranges.shape != q_ranges.shape:
        raise ValueError(f"k_ranges shape {tuple(k_ranges.shape)} != q_ranges shape "
                         f"{tuple(q_ranges.shape)}: num_slices must match")
    n = q_ranges.shape[0]
    if attn_type_map is None:
        types = [0] * n
    else:
        if attn_type_map.shape != (n,):
            raise ValueError(f"attn_type_map must be [num_slices={n}], got {tuple(attn_type_map.shape)}")
        types = attn_type_map.tolist()
    out = []
    for i, (qr, kr, t) in enumerate(zip(q_ranges.tolist(), k_ranges.tolist(), types)):
        try:
            out.append(AttnSlice(AttnRange(*qr), AttnRange(*kr), AttnMaskType.parse(t)))
        except RangeError as e:
            raise RangeError(f"slice {i}: {e}") from None
    return out
