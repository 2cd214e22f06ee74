"""merge_adjacent: fewer slices, the same union (dense masks compared cell by cell)."""
import random

import numpy as np
import pytest

from magi_attention.common import AttnMaskType, AttnSlice, to_dense
from magi_attention.common.slice_array import SliceArray
from magi_attention.meta.attn_meta import merge_adjacent
from magi_attention.testing import random_slices


def _dense(arr: SliceArray, seqlen: int):
    return to_dense(arr.to_slices(), seqlen, seqlen)


def _chunked(slices, chunk: int, seqlen: int, key_cuts=()) -> SliceArray:
    """Every slice clipped to row chunks, as dispatch cuts them, and at ``key_cuts`` (the key
    runs of a stage's buffer)."""
    arr = SliceArray.from_slices(slices)
    edges = [0, *key_cuts, seqlen]
    pieces = []
    for q0 in range(0, seqlen, chunk):
        for k0, k1 in zip(edges, edges[1:]):
            part, _ = arr.clip(q0, q0 + chunk, k0, k1)
            pieces.append(part)
    return SliceArray.concat(pieces)


@pytest.mark.parametrize("kind", ["causal", "full", "invcausal", "bicausal"])
def test_chunked_document_fuses_back_to_one_slice(kind):
    doc = AttnSlice.make(64, 576, 64, 576, kind) if kind != "bicausal" else \
        AttnSlice.make(64, 576, 64, 640, kind)
    pieces = _chunked([doc], 64, 640)
    merged = merge_adjacent(pieces)
    assert len(pieces) >= 8
    assert np.array_equal(_dense(merged, 640), _dense(SliceArray.from_slices([doc]), 640))
    assert len(merged) <= (3 if kind == "bicausal" else 1)  # a band keeps its corner rows


def test_causal_documents_fuse_to_one_slice_each():
    docs = [AttnSlice.make(a, b, a, b, AttnMaskType.CAUSAL) for a, b in ((0, 192), (192, 448))]
    merged = merge_adjacent(_chunked(docs, 64, 448))
    assert len(merged) == 2
    assert np.array_equal(_dense(merged, 448), _dense(SliceArray.from_slices(docs), 448))


def test_causal_documents_off_the_chunk_grid_fuse_to_one_slice_each():
    # each document's last row is clipped into a one-row FULL piece, whose absorption lets the
    # stacked pieces above it meet only in a second pass (the bench's causal_document at cp 1
    # kept 185 slices for 29 documents after one)
    bounds = (0, 75, 140, 301, 333, 448)
    docs = [AttnSlice.make(a, b, a, b, AttnMaskType.CAUSAL) for a, b in zip(bounds, bounds[1:])]
    merged = merge_adjacent(_chunked(docs, 64, 448))
    assert len(merged) == len(docs)
    assert np.array_equal(_dense(merged, 448), _dense(SliceArray.from_slices(docs), 448))


@pytest.mark.parametrize("seed", range(20))
def test_random_overlapping_slices_keep_their_union(seed):
    rng = random.Random(seed)
    slices = random_slices(rng, 96, 96, rng.randint(1, 6))
    pieces = _chunked(slices, rng.choice([8, 16, 32]), 96, sorted(rng.sample(range(1, 96), 2)))
    merged = merge_adjacent(pieces)
    assert len(merged) <= len(pieces)
    assert np.array_equal(_dense(merged, 96), _dense(SliceArray.from_slices(slices), 96))
    assert len(merge_adjacent(merged)) == len(merged)  # nothing left to fuse


def test_empty_input():
    assert len(merge_adjacent(SliceArray.empty())) == 0
