"""The "auto" dispatch: min_heap, or sequential where FA4's native varlen path on whole runs of
documents predicts faster than min_heap's balanced but bitmap-masked ranks (CPU: the cost
model's inputs, native forms and partial tiles, are host computations)."""
import numpy as np
import pytest

from magi_attention.kernels.fa4._convert import fa4_block_sparse
from magi_attention.meta import (AttnShape, OverlapConfig, SliceArray, choose_dispatch,
                                 solve_magi_meta)
from magi_attention.meta.dispatch_choice import PARTIAL_TILE_COST, effective_area, rank_stage_masks
from magi_attention.testing.masks import MEASURED_PACKS, named_mask

SEQLEN, CHUNK = 16384, 512
SHAPE = AttnShape(64, 8, 128)


def _slices(name, seqlen=SEQLEN):
    return SliceArray.from_slices(named_mask(name, seqlen, doc_lens=MEASURED_PACKS[seqlen], seed=0))


def test_without_a_native_kernel_auto_is_min_heap_unevaluated():
    choice = choose_dispatch(_slices("causal_document"), SEQLEN, 2, CHUNK, SHAPE, OverlapConfig(),
                             kernel=None)
    assert choice.algorithm == "min_heap" and choice.predicted_us == {}


def test_explicit_algorithm_is_honoured():
    meta = solve_magi_meta(_slices("causal_document"), SEQLEN, 2, CHUNK, 0, SHAPE, "min_heap",
                           kernel="fa4")
    assert meta.algorithm == "min_heap" and meta.choice is None


@pytest.mark.parametrize("name", ["full_document", "causal_document"])
def test_cp2_documents_choose_the_native_balanced_runs(name):
    """cp 2: sequential and balanced_runs keep every rank's fused mask native, min_heap's are
    bitmap-masked; balanced_runs also balances (1.01-1.04 against sequential's 1.35), so the
    model ranks it first."""
    slices = _slices(name)
    metas = [solve_magi_meta(slices, SEQLEN, 2, CHUNK, r, SHAPE, "auto", kernel="fa4")
             for r in range(2)]
    assert {m.algorithm for m in metas} == {"balanced_runs"}  # every rank decides alike
    pred = metas[0].choice.predicted_us
    assert pred["balanced_runs"] < pred["sequential"] < pred["min_heap"]
    for m in metas:
        for attn in rank_stage_masks(m.runtime):
            assert fa4_block_sparse(attn.plan, 128, 128).native is not None


def test_single_causal_sequence_chooses_the_balanced_mirror():
    """One causal document: sequential's imbalance (3x at cp 2) outweighs its native gain;
    balanced_runs (the mirror: rank 1 holds the two outer runs) is as balanced as min_heap and
    FA4 runs every rank natively, rank 1 in two calls (native groups), so it wins."""
    metas = [solve_magi_meta(_slices("causal"), SEQLEN, 2, CHUNK, r, SHAPE, "auto", kernel="fa4")
             for r in range(2)]
    assert metas[0].algorithm == "balanced_runs"
    convs = [fa4_block_sparse(m.runtime.fused.plan, 128, 128) for m in metas]
    assert convs[0].native is not None
    assert convs[1].native is None and len(convs[1].groups) == 2


def test_effective_area_charges_partial_tiles_only_off_the_native_path():
    slices = _slices("causal_document")
    fused = OverlapConfig(fused=True)
    seq = solve_magi_meta(slices, SEQLEN, 2, CHUNK, 1, SHAPE, "sequential", fused)
    heap = solve_magi_meta(slices, SEQLEN, 2, CHUNK, 1, SHAPE, "min_heap", fused)
    assert effective_area(seq.runtime.fused) == seq.runtime.fused.area()
    conv = fa4_block_sparse(heap.runtime.fused.plan, 128, 128)
    assert conv.native is None and conv.num_partial > 0
    assert np.isclose(effective_area(heap.runtime.fused),
                      heap.runtime.fused.area() + PARTIAL_TILE_COST * conv.num_partial * 128 * 128)


def test_cp4_causal_documents_choose_balanced_runs():
    """cp 4: sequential's 1.59 imbalance loses to min_heap, balanced_runs (1.03, native on every
    rank) beats both in the model."""
    slices = _slices("causal_document", SEQLEN * 4)
    choice = choose_dispatch(slices, SEQLEN * 4, 4, CHUNK, SHAPE, OverlapConfig(),
                             kernel="fa4")
    pred = choice.predicted_us
    assert choice.algorithm == "balanced_runs"
    assert pred["balanced_runs"] < pred["min_heap"] < pred["sequential"]


