"""solve_cross_meta: q chunks balanced over the q sequence, k and v in contiguous shares of the
k sequence; every rank's host and remote stages, mapped back to global coordinates, cover its
rows' part of the mask exactly once (the lse merge needs each key in one stage)."""
import random

import numpy as np
import pytest
import torch

from magi_attention.common import AttnMaskType, AttnSlice, to_dense
from magi_attention.meta import (AttnShape, OverlapConfig, SliceArray, contiguous_dispatch,
                                 solve_cross_meta, solve_magi_meta)
from magi_attention.meta.comm_meta import cast_args
from magi_attention.testing import random_slices

SHAPE = AttnShape(4, 2, 16)
SEQLEN_Q, SEQLEN_K = 256, 96
MASKS = {
    "full": [AttnSlice.make(0, SEQLEN_Q, 0, SEQLEN_K, AttnMaskType.FULL)],
    "causal": [AttnSlice.make(0, SEQLEN_Q, 0, SEQLEN_K, AttnMaskType.CAUSAL)],
    "paired_docs": [AttnSlice.make(0, 100, 0, 30, AttnMaskType.CAUSAL),
                    AttnSlice.make(100, 256, 30, 96, AttnMaskType.FULL)],
    "random": random_slices(random.Random(5), SEQLEN_Q, SEQLEN_K, 8),
}


def _stage_cells(slices: SliceArray, rows: np.ndarray, keys: np.ndarray) -> torch.Tensor:
    """Cells [S_q, S_k] (int counts) of one stage's local slices: local rows -> global by
    ``rows``, buffer keys -> global by ``keys`` (-1: a buffer position holding no key)."""
    local = to_dense(slices.to_slices(), len(rows), len(keys)).to(torch.int64)
    cells = torch.zeros(SEQLEN_Q, SEQLEN_K, dtype=torch.int64)
    q_idx, k_idx = local.nonzero(as_tuple=True)
    assert (keys[k_idx.numpy()] >= 0).all(), "a slice reads a buffer position with no key"
    cells.index_put_((torch.from_numpy(rows[q_idx.numpy()]),
                      torch.from_numpy(keys[k_idx.numpy()])), torch.ones(len(q_idx),
                                                                          dtype=torch.int64),
                     accumulate=True)
    return cells


def _received_keys(meta, rank: int, stage: int) -> np.ndarray:
    _, runs = cast_args(meta.table, meta.kv_dispatch, rank, stage)
    keys = np.full(int((runs[:, 1] - runs[:, 0]).sum()) if len(runs) else 0, -1)
    for start, end, at in runs:
        keys[at:at + end - start] = np.arange(start, end)
    return keys


@pytest.mark.parametrize("overlap", [OverlapConfig(fused=False, num_stages=2),
                                     OverlapConfig(fused=True)], ids=["staged2", "fused"])
@pytest.mark.parametrize("cp_size", [2, 4])
@pytest.mark.parametrize("name", list(MASKS))
def test_stages_cover_each_ranks_rows_of_the_mask_once(name, cp_size, overlap):
    slices = MASKS[name]
    covered = torch.zeros(SEQLEN_Q, SEQLEN_K, dtype=torch.int64)
    for rank in range(cp_size):
        meta = solve_cross_meta(slices, SEQLEN_Q, SEQLEN_K, cp_size, 16, rank, SHAPE,
                                overlap=overlap)
        rt, kv = meta.runtime, meta.kv_dispatch
        assert (rt.shard_seqlen, rt.shard_seqlen_kv) == (SEQLEN_Q // cp_size, SEQLEN_K // cp_size)
        assert kv.chunks_of(rank) == (rank,)  # one contiguous share a rank
        rows = meta.dispatch.position_ids(rank)
        own = kv.position_ids(rank)
        if rt.fused is not None:  # one kernel over the fused buffer of own and received keys
            keys = np.full(rt.fused_layout.size, -1)
            for start, end, at in rt.fused_layout.runs:
                keys[at:at + end - start] = np.arange(start, end)
            covered += _stage_cells(rt.fused.slices, rows, keys)
            continue
        covered += _stage_cells(rt.host.slices, rows, own)
        for j, stage in enumerate(rt.stages):
            covered += _stage_cells(stage.attn.slices, rows, _received_keys(meta, rank, j))
    want = to_dense(slices, SEQLEN_Q, SEQLEN_K).to(torch.int64)
    assert torch.equal(covered, want)


def test_contiguous_dispatch_shares_and_errors():
    slices = SliceArray.from_slices(MASKS["full"])
    kv = contiguous_dispatch(slices, SEQLEN_K, 4)
    assert kv.shard_seqlens == (24,) * 4
    assert np.array_equal(kv.position_ids(2), np.arange(48, 72))
    assert kv.chunk_areas.tolist() == [SEQLEN_Q * 24] * 4  # every row reads every key
    with pytest.raises(ValueError, match="total_seqlen_k=98 must be a positive multiple of "
                                         "cp_size=4"):
        contiguous_dispatch(slices, 98, 4)


def test_unequal_shares_are_refused_and_self_attention_keeps_one_dispatch():
    with pytest.raises(ValueError, match="unequal shares"):
        solve_cross_meta(MASKS["full"], SEQLEN_Q, SEQLEN_K, 2, 16, 0, SHAPE, "unequal_runs")
    meta = solve_magi_meta([AttnSlice.make(0, 256, 0, 256, "causal")], 256, 2, 16, 0, SHAPE)
    assert meta.dispatch_kv is None and meta.kv_dispatch is meta.dispatch
    assert meta.runtime.shard_seqlen_kv == meta.runtime.shard_seqlen == 128
