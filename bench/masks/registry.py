"""The registry: mask name -> Pattern (defaults, random draws, generator, reference predicate).

A Pattern's callables all take ``(seqlen, doc_lens, params)`` with ``params`` resolved (defaults
filled in, random draws such as prefix_len made, ``seed`` included), so the generator and the
reference see the same draws but compute the geometry separately.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from . import _random, basic, block_sparse, document, sparse

Params = Mapping[str, Any]


@dataclass(frozen=True)
class Pattern:
    slices: Callable[..., list]       # (seqlen, doc_lens, params) -> list[AttnSlice] or per head
    reference: Callable[..., Callable]  # (seqlen, doc_lens, params) -> predicate
    defaults: Mapping[str, Any] = field(default_factory=dict)
    needs_docs: bool = False
    per_head: bool = False            # predicate is (h, q, k); slices is one list per KV head
    resolve: Callable[..., dict] | None = None  # fills random parameters left as None


def _prefix_causal(seqlen: int, doc_lens, params: Params) -> dict:
    if params["prefix_len"] is not None:
        return {}
    return {"prefix_len": _random.draw_prefix_len(params["seed"], 1, max(seqlen - 1, 1))}


def _prefix_document(seqlen: int, doc_lens, params: Params) -> dict:
    if params["prefix_len"] is not None:
        return {}
    return {"prefix_len": _random.draw_prefix_len(params["seed"], 1, min(doc_lens))}


def _drops(seqlen: int, p: Params) -> tuple[np.ndarray, np.ndarray]:
    return tuple(_random.draw_drop_spans(p["seed"], seqlen, p["drop_ratio"], p["num_drop_spans"], axis)
                 for axis in ("rows", "cols"))


def _run_buckets(seqlen: int, p: Params) -> np.ndarray:
    return _random.draw_run_buckets(p["seed"], -(-seqlen // p["run_len"]), p["num_buckets"])


def block_grid(seqlen: int, p: Params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q_edges, k_edges, kept [num_heads_kv, nq, nk]) of a block_sparse / var_block_sparse mask."""
    if "block_q" in p:
        q_edges = block_sparse.uniform_edges(seqlen, p["block_q"])
        k_edges = block_sparse.uniform_edges(seqlen, p["block_k"])
    else:
        q_edges, k_edges = (_random.draw_block_edges(p["seed"], seqlen, p["min_block"],
                                                     p["max_block"], axis) for axis in ("q", "k"))
    kept = _random.draw_kept_blocks(p["seed"], p["num_heads_kv"], len(q_edges) - 1,
                                    len(k_edges) - 1, p["sparsity"])
    return q_edges, k_edges, kept


def _window(fn):
    return lambda seqlen, docs, p: fn(seqlen, p["window"])


PATTERNS: dict[str, Pattern] = {
    "full": Pattern(lambda s, d, p: basic.full(s), lambda s, d, p: basic.full_reference()),
    "causal": Pattern(lambda s, d, p: basic.causal(s), lambda s, d, p: basic.causal_reference()),
    "full_document": Pattern(lambda s, d, p: document.full_document(d),
                             lambda s, d, p: document.full_document_reference(d), needs_docs=True),
    "causal_document": Pattern(lambda s, d, p: document.causal_document(d),
                               lambda s, d, p: document.causal_document_reference(d),
                               needs_docs=True),
    "share_question": Pattern(lambda s, d, p: document.share_question(d),
                              lambda s, d, p: document.share_question_reference(d), needs_docs=True),
    "causal_blockwise": Pattern(lambda s, d, p: document.causal_blockwise(d),
                                lambda s, d, p: document.causal_blockwise_reference(d),
                                needs_docs=True),
    "prefix_lm_causal": Pattern(lambda s, d, p: basic.prefix_lm_causal(s, p["prefix_len"]),
                                lambda s, d, p: basic.prefix_lm_causal_reference(p["prefix_len"]),
                                defaults={"prefix_len": None}, resolve=_prefix_causal),
    "prefix_lm_document": Pattern(
        lambda s, d, p: document.prefix_lm_document(d, p["prefix_len"]),
        lambda s, d, p: document.prefix_lm_document_reference(d, p["prefix_len"]),
        defaults={"prefix_len": None}, needs_docs=True, resolve=_prefix_document),
    "qk_sparse": Pattern(lambda s, d, p: sparse.qk_sparse(s, *_drops(s, p)),
                         lambda s, d, p: sparse.qk_sparse_reference(s, *_drops(s, p)),
                         defaults={"drop_ratio": 0.1, "num_drop_spans": 4}),
    "hash_sparse": Pattern(lambda s, d, p: sparse.hash_sparse(s, _run_buckets(s, p), p["run_len"]),
                           lambda s, d, p: sparse.hash_sparse_reference(_run_buckets(s, p),
                                                                        p["run_len"]),
                           defaults={"num_buckets": 8, "run_len": 64}),
    "sliding_window": Pattern(_window(basic.sliding_window),
                              lambda s, d, p: basic.sliding_window_reference(p["window"]),
                              defaults={"window": 1024}),
    "sliding_window_causal": Pattern(
        _window(basic.sliding_window_causal),
        lambda s, d, p: basic.sliding_window_causal_reference(p["window"]),
        defaults={"window": 1024}),
    "global_sliding_window": Pattern(
        lambda s, d, p: basic.global_sliding_window(s, p["window"], p["num_global"]),
        lambda s, d, p: basic.global_sliding_window_reference(p["window"], p["num_global"]),
        defaults={"window": 1024, "num_global": 128}),
    "block_causal_document": Pattern(
        lambda s, d, p: document.block_causal_document(d, p["block_size"]),
        lambda s, d, p: document.block_causal_document_reference(d, p["block_size"]),
        defaults={"block_size": 2048}, needs_docs=True),
    "block_sparse": Pattern(lambda s, d, p: block_sparse.block_sparse(*block_grid(s, p)),
                            lambda s, d, p: block_sparse.block_sparse_reference(*block_grid(s, p)),
                            defaults={"block_q": 64, "block_k": 64, "sparsity": 0.25,
                                      "num_heads_kv": 1}, per_head=True),
    "var_block_sparse": Pattern(lambda s, d, p: block_sparse.block_sparse(*block_grid(s, p)),
                                lambda s, d, p: block_sparse.block_sparse_reference(
                                    *block_grid(s, p)),
                                defaults={"min_block": 64, "max_block": 512, "sparsity": 0.25,
                                          "num_heads_kv": 1}, per_head=True),
}

STATIC_MASK_NAMES: tuple[str, ...] = tuple(PATTERNS)[:14]
MASK_NAMES: tuple[str, ...] = tuple(PATTERNS)
KERNEL_MASK_NAMES: tuple[str, ...] = ("full", "causal", "full_document", "causal_document",
                                      "sliding_window_causal", "block_causal_document")
