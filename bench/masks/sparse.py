"""Token-sparse causal patterns: qk_sparse (dropped rows and columns) and hash_sparse (buckets).

The random parts (which spans are dropped, which bucket a run falls in) come from
``_random``; generators turn them into slices, ``*_reference`` into per-token predicates.
"""
from __future__ import annotations

import numpy as np
import torch

from magi_attention.common import AttnMaskType, AttnRange, AttnSlice

from .basic import Predicate, _named


def _kept_segments(seqlen: int, dropped: np.ndarray) -> list[AttnRange]:
    """Complement of the sorted disjoint spans ``dropped [n, 2]`` in [0, seqlen)."""
    bounds = [0, *dropped.reshape(-1).tolist(), seqlen]
    return [AttnRange(a, b) for a, b in zip(bounds[0::2], bounds[1::2]) if b > a]


def qk_sparse(seqlen: int, dropped_rows: np.ndarray, dropped_cols: np.ndarray) -> list[AttnSlice]:
    """Causal restricted to kept rows x kept columns: the causal slice clipped to each pair of
    kept segments (<= (spans + 1)^2 pairs, most of them above the diagonal and empty)."""
    whole = AttnSlice.make(0, seqlen, 0, seqlen, AttnMaskType.CAUSAL)
    rows, cols = _kept_segments(seqlen, dropped_rows), _kept_segments(seqlen, dropped_cols)
    return [piece for r in rows for c in cols if c.start < r.end for piece in whole.clip(r, c)]


def _token_flags(seqlen: int, spans: np.ndarray) -> torch.Tensor:
    flags = torch.zeros(seqlen, dtype=torch.bool)
    for start, end in spans.tolist():
        flags[start:end] = True
    return flags


def qk_sparse_reference(seqlen: int, dropped_rows: np.ndarray, dropped_cols: np.ndarray
                        ) -> Predicate:
    row_dropped, col_dropped = _token_flags(seqlen, dropped_rows), _token_flags(seqlen, dropped_cols)

    def pred(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (k <= q) & ~row_dropped.to(q.device)[q] & ~col_dropped.to(k.device)[k]
    return _named(pred, "qk_sparse")


def _bucket_segments(run_buckets: np.ndarray, run_len: int, seqlen: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximal stretches of consecutive runs in one bucket: (starts, ends, buckets) in tokens."""
    change = np.flatnonzero(np.diff(run_buckets)) + 1
    first_run = np.concatenate([[0], change])
    starts = first_run * run_len
    ends = np.minimum(np.append(first_run[1:] * run_len, seqlen), seqlen)
    return starts, ends, run_buckets[first_run]


def hash_sparse(seqlen: int, run_buckets: np.ndarray, run_len: int) -> list[AttnSlice]:
    """Token t is in bucket ``run_buckets[t // run_len]``; a query sees keys <= itself in its bucket.

    Bucket membership comes in runs of run_len tokens (a hash of the run, not of the token), so a
    stretch of same-bucket tokens is one CAUSAL slice and each earlier stretch of its bucket one
    FULL slice: ~num_runs^2 / (2 num_buckets) slices, where per-token hashing would give ~S^2.
    """
    starts, ends, buckets = _bucket_segments(run_buckets, run_len, seqlen)
    slices: list[AttnSlice] = []
    for bucket in np.unique(buckets):
        mine = np.flatnonzero(buckets == bucket)
        for i, seg in enumerate(mine):
            q0, q1 = int(starts[seg]), int(ends[seg])
            slices += [AttnSlice.make(q0, q1, int(starts[e]), int(ends[e])) for e in mine[:i]]
            slices.append(AttnSlice.make(q0, q1, q0, q1, AttnMaskType.CAUSAL))
    return slices


def hash_sparse_reference(run_buckets: np.ndarray, run_len: int) -> Predicate:
    buckets = torch.as_tensor(run_buckets, dtype=torch.int64)

    def pred(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        b = buckets.to(q.device)
        return (k <= q) & (b[q // run_len] == b[k // run_len])
    return _named(pred, f"hash_sparse_{run_len}")
