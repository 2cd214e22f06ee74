"""Helpers for the mask tests: random document lengths and small-S parameters for every pattern."""
import numpy as np
import pytest

from bench.masks import PATTERNS, build_mask


def random_doc_lens(seqlen: int, seed: int) -> list[int]:
    """Random document lengths summing to seqlen, each <= max(1, seqlen // 4)."""
    rng = np.random.default_rng(seed)
    cap = max(1, seqlen // 4)
    lens, left = [], seqlen
    while left:
        d = int(min(left, cap, rng.integers(1, cap + 1)))
        lens.append(d)
        left -= d
    return lens


def small_params(name: str, seqlen: int, seed: int) -> dict:
    """Parameters scaled to seqlen so that every pattern's structure shows at small S."""
    rng = np.random.default_rng([seed, seqlen])
    params: dict = {}
    if "window" in PATTERNS[name].defaults:
        params["window"] = int(rng.integers(0, max(2, seqlen // 4)))
    if name == "global_sliding_window":
        params["num_global"] = int(rng.integers(0, max(2, seqlen // 16)))
    if name == "block_causal_document":
        params["block_size"] = int(rng.integers(1, max(2, seqlen // 8)))
    if name == "hash_sparse":
        params.update(run_len=int(rng.integers(1, 33)), num_buckets=int(rng.integers(1, 9)))
    if name == "qk_sparse":
        params.update(drop_ratio=float(rng.uniform(0, 0.5)), num_drop_spans=int(rng.integers(1, 6)))
    if name == "block_sparse":
        params.update(block_q=int(rng.choice([16, 32, 64])), block_k=int(rng.choice([16, 32, 64])),
                      sparsity=float(rng.uniform(0.05, 1.0)), num_heads_kv=int(rng.integers(1, 3)))
    if name == "var_block_sparse":
        params.update(min_block=16, max_block=16 * int(rng.integers(1, 9)),
                      sparsity=float(rng.uniform(0.05, 1.0)), num_heads_kv=int(rng.integers(1, 3)))
    return params


def small_mask(name: str, seqlen: int, seed: int):
    return build_mask(name, seqlen, doc_lens=random_doc_lens(seqlen, seed), seed=seed,
                      **small_params(name, seqlen, seed))


@pytest.fixture
def make_mask():
    """``make_mask(name, seqlen, seed)``: the pattern with random documents and small parameters."""
    return small_mask
