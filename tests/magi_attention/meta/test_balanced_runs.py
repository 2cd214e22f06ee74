"""balanced_runs: two contiguous runs per rank, cut for balance, and the fused KV buffer in
global key order that keeps its document masks native for FA4."""
import numpy as np
import pytest

from magi_attention.kernels.fa4._convert import fa4_block_sparse
from magi_attention.meta import (AttnShape, OverlapConfig, SliceArray, get_dispatch_algorithm,
                                 solve_dispatch, solve_magi_meta)
from magi_attention.meta.algorithms.balanced_runs import mirror_runs
from magi_attention.meta.dispatch_choice import rank_stage_masks
from magi_attention.meta.fused_layout import plan_fused_layout
from magi_attention.testing.masks import named_mask, random_doc_lens

SEQLEN, CHUNK = 16384, 512
SHAPE = AttnShape(64, 8, 128)


def _runs(bucket):
    return 1 + int(np.count_nonzero(np.diff(bucket) != 1))


def _slices(name, seqlen):
    doc_lens = random_doc_lens(seqlen, 0)
    return SliceArray.from_slices(named_mask(name, seqlen, doc_lens=doc_lens, seed=0))


@pytest.mark.parametrize("seed", range(5))
def test_cp2_window_is_the_best_of_every_cut(seed):
    """cp 2: rank 0 a window [a, a + n), rank 1 the outer runs; a minimises the max area (a
    brute-force scan of every a is the independent check)."""
    areas = np.random.default_rng(seed).integers(0, 1000, 32)
    n = 16
    best = min(max(areas[a:a + n].sum(), areas.sum() - areas[a:a + n].sum())
               for a in range(n + 1))
    window, outer = mirror_runs(areas, 2, n)
    assert max(areas[window].sum(), areas[outer].sum()) == best
    a = window[0]
    assert window == list(range(a, a + n)) and outer == list(range(a)) + list(range(a + n, 32))
    # the algorithm: the mirror or sorted_sequential's pairing, whichever is lighter
    sol = get_dispatch_algorithm("balanced_runs").solve(areas, 2)
    assert sol.bucket_areas(areas).max() <= best


@pytest.mark.parametrize("cp_size", [2, 4, 8])
@pytest.mark.parametrize("name", ["causal", "full_document", "causal_document",
                                  "block_causal_document"])
def test_at_most_two_runs_and_better_balance_than_sequential(name, cp_size):
    seqlen = SEQLEN * cp_size
    slices = _slices(name, seqlen)
    meta = solve_dispatch(slices, seqlen, cp_size, CHUNK, "balanced_runs")
    assert all(_runs(b) <= 2 for b in meta.solution.buckets)
    for other in ("sequential", "sorted_sequential"):
        assert meta.imbalance() <= solve_dispatch(slices, seqlen, cp_size, CHUNK,
                                                  other).imbalance() + 1e-9
    if cp_size <= 4:  # at cp 8, 32k documents fill whole 16k ranks: 1.14-1.27 (notes)
        assert meta.imbalance() < 1.04, meta.imbalance()


@pytest.mark.parametrize("cp_size", [2, 4])
@pytest.mark.parametrize("name", ["full_document", "causal_document"])
def test_document_masks_stay_native_on_every_rank(name, cp_size):
    """Both runs of a rank sit in global key order in the fused buffer, so a document cut
    between ranks is one key segment and FA4 runs every rank natively."""
    seqlen = SEQLEN * cp_size
    slices = _slices(name, seqlen)
    for r in range(cp_size):
        m = solve_magi_meta(slices, seqlen, cp_size, CHUNK, r, SHAPE, "balanced_runs",
                            OverlapConfig(fused=True))
        for attn in rank_stage_masks(m.runtime):
            assert fa4_block_sparse(attn.plan, 128, 128).native is not None, (name, r)


def test_layout_global_order_with_copies_on_both_sides():
    """Own [0, 4) and [12, 16), received [6, 12) from rank 0 (cast offset 0): global order puts
    the received range between the own runs, in place; own runs copied."""
    own = np.array([[0, 4, 0], [12, 16, 4]])
    lay = plan_fused_layout(own, np.array([[6, 12, 0]]), np.array([0]), rank=1)
    assert lay.size == 14 and lay.own_copies == ((0, 0, 4), (4, 10, 4))
    assert lay.own_at is None and lay.recv_at == 4 and lay.num_copies == 2
    np.testing.assert_array_equal(lay.runs, [[0, 4, 0], [6, 16, 4]])  # [6, 12) + [12, 16) join


