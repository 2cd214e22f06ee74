"""Per-row kept-key intervals of a whole mask head, in row chunks so memory stays bounded."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from magi_attention.common import SliceArray

# rows per chunk: a block-sparse row holds ~nk/8 intervals, so 8k rows x 1k intervals stays ~100 MB
ROW_CHUNK = 8192


def iter_row_chunks(arr: SliceArray, seqlen: int, chunk: int = ROW_CHUNK
                    ) -> Iterator[tuple[int, int, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Yield ``(row_start, row_end, (rows, lo, hi))`` for consecutive row chunks covering [0, S)."""
    for start in range(0, seqlen, chunk):
        end = min(start + chunk, seqlen)
        yield start, end, arr.row_intervals(start, end, seqlen)


def all_row_intervals(arr: SliceArray, seqlen: int, transpose: bool = False
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, lo, hi)`` for every row, merged and sorted; with transpose, per key column."""
    if transpose:
        arr = arr.transpose()
    parts = [iv for _, _, iv in iter_row_chunks(arr, seqlen)]
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))
