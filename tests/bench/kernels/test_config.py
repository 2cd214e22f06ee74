"""Hydra composition of configs/kernels.yaml: names, schemas, experiments, hardware=auto."""
import subprocess
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException, MissingConfigException

from _cli import python_m

from bench.config import (CONFIGS_DIR, check_group_choices, job_key, kernel_bench_config,
                          register_schemas)
from bench.kernels import KERNEL_NAMES
from bench.masks import KERNEL_MASK_NAMES, MASK_NAMES

REPO = Path(__file__).resolve().parents[3]
register_schemas()


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        return compose(config_name="kernels", overrides=list(overrides))


def test_every_registry_name_has_a_config_file():
    assert sorted(p.stem for p in (CONFIGS_DIR / "kernel").glob("*.yaml")) == sorted(KERNEL_NAMES)
    assert sorted(p.stem for p in (CONFIGS_DIR / "mask").glob("*.yaml")) == sorted(MASK_NAMES)


def test_default_is_cpu_preset_with_the_six_kernel_masks():
    config = kernel_bench_config(_compose())
    assert config.hardware.name == "cpu"  # no CUDA on the test machine
    assert tuple(m.label for m in config.masks) == KERNEL_MASK_NAMES
    assert [k.name for k in config.kernels] == ["naive", "sdpa_math", "flex", "ffa", "custom"]
    custom = next(k for k in config.kernels if k.name == "custom")
    assert custom.options["target"] == "examples.custom_kernel.my_attn:my_attention"
    assert config.out_file.parent == Path("runs/cpu/kernels")  # results/: the committed rows


def test_kernel_selection_options_and_explicit_hardware_values():
    config = kernel_bench_config(_compose(
        "kernel=[naive,custom,flex]", "kernel.custom.target=examples.custom_kernel.my_attn:my_attention",
        "kernel.flex.options.compile=never", "hardware.seqlens=[64]", "mask=causal"),
        ["kernel=[naive,custom,flex]", "mask=causal"])
    assert [k.label for k in config.kernels] == [
        "naive", "custom:examples.custom_kernel.my_attn:my_attention", "flex"]
    assert dict(config.kernels[2].options) == {"compile": "never", "block_size": 128}
    assert config.seqlens == (64,) and config.hardware.num_heads_q == 4  # override on top of preset
    assert [m.label for m in config.masks] == ["causal"]
    assert config.out_file.name == "default__kernel=_naive,custom,flex___mask=causal.csv"


def test_a_custom_kernel_is_labelled_by_its_target_or_its_label():
    """The results column of a custom kernel names its target (from the command line or the
    preset's configs/kernel/custom.yaml), so two targets never share one; label= sets another."""
    by_target = kernel_bench_config(_compose("kernel=custom", "kernel.custom.target=my_kernels:good"))
    assert [k.label for k in by_target.kernels] == ["custom:my_kernels:good"]
    labelled = kernel_bench_config(_compose("kernel=custom", "kernel.custom.target=my_kernels:good",
                                            "kernel.custom.label=mine"))
    assert [k.label for k in labelled.kernels] == ["mine"]
    assert labelled.kernels[0].options["target"] == "my_kernels:good"
    preset = kernel_bench_config(_compose())
    assert preset.kernels[-1].label == "custom:examples.custom_kernel.my_attn:my_attention"


@pytest.mark.parametrize("args, message", [
    (["kernel=[naive,sdpa_mth]"], "unknown kernel 'sdpa_mth' in kernel=[naive,sdpa_mth]; known "
                                  "kernels: cudnn, cudnn_sdpa, "),
    (["-m", "kernel=ffa,flx"], "unknown kernel 'flx' in kernel=ffa,flx; known kernels: "),
    (["mask=[causl]"], "unknown mask 'causl' in mask=[causl]; known masks: block_causal_document, "),
    (["experiment=nope"], "unknown experiment 'nope' in experiment=nope; known experiments: "),
], ids=["kernel_list", "kernel_sweep", "mask_list", "experiment"])
def test_unknown_choice_on_the_command_line_lists_the_known_ones(args, message):
    with pytest.raises(ValueError) as error:
        check_group_choices(args)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
    if "kernel" in args[-1]:
        assert ", ".join(sorted(KERNEL_NAMES)) in str(error.value)


def test_known_choices_and_extra_search_paths_pass():
    check_group_choices(["kernel=[naive,custom]", "kernel.custom.target=a:b", "mask=causal",
                         "hardware=cpu", "-m", "kernel=glob(*)"])
    extra = REPO / "tests" / "slurm" / "configs"  # testing_faulty, testing_unknown live there
    check_group_choices([f"hydra.searchpath=[file://{extra}]", "kernel=[naive,testing_faulty]",
                         "mask=testing_unknown"])


@pytest.mark.parametrize("group", ["kernel", "mask", "hardware", "experiment"])
def test_unknown_name_gives_hydras_could_not_find(group):
    with pytest.raises(MissingConfigException, match=f"Could not find '{group}/no_such_name'"):
        _compose(f"{group}=no_such_name")


