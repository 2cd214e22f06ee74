"""Time build_mask + area for every pattern at a long sequence: ``python -m bench.mask_timing``.

Prints one row per mask: name, num_slices (KV head 0), area, seconds (build + exact area).
A mask that takes a second or more here is too slow to build inside a benchmark sweep.
"""
from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from bench.masks import MASK_NAMES, build_mask

DEFAULT_SEQLEN = 1 << 20

# At S = 1M the default 64-token blocks / runs give ~5e7 slices (block_sparse: (S/64)^2 * 0.25
# tiles, hash_sparse: (S/64)^2 / 16), which build_mask refuses; these keep ~1e4-5e4 slices.
LONG_SEQLEN_PARAMS: dict[str, dict[str, Any]] = {
    "hash_sparse": {"run_len": 2048},
    "block_sparse": {"block_q": 2048, "block_k": 2048},
    "var_block_sparse": {"min_block": 1024, "max_block": 4096},
}


def doc_lens_for(seqlen: int, seed: int) -> list[int]:
    """bench.data's sampler when it is importable, else seeded lognormal lengths capped at S/4."""
    try:
        from bench.data import sample_doc_lens
    except ImportError:
        return _lognormal_doc_lens(seqlen, seed)
    return list(sample_doc_lens(seqlen, seed=seed))


def _lognormal_doc_lens(seqlen: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    cap = max(1, seqlen // 4)
    lens, left = [], seqlen
    while left:
        d = int(min(left, cap, max(1, rng.lognormal(mean=8.0, sigma=1.5))))
        lens.append(d)
        left -= d
    return lens


def time_masks(seqlen: int, seed: int) -> list[tuple[str, int, float, float, dict]]:
    doc_lens = doc_lens_for(seqlen, seed)
    rows = []
    for name in MASK_NAMES:
        params = LONG_SEQLEN_PARAMS.get(name, {}) if seqlen > (1 << 16) else {}
        start = time.perf_counter()
        mask = build_mask(name, seqlen, doc_lens=doc_lens, seed=seed, **params)
        area = mask.area
        seconds = time.perf_counter() - start
        rows.append((name, len(mask.slices), area, seconds, params))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqlen", type=int, default=DEFAULT_SEQLEN)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = time_masks(args.seqlen, args.seed)
    print(f"seqlen={args.seqlen} seed={args.seed}")
    print(f"| {'mask':<22} | {'num_slices':>10} | {'area':>16} | {'seconds':>7} | params")
    print(f"|{'-' * 24}|{'-' * 12}|{'-' * 18}|{'-' * 9}|-------")
    for name, num_slices, area, seconds, params in rows:
        print(f"| {name:<22} | {num_slices:>10} | {area:>16.0f} | {seconds:>7.3f} | {params or ''}")
    slow = [r[0] for r in rows if r[3] >= 1.0]
    if slow:
        print(f"over 1 s: {', '.join(slow)}")
    return 1 if slow else 0


if __name__ == "__main__":
    raise SystemExit(main())
