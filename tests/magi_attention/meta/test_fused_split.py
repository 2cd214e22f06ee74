"""The fused stage cut by rows (``fused_split``): the local rows and the remote blocks hold
exactly the fused mask's cells, no local row reads a received key, each block's recorded pieces
say where its keys came from, and the cost model's local area is the split's."""
import numpy as np
import pytest

from magi_attention.common import to_dense
from magi_attention.meta import AttnShape, OverlapConfig, SliceArray, solve_magi_meta
from magi_attention.meta.comm_meta import row_pieces
from magi_attention.meta.fused_split import MAX_REMOTE_BLOCKS, _join_closest, touches
from magi_attention.meta.solver import local_rows_areas
from magi_attention.testing.masks import named_mask

SEQLEN = 512
DOC_LENS = [200, 40, 72, 136, 64]
SHAPE = AttnShape(4, 2, 16)


def _dense(slices: SliceArray, seqlen_q: int, seqlen_k: int) -> np.ndarray:
    return to_dense(slices.to_slices(), seqlen_q, seqlen_k).numpy().astype(np.int64)


def _metas(name, cp_size, algorithm):
    slices = SliceArray.from_slices(named_mask(name, SEQLEN, doc_lens=DOC_LENS, seed=1))
    return slices, [solve_magi_meta(slices, SEQLEN, cp_size, 32, r, SHAPE, algorithm,
                                    OverlapConfig(fused=True, split=True)) for r in range(cp_size)]


CASES = [(name, cp, alg) for name in ("causal_document", "full_document",
                                      "block_causal_document", "causal", "sliding_window_causal")
         for cp in (2, 4) for alg in ("balanced_runs", "min_heap", "sequential")]


@pytest.mark.parametrize("name,cp_size,algorithm", CASES)
def test_split_holds_the_fused_cells_and_local_rows_read_no_received_key(name, cp_size,
                                                                         algorithm):
    _, metas = _metas(name, cp_size, algorithm)
    for m in metas:
        rt, split = m.runtime, m.runtime.fused_split
        if split is None:
            continue
        n, size, lay = rt.shard_seqlen, rt.fused_layout.size, rt.fused_layout
        want = _dense(rt.fused.slices, n, size)
        got = _dense(split.local.slices, n, size)
        assert not touches(split.local.slices,
                           np.array([(d, d + c) for _, d, c in lay.recv_copies])).any()
        assert len(split.blocks) <= MAX_REMOTE_BLOCKS
        for block in split.blocks:
            g = block.geometry
            assert not got[g.q_start:g.q_end].any()  # the local call keeps none of its rows
            got[g.q_start:g.q_end, g.k_start:g.k_end] += _dense(
                block.attn.slices, g.q_end - g.q_start, g.k_end - g.k_start)
            # every key of the block is own or received (or an aligning pad, which no slice
            # reads), and the pieces say which
            kind = np.zeros(g.k_end - g.k_start, dtype=np.int64)
            for at, c in lay.pads:
                lo, hi = max(at, g.k_start), min(at + c, g.k_end)
                kind[max(lo - g.k_start, 0):max(hi - g.k_start, 0)] = 4
            for pieces, copies, tag in ((g.recv_pieces, lay.recv_copies, 1),
                                        (g.own_pieces, lay.own_copies, 2)):
                for at, src, c in pieces:
                    kind[at:at + c] += tag
                    # the source offset maps back to the same buffer position
                    assert any(s <= src and src + c <= s + cc and d + src - s == g.k_start + at
                               for s, d, cc in copies)
            assert set(np.unique(kind)) <= {1, 2, 4}
        np.testing.assert_array_equal(got, want)


def test_split_only_where_local_rows_pay():
    """full: every row reads received keys, nothing to run early; causal_document at cp 2 with
    balanced_runs: both ranks have local rows and a block or two."""
    _, metas = _metas("full", 2, "balanced_runs")
    assert all(m.runtime.fused is not None and m.runtime.fused_split is None for m in metas)
    _, metas = _metas("causal_document", 2, "balanced_runs")
    assert all(m.runtime.fused_split is not None and 1 <= len(m.runtime.fused_split.blocks) <= 2
               for m in metas)


@pytest.mark.parametrize("name", ["causal_document", "full_document", "block_causal_document"])
def test_cost_model_local_area_is_the_splits(name):
    slices, metas = _metas(name, 2, "balanced_runs")
    dispatch = metas[0].dispatch
    model = local_rows_areas(row_pieces(slices, dispatch), dispatch)
    for r, m in enumerate(metas):
        split = m.runtime.fused_split
        assert model[r] == (split.local.area() if split is not None else model[r])
        assert m.stage_plan.exposed_us < m.stage_plan.comm_us  # the model sees the hiding


def test_scattered_rows_join_at_the_smallest_gaps():
    ranges = np.array([[0, 2], [10, 12], [13, 14], [30, 31], [32, 40], [60, 61]])
    joined = _join_closest(ranges, 4)
    np.testing.assert_array_equal(joined, [[0, 2], [10, 14], [30, 40], [60, 61]])
