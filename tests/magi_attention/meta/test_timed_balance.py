"""meta.timed_balance: balanced_runs' cuts moved by measured per-rank time. The measurement is
faked here by an independent cost (each 128-row block's area times a density that the area
model does not know), so the test checks that the re-cut finds the layout that cost says is
balanced, keeps every rank's tokens and two runs, and keeps the first layout when the model was
already right."""
import numpy as np
import pytest

from magi_attention.meta import AttnShape, OverlapConfig, SliceArray, solve_dispatch
from magi_attention.meta.solver import solve_for_dispatch
from magi_attention.meta.slice_array import chunk_areas
from magi_attention.meta.timed_balance import chunk_weights, rebalance_runs
from magi_attention.testing.masks import named_mask, random_doc_lens

SHAPE, BLOCK = AttnShape(64, 8, 128), 128


def _slices(name, seqlen):
    doc_lens = random_doc_lens(seqlen, 0)
    return SliceArray.from_slices(named_mask(name, seqlen, doc_lens=doc_lens, seed=0))


def _fake_clock(slices, seqlen, density):
    """rank_seconds of a solve: each rank's rows' area at BLOCK rows, times ``density`` per
    block (the kernel's true cost per cell, unknown to the area model)."""
    cost = chunk_areas(slices, seqlen, BLOCK) * density

    def rank_seconds(solved):
        d = solved.dispatch
        per = d.chunk_size // BLOCK
        return [float(sum(cost[c * per:(c + 1) * per].sum() for c in d.chunks_of(r)))
                for r in range(d.cp_size)]
    return rank_seconds


def _runs(chunks):
    return 1 + int(np.count_nonzero(np.diff(sorted(chunks)) != 1))


@pytest.mark.parametrize("cp_size", [2, 4])
@pytest.mark.parametrize("name", ["causal_document", "full_document"])
def test_the_recut_balances_a_cost_the_area_model_misses(name, cp_size):
    seqlen = 16384 * cp_size
    slices = _slices(name, seqlen)
    solve = lambda d: solve_for_dispatch(slices, d, SHAPE, OverlapConfig())  # noqa: E731
    first = solve(solve_dispatch(slices, seqlen, cp_size, 512, "balanced_runs"))
    density = np.ones(seqlen // BLOCK)
    per = first.dispatch.chunk_size // BLOCK
    for c in first.dispatch.chunks_of(1):  # rank 1's rows cost 1.15x per cell
        density[c * per:(c + 1) * per] = 1.15
    clock = _fake_clock(slices, seqlen, density)
    before = clock(first)
    best, history = rebalance_runs(slices, first, solve, clock)
    after = clock(best)
    assert history[0] == before and len(history) >= 2
    assert max(before) / np.mean(before) > 1.05, before  # the area model misses it
    assert max(after) < max(before) and max(after) / np.mean(after) < 1.03, (before, after)
    assert max(after) == min(max(t) for t in history)  # the best layout measured is kept
    d = best.dispatch
    for r in range(cp_size):  # every rank keeps its tokens, in at most two runs
        assert len(d.chunks_of(r)) * d.chunk_size == seqlen // cp_size
        assert _runs(d.chunks_of(r)) <= 2


def test_a_recut_within_the_noise_does_not_replace_the_first():
    seqlen = 32768
    slices = _slices("causal_document", seqlen)
    solve = lambda d: solve_for_dispatch(slices, d, SHAPE, OverlapConfig())  # noqa: E731
    first = solve(solve_dispatch(slices, seqlen, 2, 512, "balanced_runs"))
    calls = []

    def clock(solved):  # each re-cut 0.3% faster than the last: within MIN_GAIN of the first
        calls.append(solved)
        return [1.0 - 0.003 * (len(calls) - 1), 0.5]
    best, history = rebalance_runs(slices, first, solve, clock)
    assert len(history) > 1 and best is first


def test_a_right_model_keeps_the_first_layout():
    seqlen = 32768
    slices = _slices("causal_document", seqlen)
    clock = _fake_clock(slices, seqlen, np.ones(seqlen // BLOCK))  # cost = area exactly
    solve = lambda d: solve_for_dispatch(slices, d, SHAPE, OverlapConfig())  # noqa: E731
    first = solve(solve_dispatch(slices, seqlen, 2, 512, "balanced_runs"))
    best, history = rebalance_runs(slices, first, solve, clock)
    assert max(clock(best)) <= max(history[0])


def test_chunk_weights_give_each_rank_its_measured_time():
    areas = np.array([4, 0, 2, 6, 8, 2], dtype=np.int64)
    buckets = [[0, 1, 5], [2, 3, 4]]
    w = chunk_weights(areas, buckets, [3.0, 8.0])
    assert w[[0, 1, 5]].sum() == pytest.approx(3.0) and w[[2, 3, 4]].sum() == pytest.approx(8.0)
    assert w[1] == 0 and w[4] == pytest.approx(8.0 * 8 / 16) and w[0] == pytest.approx(2.0)


def test_balance_must_be_model_or_timed():
    with pytest.raises(ValueError, match="balance"):
        OverlapConfig(balance="fast")
