"""Draw document lengths from a LengthDistribution and pack them into fixed-length sequences.

Packing rules (the choices the mask generators rely on):

1. Documents are drawn i.i.d.: a bin by its count, then a length uniform over the bin's integers,
   never below 1 (the reference's first bin starts at 0, and a document needs a token).
   I.i.d. draws are already in uniformly random order, so no separate shuffle of the documents is
   needed before packing.
2. Documents fill a pack in draw order. The document that crosses the pack's end is cut to fit, and
   its remainder is dropped, not carried into the next pack: every pack starts with a whole draw,
   no document is counted in two packs, and the packs are independent of each other (so they are
   also in random order without a reshuffle).
3. Then every document longer than ``cap = floor(cap_ratio * seqlen)`` is split into consecutive
   pieces of ``cap`` tokens plus a shorter remainder piece, in place. Splitting (rather than
   truncating) keeps each pack summing to exactly ``seqlen`` with no refill, and keeps the long
   documents' tokens as several maximal-length documents, which is what makes varlen masks heavy.

So within a pack the last document is the cut one (possibly short), and a long draw shows up as a
run of ``cap``-length documents.
"""
from __future__ import annotations

import math

import numpy as np

from bench.data.distribution import LengthDistribution, load_distribution

__all__ = ["sample_documents", "sample_packs", "sample_doc_lens"]


def _as_distribution(distribution: str | LengthDistribution) -> LengthDistribution:
    if isinstance(distribution, LengthDistribution):
        return distribution
    return load_distribution(distribution)


def _check_seed(seed: int) -> None:
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")


def _draw(rng: np.random.Generator, dist: LengthDistribution, num_docs: int) -> np.ndarray:
    """``num_docs`` i.i.d. lengths: int64 ``[num_docs]``, each >= 1."""
    bins = np.asarray(dist.bins, dtype=np.int64)
    low = np.maximum(bins[:, 0], 1)
    which = rng.choice(len(bins), size=num_docs, p=np.asarray(dist.probs))
    return rng.integers(low[which], bins[which, 1], endpoint=True)


def sample_documents(num_docs: int, seed: int = 0,
                     distribution: str | LengthDistribution = "default") -> list[int]:
    """Draw document lengths i.i.d. from a distribution, with no packing and no cap.

    Args:
        num_docs: how many lengths to draw (>= 0).
        seed: seed of the numpy Generator; equal seeds give equal lists.
        distribution: a shipped name, a CSV path, or a LengthDistribution.

    Returns:
        ``num_docs`` lengths in tokens, each >= 1 and within one bin of the distribution.

    Raises:
        ValueError: negative num_docs or seed, or a distribution that cannot be loaded.

    Example:
        >>> len(sample_documents(5, seed=1))
        5
    """
    if num_docs < 0:
        raise ValueError(f"num_docs must be >= 0, got {num_docs}")
    _check_seed(seed)
    dist = _as_distribution(distribution)
    return _draw(np.random.default_rng(seed), dist, num_docs).tolist()


def _split_at_cap(pack: list[int], cap: int) -> list[int]:
    out = []
    for length in pack:
        full, rest = divmod(length, cap)
        out.extend([cap] * full)
        if rest:
            out.append(rest)
    return out


def _fill_packs(rng: np.random.Generator, dist: LengthDistribution, seqlen: int,
                num_packs: int) -> list[list[int]]:
    # Draw in batches sized from the mean length, so a pack costs O(1) numpy calls on average.
    mean_len = sum((max(low, 1) + high) / 2 * p for (low, high), p in zip(dist.bins, dist.probs))
    batch = max(16, int(2 * seqlen / mean_len))
    packs: list[list[int]] = []
    current: list[int] = []
    room = seqlen
    while len(packs) < num_packs:
        for length in _draw(rng, dist, batch).tolist():
            current.append(min(length, room))  # the crossing document is cut; its rest is dropped
            room -= current[-1]
            if room == 0:
                packs.append(current)
                current, room = [], seqlen
                if len(packs) == num_packs:
                    break
    return packs


def sample_packs(seqlen: int, num_packs: int, seed: int = 0,
                 distribution: str | LengthDistribution = "default",
                 cap_ratio: float = 0.25) -> list[list[int]]:
    """Sample packs of documents, each pack exactly ``seqlen`` tokens (rules in the module docstring).

    Args:
        seqlen: tokens per pack (>= 1).
        num_packs: number of packs (>= 1).
        seed: seed of the numpy Generator; equal arguments give equal packs.
        distribution: a shipped name, a CSV path, or a LengthDistribution.
        cap_ratio: in (0, 1]; no document is longer than ``floor(cap_ratio * seqlen)``.

    Returns:
        ``num_packs`` lists of document lengths; each list sums to ``seqlen`` and every length is in
        ``[1, floor(cap_ratio * seqlen)]``. Pack ``i`` does not depend on ``num_packs``, so
        ``sample_packs(s, n, seed)[:k] == sample_packs(s, k, seed)`` for ``k <= n``.

    Raises:
        ValueError: seqlen < 1, num_packs < 1, cap_ratio outside (0, 1], a cap below one token
            (``cap_ratio * seqlen < 1``), a negative seed, or an unloadable distribution.

    Example:
        >>> [sum(p) for p in sample_packs(4096, num_packs=2, seed=0)]
        [4096, 4096]
    """
    if not isinstance(seqlen, (int, np.integer)) or seqlen < 1:
        raise ValueError(f"seqlen must be an int >= 1, got {seqlen!r}")
    if not isinstance(num_packs, (int, np.integer)) or num_packs < 1:
        raise ValueError(f"num_packs must be an int >= 1, got {num_packs!r}")
    if not 0 < cap_ratio <= 1:
        raise ValueError(f"cap_ratio must be in (0, 1], got {cap_ratio}")
    cap = math.floor(cap_ratio * seqlen)
    if cap < 1:
        raise ValueError(f"cap_ratio={cap_ratio} with seqlen={seqlen} caps documents at {cap} tokens; "
                         "need cap_ratio * seqlen >= 1")
    _check_seed(seed)
    dist = _as_distribution(distribution)
    packs = _fill_packs(np.random.default_rng(seed), dist, seqlen, num_packs)
    return [_split_at_cap(pack, cap) for pack in packs]


def sample_doc_lens(seqlen: int, seed: int = 0, distribution: str | LengthDistribution = "default",
                    cap_ratio: float = 0.25) -> list[int]:
    """One pack of :func:`sample_packs`: the document lengths a mask generator takes.

    Returns:
        Document lengths summing to ``seqlen``, each in ``[1, floor(cap_ratio * seqlen)]``.

    Raises:
        ValueError: as :func:`sample_packs`.

    Example:
        >>> sum(sample_doc_lens(8192, seed=3))
        8192
    """
    return sample_packs(seqlen, 1, seed=seed, distribution=distribution, cap_ratio=cap_ratio)[0]
