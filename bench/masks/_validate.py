"""Boundary checks for build_mask: each raises ValueError naming the argument, the rule and the value."""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any, Mapping, Sequence

# Past these, a random block/bucket mask needs tens of millions of slices (or tiles): no slice
# list holds that in memory or builds it in seconds, so refuse with the numbers instead of hanging.
MAX_BLOCK_TILES = 1 << 26
MAX_HASH_SLICES = 1 << 22


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def check_seqlen(seqlen: Any) -> int:
    if not _is_int(seqlen) or seqlen < 1:
        raise ValueError(f"seqlen must be an int >= 1, got {seqlen!r}")
    return int(seqlen)


def check_seed(seed: Any) -> int:
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    return int(seed)


def check_doc_lens(doc_lens: Sequence[int] | None, seqlen: int) -> tuple[int, ...] | None:
    if doc_lens is None:
        return None
    lens = tuple(doc_lens)
    if not lens or not all(_is_int(d) and d >= 1 for d in lens):
        raise ValueError(f"doc_lens must be a non-empty sequence of ints >= 1, got {lens!r:.200}")
    if sum(lens) != seqlen:
        raise ValueError(f"doc_lens sum to {sum(lens)}, but seqlen={seqlen}: they must sum to seqlen")
    return tuple(int(d) for d in lens)


def check_param_names(name: str, params: Mapping[str, Any], known: Mapping[str, Any]) -> None:
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for mask {name!r}; "
                         f"it takes {sorted(known) or 'no parameters'}")


def _int_at_least(name: str, key: str, value: Any, low: int) -> None:
    if not _is_int(value) or value < low:
        raise ValueError(f"{name}: {key} must be an int >= {low}, got {value!r}")


def _ratio(name: str, key: str, value: Any, low: float, high: float, closed_low: bool) -> None:
    ok = isinstance(value, Real) and not isinstance(value, bool) and value <= high and (
        value >= low if closed_low else value > low)
    if not ok:
        interval = f"{'[' if closed_low else '('}{low}, {high}]"
        raise ValueError(f"{name}: {key} must be a number in {interval}, got {value!r}")


def check_values(name: str, seqlen: int, doc_lens: tuple[int, ...] | None,
                 params: Mapping[str, Any]) -> None:
    """Check every parameter value of one pattern (prefix_len only when given explicitly)."""
    for key in ("window", "num_global", "num_drop_spans"):
        if key in params:
            _int_at_least(name, key, params[key], 1 if key == "num_drop_spans" else 0)
    for key in ("block_size", "num_buckets", "run_len", "block_q", "block_k", "num_heads_kv",
                "min_block", "max_block"):
        if key in params:
            _int_at_least(name, key, params[key], 1)
    if "drop_ratio" in params:
        _ratio(name, "drop_ratio", params["drop_ratio"], 0.0, 1.0, closed_low=True)
    if "sparsity" in params:
        _ratio(name, "sparsity", params["sparsity"], 0.0, 1.0, closed_low=False)
    if "max_block" in params and params["max_block"] % params["min_block"]:
        raise ValueError(f"{name}: max_block={params['max_block']} must be a multiple of "
                         f"min_block={params['min_block']}")
    if params.get("prefix_len") is not None:
        _check_prefix(name, seqlen, doc_lens, params["prefix_len"])
    _check_size(name, seqlen, params)


def _check_prefix(name: str, seqlen: int, doc_lens: tuple[int, ...] | None, prefix_len: Any) -> None:
    high = seqlen if doc_lens is None else min(doc_lens)
    what = f"seqlen={seqlen}" if doc_lens is None else f"the shortest document ({high})"
    if not _is_int(prefix_len) or not 0 <= prefix_len <= high:
        raise ValueError(f"{name}: prefix_len must be an int in [0, {high}] (at most {what}), "
                         f"got {prefix_len!r}")


def _check_size(name: str, seqlen: int, params: Mapping[str, Any]) -> None:
    if "block_q" in params:
        num_q, num_k = -(-seqlen // params["block_q"]), -(-seqlen // params["block_k"])
        tiles = params["num_heads_kv"] * num_q * num_k
        if tiles > MAX_BLOCK_TILES:
            raise ValueError(f"{name}: block_q={params['block_q']}, block_k={params['block_k']} give "
                             f"{tiles} tiles at seqlen={seqlen} (limit {MAX_BLOCK_TILES}); "
                             f"use larger blocks")
    if "min_block" in params:
        tiles = params["num_heads_kv"] * (-(-seqlen // params["min_block"])) ** 2
        if tiles > MAX_BLOCK_TILES:
            raise ValueError(f"{name}: min_block={params['min_block']} allows up to {tiles} tiles at "
                             f"seqlen={seqlen} (limit {MAX_BLOCK_TILES}); use a larger min_block")
    if "run_len" in params:
        runs = -(-seqlen // params["run_len"])
        slices = runs * runs // (2 * params["num_buckets"])
        if slices > MAX_HASH_SLICES:
            raise ValueError(f"{name}: run_len={params['run_len']} gives {runs} runs at "
                             f"seqlen={seqlen}, ~{slices} slices (limit {MAX_HASH_SLICES}); "
                             f"use a larger run_len")
