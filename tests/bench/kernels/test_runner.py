"""The sweep records failures as rows and goes on; a rerun skips done cells; force re-measures."""
from dataclasses import replace

import pandas as pd
import pytest

from bench.config import KernelChoice
from bench.kernels.runner import run_sweep
from bench.results import read_results

FAULTY = KernelChoice("testing_faulty", "testing_faulty",
                      {"error_cells": ("causal:128",), "oom_cells": ("full:128",)})


def test_sweep_with_injected_error_and_oom_finishes_and_rerun_skips(tiny_config):
    config = tiny_config(kernels=("naive", FAULTY, "fa4"), masks=("full", "causal"))
    rows = run_sweep(config)
    frame = read_results(config.out_file)
    assert len(rows) == len(frame) == 2 * 3 * 2  # masks x kernels x directions
    status = {(r.kernel, r.mask, r.direction): (r.status, r.message) for r in rows}
    assert status["testing_faulty", "causal", "fwd"][0] == "error"
    assert "injected failure" in status["testing_faulty", "causal", "bwd"][1]
    assert status["testing_faulty", "full", "fwd"][0] == "oom"
    assert "injected OOM" in status["testing_faulty", "full", "fwd"][1]
    # the faulty kernel's bwd on the OOM cell ran after the fwd failed: it is recorded too
    assert status["testing_faulty", "full", "bwd"][0] == "oom"
    assert {status["fa4", m, d][0] for m in ("full", "causal") for d in ("fwd", "bwd")} == {"unsupported"}
    ok = frame[frame.status == "ok"]
    assert set(ok.kernel) == {"naive"} and (ok.runtime_ms > 0).all() and (ok.tflops_per_s > 0).all()
    assert ok.message.str.contains("gate: ").all()

    rerun = run_sweep(config)
    # only the error cells are measured again; ok, oom and unsupported cells are final
    assert {(r.kernel, r.mask) for r in rerun} == {("testing_faulty", "causal")}
    assert {r.status for r in rerun} == {"error"}

    forced = run_sweep(replace(config, force=True, kernels=config.kernels[:1]))
    assert len(forced) == 4 and {r.status for r in forced} == {"ok"}


def test_rows_carry_the_exact_mask_flops(tiny_config):
    config = tiny_config(masks=("causal",), directions=("fwd",))
    (row,) = run_sweep(config)
    s = 128
    assert row.mask_area == s * (s + 1) / 2
    assert row.flops == 4 * row.mask_area * 2 * 16  # 4 * area * heads_q * head_dim
    assert abs(row.tflops_per_s - row.flops / (row.runtime_ms * 1e-3) / 1e12) < 1e-12


@pytest.mark.parametrize("seqlen", [128, 256], ids=["all_rows", "sampled_rows"])
def test_right_forward_wrong_backward_gets_no_bwd_time(tiny_config, seqlen):
    """The gate checks gradients at every seqlen (the config samples rows above 128)."""
    wrong_bwd = KernelChoice("wrong_bwd", "testing_faulty",
                             {"wrong_grad_cells": (f"causal_document:{seqlen}",)})
    config = tiny_config(kernels=("naive", wrong_bwd), masks=("causal_document",),
                         seqlens=(seqlen,))
    status = {(r.kernel, r.direction): r for r in run_sweep(config)}
    assert status["wrong_bwd", "fwd"].status == "ok" and status["wrong_bwd", "fwd"].runtime_ms > 0
    bwd = status["wrong_bwd", "bwd"]
    assert bwd.status == "wrong" and bwd.runtime_ms is None
    assert bwd.message.startswith("gate: dv rel_err"), bwd.message
    rows = "32 rows" if seqlen > 128 else f"{seqlen} rows"
    assert status["naive", "bwd"].status == "ok" and rows in status["naive", "bwd"].message


def test_wrong_kernel_is_recorded_wrong_not_timed(tiny_config, monkeypatch):
    import bench.gate as gate
    monkeypatch.setitem(gate.REL_TOL, "float32", -1.0)  # nothing can pass
    config = tiny_config(masks=("causal",))
    rows = run_sweep(config)
    assert [r.status for r in rows] == ["wrong", "wrong"]
    assert all(r.runtime_ms is None for r in rows)


def test_report_after_sweep_writes_tables_and_plots(tiny_config, tmp_path):
    config = tiny_config(kernels=("naive", "sdpa_math"), masks=("causal",), seqlens=(64, 128),
                         report=True, plots_dir=tmp_path / "plots")
    run_sweep(config)
    tables = tmp_path / "results" / "tables"
    assert (tables / "README.md").read_text().count("| 128 |") >= 2
    assert (tmp_path / "plots" / "causal" / "bwd" / "flops_report.png").stat().st_size > 5000
    csv = pd.read_csv(tables / "tflops_per_s_cpu_causal_fwd_1.csv", index_col=0)
    assert list(csv.columns) == ["naive", "sdpa_math"] and list(csv.index) == [64, 128]
