"""Overlap solver: the stage count follows the compute / communication ratio of the cost model."""
import pytest

from magi_attention.meta import OverlapConfig, RankCost, choose_num_stages
from magi_attention.meta.overlap_solver import predicted_time_us

CELL = 4.0 * 32 * 128  # flops per mask cell: 32 heads x head_dim 128


def test_more_stages_hide_comm_when_it_dominates():
    config = OverlapConfig(stage_overhead_us=1.0)
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
