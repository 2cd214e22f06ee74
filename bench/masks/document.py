"""Varlen (packed-document) patterns, built by applying a single-sequence pattern per document.

Documents are ``doc_lens`` d_0 .. d_{n-1} summing to S; document i spans ``[c_i, c_{i+1})`` with
``c = cu_seqlens(doc_lens)``. ``*_reference`` predicates work from document ids and positions,
never from the slices.
"""
from __future__ import annotations

from itertools import accumulate
from typing import Callable, Sequence

import torch

from magi_attention.common import AttnMaskType, AttnSlice

from .basic import Predicate, _named, causal, full, prefix_lm_causal


def cu_seqlens(doc_lens: Sequence[int]) -> list[int]:
    """``[0, d_0, d_0 + d_1, ..., S]``."""
    return [0, *accumulate(doc_lens)]


def per_document(doc_lens: Sequence[int], inner: Callable[[int], list[AttnSlice]]
                 ) -> list[AttnSlice]:
    """``inner(d)`` for each document length d, shifted onto that document's diagonal block."""
    out: list[AttnSlice] = []
    for start, length in zip(cu_seqlens(doc_lens), doc_lens):
        out += [s.shift(start, start) for s in inner(length)]
    return out


def _doc_ids(doc_lens: Sequence[int]) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """Token index -> (document id, position inside the document)."""
    cu = torch.tensor(cu_seqlens(doc_lens), dtype=torch.int64)

    def lookup(idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        doc = torch.searchsorted(cu.to(idx.device), idx, right=True) - 1
        return doc, idx - cu.to(idx.device)[doc]
    return lookup


def full_document(doc_lens: Sequence[int]) -> list[AttnSlice]:
    return per_document(doc_lens, full)


def full_document_reference(doc_lens: Sequence[int]) -> Predicate:
    doc = _doc_ids(doc_lens)
    return _named(lambda q, k: doc(q)[0] == doc(k)[0], "full_document")


def causal_document(doc_lens: Sequence[int]) -> list[AttnSlice]:
    return per_document(doc_lens, causal)


def causal_document_reference(doc_lens: Sequence[int]) -> Predicate:
    doc = _doc_ids(doc_lens)
    return _named(lambda q, k: (doc(q)[0] == doc(k)[0]) & (k <= q), "causal_document")


def share_question(doc_lens: Sequence[int]) -> list[AttnSlice]:
    """Causal per document; every answer (document >= 1) also sees the whole question (doc 0)."""
    question = doc_lens[0]
    answers = [AttnSlice.make(start, start + length, 0, question)
               for start, length in zip(cu_seqlens(doc_lens)[1:], doc_lens[1:])]
    return causal_document(doc_lens) + answers


def share_question_reference(doc_lens: Sequence[int]) -> Predicate:
    doc = _doc_ids(doc_lens)

    def pred(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        dq, dk = doc(q)[0], doc(k)[0]
        return ((dq == dk) & (k <= q)) | ((dq > 0) & (dk == 0))
    return _named(pred, "share_question")


def causal_blockwise(doc_lens: Sequence[int]) -> list[AttnSlice]:
    """Causal per document, except the last, whose queries see every key up to themselves."""
    last_start = cu_seqlens(doc_lens)[-2]
    seqlen = sum(doc_lens)
    return (causal_document(doc_lens[:-1])
            + [AttnSlice.make(last_start, seqlen, 0, seqlen, AttnMaskType.CAUSAL)])


def causal_blockwise_reference(doc_lens: Sequence[int]) -> Predicate:
    doc = _doc_ids(doc_lens)
    last = len(doc_lens) - 1

    def pred(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        dq, dk = doc(q)[0], doc(k)[0]
        return (k <= q) & ((dq == dk) | (dq == last))
    return _named(pred, "causal_blockwise")


def prefix_lm_document(doc_lens: Sequence[int], prefix_len: int) -> list[AttnSlice]:
    return per_document(doc_lens, lambda length: prefix_lm_causal(length, prefix_len))


def prefix_lm_document_reference(doc_lens: Sequence[int], prefix_len: int) -> Predicate:
    doc = _doc_ids(doc_lens)

    def pred(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        (dq, pq), (dk, pk) = doc(q), doc(k)
        return (dq == dk) & ((k <= q) | ((pq < prefix_len) & (pk < prefix_len)))
    return _named(pred, f"prefix_lm_document_{prefix_len}")


def block_causal(seqlen: int, block_size: int) -> list[AttnSlice]:
    """Blocks of block_size tokens (the last may be shorter); a block sees itself and all before."""
    return [AttnSlice.make(start, min(start + block_size, seqlen), 0, min(start + block_size, seqlen))
            for start in range(0, seqlen, block_size)]


def block_causal_document(doc_lens: Sequence[int], block_size: int) -> list[AttnSlice]:
    return per_document(doc_lens, lambda length: block_causal(length, block_size))


def block_causal_document_reference(doc_lens: Sequence[int], block_size: int) -> Predicate:
    doc = _doc_ids(doc_lens)

    def pred(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        (dq, pq), (dk, pk) = doc(q), doc(k)
        return (dq == dk) & (pk // block_size <= pq // block_size)
    return _named(pred, f"block_causal_document_{block_size}")
