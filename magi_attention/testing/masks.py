"""Masks for the library's tests: each builder a pure function of explicit arguments returning
list[AttnSlice] (randomness only from a passed seed), and ``named_mask(name, seqlen, seed)``,
the named masks the "every mask" tests parametrize over (``MASK_NAMES``).

Square masks over ``seqlen`` tokens; documents are ``doc_lens`` back to back (summing to
seqlen). The names follow the benchmark's patterns of the same shape.
"""
from __future__ import annotations

from itertools import accumulate
from typing import Callable, Sequence

import numpy as np

from ..common import AttnMaskType, AttnRange, AttnSlice, region_to_slices

FULL, CAUSAL, BICAUSAL = AttnMaskType.FULL, AttnMaskType.CAUSAL, AttnMaskType.BICAUSAL


def full(seqlen: int) -> list[AttnSlice]:
    return [AttnSlice.make(0, seqlen, 0, seqlen, FULL)]


def causal(seqlen: int) -> list[AttnSlice]:
    """k <= q (CAUSAL is bottom-right aligned: on a square, the diagonal)."""
    return [AttnSlice.make(0, seqlen, 0, seqlen, CAUSAL)]


def sliding_window(seqlen: int, window: int) -> list[AttnSlice]:
    """|q - k| <= window (a corner, a band and a corner)."""
    return region_to_slices(0, seqlen, 0, seqlen, -window, window)


def sliding_window_causal(seqlen: int, window: int) -> list[AttnSlice]:
    """0 <= q - k <= window: one CAUSAL corner for the first window + 1 rows, one BICAUSAL band
    below it."""
    corner = min(window + 1, seqlen)
    slices = [AttnSlice.make(0, corner, 0, corner, CAUSAL)]
    if corner < seqlen:
        slices.append(AttnSlice.make(corner, seqlen, 1, seqlen, BICAUSAL))
    return slices


def global_sliding_window(seqlen: int, window: int, num_global: int) -> list[AttnSlice]:
    """|q - k| <= window, or q or k among the first ``num_global`` tokens."""
    g = min(num_global, seqlen)
    slices = [AttnSlice.make(0, g, 0, seqlen, FULL)] if g else []
    if g < seqlen:
        if g:
            slices.append(AttnSlice.make(g, seqlen, 0, g, FULL))
        slices += region_to_slices(g, seqlen, g, seqlen, -window, window)
    return slices


def prefix_lm_causal(seqlen: int, prefix_len: int) -> list[AttnSlice]:
    """k <= q, and the first ``prefix_len`` tokens see each other in full."""
    slices = [AttnSlice.make(0, prefix_len, 0, prefix_len, FULL)] if prefix_len else []
    if prefix_len < seqlen:
        slices.append(AttnSlice.make(prefix_len, seqlen, 0, seqlen, CAUSAL))
    return slices


def per_document(doc_lens: Sequence[int], inner: Callable[[int], list[AttnSlice]]
                 ) -> list[AttnSlice]:
    """``inner(length)`` of each document, moved onto its diagonal block."""
    return [s.shift(start, start) for start, length in zip(accumulate([0, *doc_lens]), doc_lens)
            for s in inner(length)]


def full_document(doc_lens: Sequence[int]) -> list[AttnSlice]:
    return per_document(doc_lens, full)


def causal_document(doc_lens: Sequence[int]) -> list[AttnSlice]:
    return per_document(doc_lens, causal)


def block_causal_document(doc_lens: Sequence[int], block_size: int) -> list[AttnSlice]:
    """Per document, blocks of ``block_size`` tokens that see themselves and every block
    before them."""
    def blocks(length: int) -> list[AttnSlice]:
        return [AttnSlice.make(b, min(b + block_size, length), 0, min(b + block_size, length))
                for b in range(0, length, block_size)]
    return per_document(doc_lens, blocks)


def share_question(doc_lens: Sequence[int]) -> list[AttnSlice]:
    """Causal per document; every later document (an answer) also sees all of the first (the
    question)."""
    starts = list(accumulate([0, *doc_lens]))
    return causal_document(doc_lens) + [AttnSlice.make(starts[i], starts[i + 1], 0, doc_lens[0])
                                        for i in range(1, len(doc_lens))]


# packed training data: a median document of ~700 tokens (a sixteenth of shorter packs), a
# long tail cut at the pack's cap
DOC_LEN_MEDIAN, DOC_LEN_SIGMA = 700, 1.3


