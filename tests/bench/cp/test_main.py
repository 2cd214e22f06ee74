"""cp_bench_config: a user's CP run writes under runs/, and a GPU recipe on a machine without
CUDA is refused before any rank starts work unless hardware=cpu is given."""
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from bench.config import CONFIGS_DIR, cp_bench_config, register_schemas

register_schemas()


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        return compose(config_name="cp_bench", overrides=list(overrides))


def test_default_writes_under_runs_not_results():
    config = cp_bench_config(_compose())
    assert config.out_file == Path("runs/cpu/cp/cp_default.csv")
    assert config.plots_dir == Path("runs/cpu/plots/cp_default")


def test_gpu_recipe_on_cpu_needs_hardware_cpu():
    with pytest.raises(ValueError, match=r"hardware=auto picked the cpu preset, but "
                                         r"experiment=cp_h200x4 reaches seqlen 65536"):
        cp_bench_config(_compose("experiment=cp_h200x4"))
    config = cp_bench_config(_compose("experiment=cp_h200x4", "hardware=cpu"))
    assert config.seqlen_per_gpu == (16384,) and config.cp_sizes == (1, 4)


def test_a_labelled_variant_is_one_override():
    """configs/cp/ holds the strategies; a variant (its label is the rows' kernel column) is a
    dict merged into ``cp`` on the command line, or a ``cp:`` entry of an experiment recipe."""
    config = cp_bench_config(_compose(
        "cp=[hybrid_cp,magi]", "+cp={hybrid_cp_capped:{name:hybrid_cp,knobs:{token_capacity:1.0}},"
        "magi_whole:{name:magi,knobs:{cut:none}}}"))
    labels = {s.label: (s.name, dict(s.knobs)) for s in config.strategies}
    assert labels["hybrid_cp"] == ("hybrid_cp", {})
    assert labels["hybrid_cp_capped"] == ("hybrid_cp", {"token_capacity": 1.0})
    assert labels["magi_whole"] == ("magi", {"cut": "none"})
    assert labels["magi"][1]["cut"] == "auto"


def test_the_cp_recipes_define_magis_opt_in_dispatches_as_variants():
    config = cp_bench_config(_compose("experiment=cp_h200x4", "hardware=cpu"))
    labels = {s.label: (s.name, s.knobs.get("dispatch_alg")) for s in config.strategies}
    assert labels["magi_timed"] == ("magi", "timed")
    assert labels["magi_unequal"] == ("magi", "unequal_runs")
    assert labels["magi"] == ("magi", "auto")


def test_warmup_ms_is_zero_unless_asked_and_the_cp_experiments_ask():
    assert cp_bench_config(_compose()).hardware.warmup_ms == 0.0
    assert cp_bench_config(_compose("hardware.warmup_ms=50")).hardware.warmup_ms == 50.0
    for experiment in ("cp_h200x2", "cp_h200x4"):
        config = cp_bench_config(_compose(f"experiment={experiment}", "hardware=cpu"))
        assert config.hardware.warmup_ms == 300.0
    with pytest.raises(ValueError, match="warmup_ms"):
        cp_bench_config(_compose("hardware.warmup_ms=-1"))


def test_a_time_limit_keeps_the_result_file_so_a_rerun_without_it_resumes():
    plain = cp_bench_config(_compose("mask=[causal]"), ["mask=[causal]"])
    limited = cp_bench_config(_compose("mask=[causal]", "time_limit_s=500"),
                              ["mask=[causal]", "time_limit_s=500"])
    assert limited.time_limit_s == 500 and plain.time_limit_s is None
    assert limited.out_file == plain.out_file != cp_bench_config(_compose()).out_file
