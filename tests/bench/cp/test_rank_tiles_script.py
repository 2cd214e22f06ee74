"""scripts/magi_rank_tiles.py: per-rank tile counts of magi's fused masks and HybridCP's
placement, checked against counts worked out by hand and against the whole mask's area."""

import pytest

from magi_attention.common import AttnRange, AttnSlice, union_area
from magi_attention.common.mask_type import AttnMaskType
from magi_attention.kernels.block_sparse import plan_block_sparse


@pytest.fixture(scope="module")
def tool(load_script):
    return load_script("scripts/magi_rank_tiles.py")


def test_one_causal_document_visits_the_tiles_counted_by_hand(tool):
    n = 8192
    span = AttnRange(0, n)
    counts = tool.tile_counts([AttnSlice(span, span, AttnMaskType.CAUSAL)], n, n)
    # forward 128 x 128: the lower triangle of 64 x 64 tiles; backward 64 rows x 128 keys: key
    # tile j meets q tiles 2j .. 127, the two on the diagonal partial
    assert counts == {"rows": n, "fwd_pairs": 64 * 65 // 2, "fwd_q_tiles": 64,
                      "bwd_pairs": sum(128 - 2 * j for j in range(64)), "bwd_partial": 128,
                      "bwd_k_tiles": 64, "bwd_longest_k_tile": 128}


@pytest.mark.parametrize("name", ["causal_document", "full_document", "block_causal_document"])
def test_each_strategys_ranks_cover_the_mask_once(tool, name):
    per_gpu = 2048
    mask, seqlen = tool._mask(name, per_gpu, 2)
    whole = union_area(mask.slices)
    magi = tool.magi_ranks_slices(name, per_gpu)
    assert [rows for _, rows, _ in magi] == [per_gpu, per_gpu]  # equal shards
    assert sum(plan_block_sparse(s, q, k, 64, 128).area for s, q, k in magi) == whole
    hybrid = tool.hybrid_ranks_slices(name, per_gpu)
    # the benchmark's documents are at most a quarter of the sequence, so each fits one rank
    # and HybridCP's ranks together hold the whole sequence
    assert tool.spread_docs(name, per_gpu) == 0
    assert sum(rows for _, rows, _ in hybrid) == seqlen
    assert sum(plan_block_sparse(s, q, k, 64, 128).area for s, q, k in hybrid) == whole


@pytest.mark.parametrize("name", ["causal_document", "block_causal_document"])
def test_magi_unequals_ranks_cover_the_mask_once_on_unequal_rows(tool, name):
    per_gpu = 2048
    mask, seqlen = tool._mask(name, per_gpu, 2)
    ranks = tool.magi_ranks_slices(name, per_gpu, algorithm="unequal_runs")
    rows = [q for _, q, _ in ranks]
    assert sum(rows) == seqlen and all(r % tool.UNEQUAL_CHUNK == 0 for r in rows)
    assert sum(plan_block_sparse(s, q, k, 64, 128).area for s, q, k in ranks) == \
        union_area(mask.slices)


def test_hybrid_is_left_out_of_masks_without_documents(tool):
    assert tool.hybrid_ranks_slices("causal", 2048) == []
