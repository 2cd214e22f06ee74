"""Every random choice a mask makes, each a pure function of its seed.

Generators and reference predicates both call these, so they agree on *which* tokens, spans or
blocks were drawn, while each derives the mask geometry from them independently.
"""
from __future__ import annotations

import numpy as np

# one sub-stream per kind of draw, so adding a draw to one pattern never shifts another's
_STREAM = {"prefix": 1, "drop_rows": 2, "drop_cols": 3, "buckets": 4, "kept_blocks": 5,
           "q_blocks": 6, "k_blocks": 7}


def _rng(seed: int, stream: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), _STREAM[stream]])


def draw_prefix_len(seed: int, low: int, high: int) -> int:
    """A prefix length drawn uniformly from ``[low, high]`` (inclusive)."""
    return int(_rng(seed, "prefix").integers(low, high + 1))


def draw_drop_spans(seed: int, seqlen: int, drop_ratio: float, num_drop_spans: int,
                    axis: str) -> np.ndarray:
    """Disjoint token spans to drop, ``[num_drop_spans, 2]`` int64 half-open, sorted.

    They cover ``round(drop_ratio * seqlen)`` tokens in total; span lengths and the gaps between
    spans are random compositions of the dropped and the kept token counts. ``axis`` is
    "rows" or "cols": each axis draws from its own stream.
    """
    rng = _rng(seed, "drop_rows" if axis == "rows" else "drop_cols")
    dropped = int(round(drop_ratio * seqlen))
    lengths = _composition(rng, dropped, num_drop_spans)
    gaps = _composition(rng, seqlen - dropped, num_drop_spans + 1)
    starts = np.cumsum(gaps[:-1]) + np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.stack([starts, starts + lengths], axis=1)


def _composition(rng: np.random.Generator, total: int, parts: int) -> np.ndarray:
    """``parts`` non-negative ints summing to ``total``, uniform over cut positions."""
    cuts = np.sort(rng.integers(0, total + 1, size=parts - 1))
    return np.diff(np.concatenate([[0], cuts, [total]])).astype(np.int64)


def draw_run_buckets(seed: int, num_runs: int, num_buckets: int) -> np.ndarray:
    """Bucket id of each run of tokens, ``[num_runs]`` int64: a seeded hash of the run index."""
    return _rng(seed, "buckets").integers(0, num_buckets, size=num_runs)


def draw_kept_blocks(seed: int, num_heads: int, num_q_blocks: int, num_k_blocks: int,
                     sparsity: float) -> np.ndarray:
    """``[num_heads, num_q_blocks, num_k_blocks]`` bool: the key blocks each query block keeps.

    Each (head, query block) keeps exactly ``max(1, round(sparsity * num_k_blocks))`` key blocks,
    chosen uniformly without replacement, so the kept fraction is exact and no row is empty.
    """
    num_kept = max(1, int(round(sparsity * num_k_blocks)))
    scores = _rng(seed, "kept_blocks").random((num_heads, num_q_blocks, num_k_blocks),
                                              dtype=np.float32)
    chosen = np.argpartition(scores, num_kept - 1, axis=-1)[..., :num_kept]
    kept = np.zeros(scores.shape, dtype=bool)
    np.put_along_axis(kept, chosen, True, axis=-1)
    return kept


def draw_block_edges(seed: int, seqlen: int, min_block: int, max_block: int, axis: str
                     ) -> np.ndarray:
    """Block edges ``[num_blocks + 1]`` int64 from 0 to seqlen; sizes are multiples of min_block
    in ``[min_block, max_block]``, drawn uniformly (the last block is cut at seqlen)."""
    rng = _rng(seed, "q_blocks" if axis == "q" else "k_blocks")
    most = -(-seqlen // min_block)  # enough blocks even if every one is the smallest
    sizes = rng.integers(1, max_block // min_block + 1, size=most) * min_block
    edges = np.concatenate([[0], np.cumsum(sizes)])
    num_blocks = int(np.searchsorted(edges, seqlen))  # first edge >= seqlen
    edges = edges[:num_blocks + 1].copy()
    edges[-1] = seqlen
    return edges