def random_doc_lens(seqlen: int, seed: int, max_len: int | None = None,
                    min_len: int = 16) -> list[int]:
    """Document lengths summing to ``seqlen``, log-normal around DOC_LEN_MEDIAN tokens (at most
    a sixteenth of seqlen) within
    [min_len, max_len] (None: a quarter of seqlen), so many short documents stand beside a few
    of the longest length, as in packed training data; the last one takes the rest."""
    max_len = max_len or max(seqlen // 4, min_len)
    median = max(min(DOC_LEN_MEDIAN, seqlen // 16), min_len)
    rng = np.random.default_rng(seed)
    lens: list[int] = []
    while sum(lens) < seqlen:
        drawn = rng.lognormal(np.log(median), DOC_LEN_SIGMA)
        lens.append(int(np.clip(drawn, min_len, max_len)))
    lens[-1] -= sum(lens) - seqlen
    return [n for n in lens if n > 0]


# Packs of document lengths drawn from a training set's length distribution (the benchmark's
# default, capped at a quarter of the pack): the documents the kernels' and solvers' rules were
# measured on, for tests that check a rule on them
MEASURED_PACKS: dict[int, tuple[int, ...]] = {
    16384: (543, 290, 75, 27, 1437, 2106, 503, 1152, 505, 3422, 1563, 36, 1288, 81, 1807, 139,
            1410),
    32768: (722, 346, 86, 46, 1099, 3961, 779, 1391, 853, 3219, 1285, 23, 1761, 80, 1541, 134,
            1803, 706, 299, 468, 21, 123, 875, 827, 526, 226, 8192, 1376),
    65536: (749, 487, 60, 30, 1076, 2919, 996, 1660, 684, 4086, 1643, 48, 1041, 74, 1879, 176,
            1442, 761, 327, 359, 20, 179, 541, 718, 648, 421, 16384, 16384, 9744),
}


def random_spans(seqlen: int, count: int, ratio: float, seed: int) -> list[tuple[int, int]]:
    """``count`` disjoint sorted spans [start, end) of equal length, at random places, covering
    about ``ratio`` of [0, seqlen)."""
    length = max(1, int(ratio * seqlen / count))
    slots = np.random.default_rng(seed).choice(seqlen // length, size=min(count, seqlen // length),
                                               replace=False)
    return [(int(s) * length, int(s) * length + length) for s in np.sort(slots)]


def _kept(seqlen: int, dropped: Sequence[tuple[int, int]]) -> list[AttnRange]:
    bounds = [0, *(x for span in dropped for x in span), seqlen]
    return [AttnRange(a, b) for a, b in zip(bounds[0::2], bounds[1::2]) if b > a]


def qk_sparse(seqlen: int, dropped_rows: Sequence[tuple[int, int]],
              dropped_cols: Sequence[tuple[int, int]]) -> list[AttnSlice]:
    """k <= q for q and k outside the dropped spans (so a row's keys are several intervals): the
    causal slice clipped to every pair of kept spans."""
    whole = AttnSlice.make(0, seqlen, 0, seqlen, CAUSAL)
    return [piece for r in _kept(seqlen, dropped_rows) for c in _kept(seqlen, dropped_cols)
            if c.start < r.end for piece in whole.clip(r, c)]


def hash_sparse(seqlen: int, run_buckets: Sequence[int], run_len: int) -> list[AttnSlice]:
    """k <= q within a bucket, token t in bucket ``run_buckets[t // run_len]``: each run one
    CAUSAL slice, each earlier run of its bucket one FULL slice."""
    runs = [(r * run_len, min(r * run_len + run_len, seqlen)) for r in range(len(run_buckets))]
    slices = []
    for r, (q0, q1) in enumerate(runs):
        slices += [AttnSlice.make(q0, q1, k0, k1, FULL) for e, (k0, k1) in enumerate(runs[:r])
                   if run_buckets[e] == run_buckets[r]]
        slices.append(AttnSlice.make(q0, q1, q0, q1, CAUSAL))
    return slices


def block_sparse(q_edges: Sequence[int], k_edges: Sequence[int], kept: np.ndarray
                 ) -> list[AttnSlice]:
    """kept [q blocks, key blocks] bool, the blocks between consecutive edges: each run of kept
    key blocks of a q block is one FULL slice."""
    slices = []
    for i, row in enumerate(np.asarray(kept, dtype=np.int8)):
        step = np.diff(np.concatenate([[0], row, [0]]))  # +1 where a run starts, -1 past its end
        for a, b in zip(np.flatnonzero(step == 1), np.flatnonzero(step == -1)):
            slices.append(AttnSlice.make(int(q_edges[i]), int(q_edges[i + 1]), int(k_edges[a]),
                                         int(k_edges[b]), FULL))
    return slices


def random_block_sparse(seqlen: int, seed: int, block: int | tuple[int, int] = 64,
                        density: float = 0.25) -> list[AttnSlice]:
    """Each q block keeps ``density`` of the key blocks, drawn at random; ``block``: the block
    size, or (smallest, largest) for random sizes in steps of the smallest."""
    rng = np.random.default_rng([seed, 3])

    def edges() -> list[int]:
        if isinstance(block, int):
            return [*range(0, seqlen, block), seqlen]
        lo, hi = block
        cuts = [0]
        while cuts[-1] < seqlen:
            cuts.append(cuts[-1] + lo * int(rng.integers(1, hi // lo + 1)))
        return cuts[:-1] + [seqlen]
    q_edges, k_edges = edges(), edges()
    nq, nk = len(q_edges) - 1, len(k_edges) - 1
    keep = max(1, round(density * nk))
    kept = np.zeros((nq, nk), dtype=bool)
    for i in range(nq):
        kept[i, rng.choice(nk, size=keep, replace=False)] = True
    return block_sparse(q_edges, k_edges, kept)


# The named test masks: (builder of (seqlen, doc_lens, seed, params), default params). Defaults
# are sized for 1k-64k tokens, as the benchmark's; tests at a few hundred tokens pass smaller
# ones. Document patterns draw random_doc_lens from the seed unless given doc_lens.
_PATTERNS: dict[str, tuple[Callable, dict]] = {
    "full": (lambda s, d, seed, p: full(s), {}),
    "causal": (lambda s, d, seed, p: causal(s), {}),
    "full_document": (lambda s, d, seed, p: full_document(d), {}),
    "causal_document": (lambda s, d, seed, p: causal_document(d), {}),
    "share_question": (lambda s, d, seed, p: share_question(d), {}),
    "block_causal_document": (lambda s, d, seed, p: block_causal_document(d, p["block_size"]),
                              {"block_size": 2048}),
    "prefix_lm_causal": (lambda s, d, seed, p: prefix_lm_causal(s, p["prefix_len"] or s // 3),
                         {"prefix_len": None}),
    "sliding_window": (lambda s, d, seed, p: sliding_window(s, p["window"]), {"window": 1024}),
    "sliding_window_causal": (lambda s, d, seed, p: sliding_window_causal(s, p["window"]),
                              {"window": 1024}),
    "global_sliding_window": (
        lambda s, d, seed, p: global_sliding_window(s, p["window"], p["num_global"]),
        {"window": 1024, "num_global": 128}),
    "qk_sparse": (lambda s, d, seed, p: qk_sparse(
        s, *(random_spans(s, p["num_drop_spans"], p["drop_ratio"], seed * 2 + axis)
             for axis in (0, 1))), {"drop_ratio": 0.1, "num_drop_spans": 4}),
    "hash_sparse": (lambda s, d, seed, p: hash_sparse(s, np.random.default_rng(seed).integers(
        0, p["num_buckets"], -(-s // p["run_len"])).tolist(), p["run_len"]),
        {"run_len": 64, "num_buckets": 8}),
    "block_sparse": (lambda s, d, seed, p: random_block_sparse(s, seed, p["block"],
                                                               p["sparsity"]),
                     {"block": 64, "sparsity": 0.25}),
    "var_block_sparse": (lambda s, d, seed, p: random_block_sparse(
        s, seed, (p["min_block"], p["max_block"]), p["sparsity"]),
        {"min_block": 64, "max_block": 512, "sparsity": 0.25}),
}
MASK_NAMES: tuple[str, ...] = tuple(_PATTERNS)
DOCUMENT_MASK_NAMES = ("full_document", "causal_document", "share_question",
                       "block_causal_document")


def named_mask(name: str, seqlen: int, seed: int = 0, doc_lens: Sequence[int] | None = None,
               **params) -> list[AttnSlice]:
    """The test mask ``name`` (one of MASK_NAMES) over ``seqlen`` tokens; ``params`` override
    the pattern's defaults (window, block_size, run_len, ...)."""
    if name not in _PATTERNS:
        raise ValueError(f"name must be one of {MASK_NAMES}, got {name!r}")
    build, defaults = _PATTERNS[name]
    unknown = set(params) - set(defaults)
    if unknown:
        raise ValueError(f"mask {name!r} takes {sorted(defaults)}, got {sorted(unknown)}")
    if doc_lens is not None and sum(doc_lens) != seqlen:
        raise ValueError(f"doc_lens must sum to seqlen={seqlen}, got {sum(doc_lens)}")
    if doc_lens is None and name in DOCUMENT_MASK_NAMES:
        doc_lens = random_doc_lens(seqlen, seed)
    return build(seqlen, doc_lens, seed, {**defaults, **params})