def test_triton_effective_area_counts_every_touched_tile():
    """Triton computes each tile it touches whole: a 64-row causal mask on 128 x 64 tiles
    touches one tile (of 2, the other is above the diagonal)."""
    from magi_attention.meta.runtime_meta import StageAttnArgs
    attn = StageAttnArgs(SliceArray.from_slices(named_mask("causal", 64)), 64, 64)
    assert effective_area(attn, "triton") == 128 * 64
    assert effective_area(attn, "fa4") == attn.area()  # native on FA4: its area only


RUNS = {"sequential", "balanced_runs"}


@pytest.mark.parametrize("name,expected", [("causal_document", RUNS), ("full_document", RUNS),
                                           ("causal", {"balanced_runs"})])
def test_triton_auto_is_evaluated(name, expected):
    """With the Triton kernel "auto" weighs the candidates too (min_heap's cut
    documents ran at 0.71-0.87x HybridCP on 2 H200s): runs for documents; for one causal
    sequence min_heap and balanced_runs count the same tiles, and the tie goes to the runs
    (4 H200s: min_heap's pieces ran 1.078x slower forward at cp 4)."""
    choice = choose_dispatch(_slices(name), SEQLEN, 2, CHUNK, SHAPE, OverlapConfig(),
                             kernel="triton")
    assert choice.algorithm in expected
    assert set(choice.predicted_us) == {"min_heap", "sequential", "balanced_runs"}


def test_refined_cut_balances_the_fa4_tile_model():
    """causal_document at 32k (the bench's documents), cp 2: cut for equal area, the rank with
    the short documents has ~4% more tile time (their diagonal tiles are half empty); "auto"
    moves balanced_runs' cut, on half chunks, to within 2% between the ranks."""
    from magi_attention.meta.dispatch import solve_dispatch
    from magi_attention.meta.dispatch_choice import choose_and_solve, slowest_tile_time
    from magi_attention.meta.solver import solve_for_dispatch
    seqlen = 32768
    slices = _slices("causal_document", seqlen)
    plain = solve_for_dispatch(slices, solve_dispatch(slices, seqlen, 2, CHUNK, "balanced_runs"),
                               SHAPE, OverlapConfig())
    plain_runtimes = [plain.runtime(r) for r in range(2)]
    choice, (solved, runtimes) = choose_and_solve(slices, seqlen, 2, CHUNK, SHAPE,
                                                  OverlapConfig(), "fa4", solve_for_dispatch)
    assert choice.algorithm == "balanced_runs" and solved.dispatch.chunk_size == CHUNK // 2
    per_rank = [slowest_tile_time([rt], "fa4") for rt in runtimes]
    assert max(per_rank) / min(per_rank) < 1.02
    assert max(per_rank) < 0.98 * slowest_tile_time(plain_runtimes, "fa4")


def _form_tiles_by_cells(form, seqlen_q, seqlen_k, bm, bn):
    """Tiles of each entry's own grid holding a kept cell, and q tiles, from FA4's varlen rule
    applied cell by cell."""
    cq = form.cu_seqlens_q or (0, seqlen_q)
    ck = form.cu_seqlens_k or (0, seqlen_k)
    tiles = q_tiles = 0
    for b in range(len(cq) - 1):
        lq, lk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        i = np.arange(lq)[:, None]
        j = np.arange(lk)[None, :]
        keep = np.ones((lq, lk), dtype=bool)
        if form.window_left is not None:
            keep &= j >= i + lk - lq - form.window_left
        if form.window_right is not None:
            keep &= j <= i + lk - lq + form.window_right
        q_tiles += -(-lq // bm)
        for t in range(0, lq, bm):
            cols = np.flatnonzero(keep[t:t + bm].any(axis=0))
            tiles += len(np.unique(cols // bn))
    return tiles, q_tiles


@pytest.mark.parametrize("seed", range(6))
def test_native_tiles_count_the_tiles_with_kept_cells(seed):
    from magi_attention.kernels.fa4._native import NativeForm, native_tiles
    rng = np.random.default_rng(seed)
    lens_q = rng.integers(0, 300, size=4)
    lens_k = lens_q + rng.integers(0, 100, size=4) * (seed % 2)
    cq, ck = tuple(int(x) for x in np.cumsum([0, *lens_q])), tuple(int(x) for x in np.cumsum([0, *lens_k]))
    left = [None, 0, 50][seed % 3]
    right = [0, None, 30][seed % 3] if left is not None else 0
    form = NativeForm(cq, ck, left, right)
    assert native_tiles(form, cq[-1], ck[-1], 64, 32) == \
        _form_tiles_by_cells(form, cq[-1], ck[-1], 64, 32)