def test_misspelt_mask_parameter_fails_before_any_cell(tmp_path):
    with pytest.raises(ValueError, match=r"mask 'sliding_window_causal'.*\['windw'\].*\['window'\]"):
        kernel_bench_config(_compose("mask=sliding_window_causal",
                                     "+mask.sliding_window_causal.params.windw=3"))
    result = subprocess.run(
        [*python_m("bench.kernels"), "kernel=naive", "mask=sliding_window_causal",
         "+mask.sliding_window_causal.params.windw=3", f"out_dir={tmp_path}/runs",
         f"hydra.run.dir={tmp_path}/hydra"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "error: mask 'sliding_window_causal'" in result.stderr
    assert not (tmp_path / "runs").exists()  # no row, no file: it stopped before the first cell


def test_misspelt_key_fails_at_compose_time():
    with pytest.raises(ConfigCompositionException, match="targt"):
        _compose("kernel=custom", "kernel.custom.targt=x:y")
    with pytest.raises(ConfigCompositionException, match="seqlen"):
        _compose("hardware.seqlen=[64]")


KERNEL_EXPERIMENTS = ["block_sparse_sweep", "dense_sweep", "ffa_fa4_vs_peers", "ffa_vs_peers",
                      "kernel_masks"]  # the cp_* recipes belong to configs/cp_bench.yaml


@pytest.mark.parametrize("experiment", KERNEL_EXPERIMENTS)
def test_experiments_compose_for_h200(experiment):
    config = kernel_bench_config(_compose(f"experiment={experiment}", "hardware=h200"))
    assert config.hardware.num_heads_q == 64 and config.hardware.num_heads_kv == 8
    assert config.hardware.dtype == "bfloat16" and config.hardware.head_dim == 128
    assert config.out_file.name.startswith(experiment)
    if experiment == "ffa_vs_peers":
        by_label = {m.label: config.seqlens_for(m) for m in config.masks}
        assert by_label["causal"] == (4096, 16384, 65536)
        assert by_label["causal_document"] == (16384, 65536)


def test_job_key_ignores_force_and_stays_short():
    assert job_key("default", ["force=true", "mask=causal"]) == "default__mask=causal"
    assert len(job_key("x", [f"kernel.k{i}.options.a={i}" for i in range(40)])) < 40


def test_job_key_leaves_the_preset_to_the_folder():
    """``hardware=h200`` names results/h200/, so the published file is <experiment>.csv; a
    preset's own setting still names the file."""
    assert job_key("kernel_masks", ["hardware=h200"]) == "kernel_masks"
    assert job_key("kernel_masks", ["hardware=h200", "hardware.repeat=3"]) == \
        "kernel_masks__hardware.repeat=3"


def test_cli_runs_a_tiny_sweep(tmp_path):
    result = subprocess.run(
        [*python_m("bench.kernels"), "kernel=naive", "mask=causal", "seqlens=[64]",
         f"out_dir={tmp_path}/results", f"plots_dir={tmp_path}/plots", "progress=false",
         f"hydra.run.dir={tmp_path}/hydra"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "wrote 2 rows" in result.stdout
    assert (tmp_path / "plots" / "causal" / "fwd" / "flops_report.png").exists()


def test_cli_multirun_writes_one_file_per_job(tmp_path):
    result = subprocess.run(
        [*python_m("bench.kernels"), "-m", "kernel=naive,sdpa_math", "mask=full",
         "seqlens=[64]", "directions=[fwd]", f"out_dir={tmp_path}/results", "report=false",
         "progress=false", f"hydra.sweep.dir={tmp_path}/hydra"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    files = sorted(p.name for p in (tmp_path / "results" / "kernels").glob("*.csv"))
    assert files == ["default__directions=_fwd___kernel=naive__mask=full__seqlens=_64_.csv",
                     "default__directions=_fwd___kernel=sdpa_math__mask=full__seqlens=_64_.csv"]


@pytest.mark.parametrize("gpu, preset, warns", [
    ("NVIDIA H200", "h100", True), ("NVIDIA H100 80GB HBM3", "h200", True),
    ("NVIDIA H100 80GB HBM3", "h100", False), ("NVIDIA A100-SXM4-80GB", "h100", False),
    ("NVIDIA H200", "cpu", False)])
def test_a_gpu_preset_on_another_gpu_warns(monkeypatch, gpu, preset, warns):
    """hardware=h100 on an H200 names the rows h100: the run says so once, at resolve time."""
    import warnings

    import torch

    from bench.config import resolve_hardware
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: gpu)
    values = dict(_compose(f"hardware={preset}").hardware)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert resolve_hardware(values).name == preset
    said = [str(w.message) for w in caught if f"hardware={preset} on an {gpu}" in str(w.message)]
    assert len(said) == int(warns), [str(w.message) for w in caught]
