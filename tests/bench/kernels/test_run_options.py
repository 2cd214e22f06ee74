"""The sweep's run-level options (CPU): ``sink=true`` measures the kernels that run attention
sinks (ffa on the reference backend, naive; both pass the gate, whose reference has the sink)
and gives the others an unsupported row, "no attention sink"; ``compile=true`` times the FFA
adapters' compiled call and leaves the other kernels as they are. Both enter each affected
kernel's spec, so a sweep with them and one without are different cells."""
import pytest
from hydra import compose, initialize_config_dir

from bench.config import CONFIGS_DIR, KernelChoice, kernel_bench_config, register_schemas
from bench.kernels import Refused, load_adapter
from bench.kernels.runner import run_sweep


def _rows(config):
    return {(r.kernel, r.direction): r for r in run_sweep(config)}


def test_sink_rows_status_and_spec(tiny_config):
    kernels = [KernelChoice(n, n, {"sink": True}) for n in ("ffa", "naive", "sdpa")]
    config = tiny_config(kernels=kernels, masks=("causal_document",), num_sink=1)
    rows = _rows(config)
    for name in ("ffa", "naive"):
        for direction in ("fwd", "bwd"):
            row = rows[name, direction]
            assert row.status == "ok", row.message
            assert "gate: " in row.message and row.spec == f"{name}[sink=True]"
    sdpa = rows["sdpa", "fwd"]
    assert (sdpa.status, sdpa.message, sdpa.spec) == ("unsupported", "no attention sink",
                                                      "sdpa[sink=True]")


def test_a_sink_of_the_wrong_values_fails_the_gate(tiny_config, monkeypatch):
    """The gate's reference has the cell's sink: an adapter that ignores it is wrong."""
    import bench.kernels.naive as naive
    monkeypatch.setattr(naive.Naive, "__init__", lambda self, sink=False: None)  # sink dropped
    config = tiny_config(kernels=[KernelChoice("naive", "naive", {"sink": True})],
                         masks=("causal",), num_sink=1)
    assert {r.status for r in run_sweep(config)} == {"wrong"}


def test_with_and_without_a_sink_are_different_cells(tiny_config):
    plain = run_sweep(tiny_config(kernels=("naive",)))
    sinked = run_sweep(tiny_config(kernels=[KernelChoice("naive", "naive", {"sink": True})],
                                   num_sink=1))
    assert len(plain) == len(sinked) == 2  # the second sweep skipped nothing
    assert {r.spec for r in plain} == {"naive"} and {r.spec for r in sinked} == {"naive[sink=True]"}


def test_compile_times_the_compiled_ffa_call(tiny_config):
    rows = _rows(tiny_config(kernels=[KernelChoice("ffa", "ffa", {"compile": True})]))
    for direction in ("fwd", "bwd"):
        row = rows["ffa", direction]
        assert row.status == "ok", row.message
        assert row.spec == "ffa[compile=True]" and "compiled=" in row.message


def test_the_sweep_options_reach_each_kernel_as_its_spec_says():
    register_schemas()
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base=None):
        cfg = compose(config_name="kernels", overrides=[
            "hardware=cpu", "kernel=[ffa,flex,sdpa]", "sink=true", "compile=true"])
    config = kernel_bench_config(cfg)
    options = {k.label: dict(k.options) for k in config.kernels}
    assert options["ffa"] == {"sink": True, "compile": True}
    assert options["flex"]["compile"] != True and options["flex"]["sink"] is True  # noqa: E712
    assert options["sdpa"] == {"sink": True}
    assert config.num_sink == 1 and config.shapes(64).num_sink == 1
    assert isinstance(load_adapter("sdpa", **options["sdpa"]), Refused)


def test_a_sink_must_be_the_whole_sweeps(tiny_config):
    with pytest.raises(ValueError, match=r"num_sink=1 but kernels \['naive'\]"):
        tiny_config(kernels=("naive",), num_sink=1)
    with pytest.raises(ValueError, match="num_sink=0"):
        tiny_config(kernels=[KernelChoice("naive", "naive", {"sink": True})])
