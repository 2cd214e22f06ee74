"""Overlap solver: the stage count follows the compute / communication ratio of the cost model."""
import pytest

from magi_attention.meta import OverlapConfig, RankCost, choose_num_stages
from magi_attention.meta.overlap_solver import (choose_stage_plan, predicted_fused_us,
                                                predicted_time_us)

CELL = 4.0 * 32 * 128  # flops per mask cell: 32 heads x head_dim 128


def test_more_stages_hide_comm_when_it_dominates():
    config = OverlapConfig(stage_overhead_us=1.0, fused=False)
    comm_heavy = [RankCost(host_area=1e6, remote_area=4e8, remote_bytes=4e9)]
    assert choose_num_stages(comm_heavy, CELL, config) > 1
    t = [predicted_time_us(comm_heavy[0], n, CELL, config) for n in (1, 4)]
    assert t[1] < t[0]


def test_one_stage_when_nothing_is_remote_or_overhead_dominates():
    assert choose_num_stages([RankCost(1e8, 0.0, 0.0)], CELL, OverlapConfig()) == 1
    tiny = [RankCost(1e3, 1e3, 1e3)]
    assert choose_num_stages(tiny, CELL, OverlapConfig(stage_overhead_us=100.0)) == 1


def test_fixed_num_stages_wins_and_bad_config_is_rejected():
    assert choose_num_stages([RankCost(1, 1, 1)], CELL, OverlapConfig(num_stages=3)) == 3
    with pytest.raises(ValueError, match="num_stages"):
        OverlapConfig(num_stages=0)
    with pytest.raises(ValueError, match="comm_gb_per_s"):
        OverlapConfig(comm_gb_per_s=0)


def test_fast_link_small_cast_fuses_and_slow_link_big_cast_stages():
    """NVLink, cp 2: a cast of a few MB is cheaper than merging q-sized partials: fused.
    A slow link with a cast as large as the compute: staged, with some comm hidden."""
    q_bytes = 16384 * 64 * 128 * 2.0
    small = [RankCost(host_area=6e7, remote_area=2e7, remote_bytes=2e7, q_bytes=q_bytes)]
    plan = choose_stage_plan(small, CELL, OverlapConfig())
    assert plan.fused and plan.num_stages == 1 and plan.hidden_us == 0.0
    big = [RankCost(host_area=6e7, remote_area=2e8, remote_bytes=2e9, q_bytes=q_bytes)]
    plan = choose_stage_plan(big, CELL, OverlapConfig(comm_gb_per_s=25.0))
    assert not plan.fused and plan.num_stages > 1 and plan.hidden_us > 0
    assert plan.predicted_us < predicted_fused_us(big[0], CELL, OverlapConfig(comm_gb_per_s=25.0))[0]


def test_fused_can_be_forced_or_forbidden():
    cost = [RankCost(1e6, 4e8, 4e9, 1e6)]
    assert choose_stage_plan(cost, CELL, OverlapConfig(fused=True)).fused
    assert not choose_stage_plan(cost, CELL, OverlapConfig(fused=False)).fused
    with pytest.raises(ValueError, match="fused runs one stage"):
        OverlapConfig(fused=True, num_stages=2)


def test_a_rank_that_only_sends_still_pays_for_its_cast():
    """One causal sequence, sequential halves at cp 2: rank 1 needs every key of rank 0, rank 0
    needs none of rank 1's. The cast is one collective, so rank 0 waits for the keys it sends
    as rank 1 waits for them (a cut that left one rank receiving almost nothing was
    predicted to hide the cast and measured slower); rank 0 has no remote area all the same."""
    from magi_attention.common import AttnSlice
    from magi_attention.meta import AttnShape, SliceArray, solve_dispatch
    from magi_attention.meta.solver import rank_costs, row_pieces
    seqlen, chunk = 1024, 128
    slices = SliceArray.from_slices([AttnSlice.make(0, seqlen, 0, seqlen, "causal")])
    dispatch = solve_dispatch(slices, seqlen, 2, chunk, "sequential")
    assert list(dispatch.chunks_of(0)) == [0, 1, 2, 3]
    shape = AttnShape(8, 2, 64)
    sender, receiver = rank_costs(row_pieces(slices, dispatch), dispatch, shape)
    half = seqlen // 2 * shape.kv_bytes_per_token
    assert sender.remote_bytes == receiver.remote_bytes == half
    assert sender.remote_area == 0.0 and receiver.remote_area > 0.0