def test_aligned_layout_puts_own_runs_on_their_rows_tile_grid():
    """The layout above with align 8: a pad between own [0, 4) and the received range (a gap in
    global keys, own -> received) puts own [12, 16) (local offset 4) at a buffer offset = 4
    (mod 8); the document [6, 16) keeps one key run and the cast still lands in place."""
    own = np.array([[0, 4, 0], [12, 16, 4]])
    lay = plan_fused_layout(own, np.array([[6, 12, 0]]), np.array([0]), rank=1, align=8)
    assert lay.pads == ((4, 2),) and lay.size == 16
    assert lay.own_copies == ((0, 0, 4), (4, 12, 4)) and lay.recv_at == 6
    assert all(dst % 8 == src % 8 for src, dst, _ in lay.own_copies)
    np.testing.assert_array_equal(lay.runs, [[0, 4, 0], [6, 16, 6]])


def test_aligned_layout_pads_only_where_it_splits_nothing():
    """No pad between pieces that continue each other in global keys (a document's keys stay
    one run), nor inside the cast's region (two received pieces) or between two own runs; a pad
    at the start aligns a rank whose received keys come first."""
    recv = np.array([[10, 13, 0], [20, 25, 3]])  # one region of the cast, with a global gap
    lay = plan_fused_layout(np.array([[25, 33, 0]]), recv, np.array([0, 0]), rank=1, align=16)
    assert lay.pads == ((0, 8),) and lay.recv_at == 8 and lay.own_at == 16
    # own [25, 33) continues the received [20, 25): the pad went before the segment
    np.testing.assert_array_equal(lay.runs, [[10, 13, 8], [20, 33, 11]])
    two_own = plan_fused_layout(np.array([[0, 4, 0], [8, 12, 4]]), np.zeros((0, 3), int),
                                np.zeros(0, int), rank=0, align=16)
    assert two_own.pads == () and two_own.own_at == 0


def test_layout_of_one_run_per_rank_is_lower_own_higher():
    """One own run in the middle: [received from lower ranks | own | from higher ranks], the
    rank-ordered buffer, as the special case of global order."""
    recv = np.array([[2, 8, 0], [20, 24, 6], [30, 32, 10]])  # from ranks 0, 2, 3
    lay = plan_fused_layout(np.array([[8, 16, 0]]), recv, np.array([0, 2, 3]), rank=1)
    assert lay.own_at == 6 and lay.recv_copies == ((0, 0, 6), (6, 14, 6))


def test_scattered_chunks_fall_back_to_rank_order():
    """More copies than MAX_COPIES in global order (min_heap's scattered chunks): rank order,
    own in place, the cast in place when its sources are all on one side."""
    own = np.array([[i * 4, i * 4 + 2, i * 2] for i in range(10)])  # own: even halves
    recv = np.array([[i * 4 + 2, i * 4 + 4, i * 2] for i in range(10)])  # all from rank 1
    lay = plan_fused_layout(own, recv, np.ones(10, dtype=int), rank=0)
    assert lay.own_at == 0 and lay.recv_at == 20 and lay.num_copies == 0


@pytest.mark.parametrize("chunk_size,step", [(512, 2), (256, 2), (255, 1), (128, 1), (64, 1)])
def test_halving_keeps_a_finer_cut_at_a_whole_tile(chunk_size, step):
    from magi_attention.meta.algorithms.balanced_runs import halving
    assert halving(chunk_size) == step


@pytest.mark.parametrize("kernel", ["triton", "fa4", None])
def test_fused_buffers_align_own_runs_for_tiled_kernels(kernel):
    """causal_document, 2 ranks, 128-token chunks (a received head before rank 0's own run):
    for Triton (and the CPU reference) every own run of the fused buffer starts on its rows'
    128-key grid; FA4, whose native kernels tile each document from its start, gets no pads."""
    from magi_attention.meta.fused_layout import KEY_TILE, key_tile_for
    mask = named_mask("causal_document", 4096, doc_lens=[700, 1500, 300, 1596], seed=0)
    pads = 0
    for r in range(2):
        lay = solve_magi_meta(mask, 4096, 2, 128, r, AttnShape(2, 1, 16), "balanced_runs",
                              OverlapConfig(fused=True), kernel=kernel).runtime.fused_layout
        pads += len(lay.pads)
        longest = max(lay.own_copies, key=lambda c: c[2])
        if key_tile_for(kernel) == KEY_TILE:
            assert (longest[1] - longest[0]) % KEY_TILE == 0, (r, lay)
    assert (pads > 0) == (kernel != "fa4")
