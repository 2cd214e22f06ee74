"""The predictor's results-page section, from validation and scale-out files."""
from __future__ import annotations

import pandas as pd

from bench.cp.predict.report import replicate_outliers, replicate_spread, results_section


def _validation(root, hw: str, cells, **made) -> None:
    rows = [dict(hardware_dir=hw, hardware="h200", local_kernel="fa4", kernel=k, mask="causal",
                 seqlen=32768, cp_size=2, direction=d, predicted_tflops_per_s=p,
                 measured_tflops_per_s=m, error=p / m - 1, predicted_runtime_ms=rt,
                 measured_runtime_ms=1.0, predicted_compute_ms=1.0, predicted_exposed_ms=0.0,
                 predicted_comm_bytes_per_rank=0, measured_file="f.csv", measured_commit="abc",
                 measured_run_id="r", notes="", **made) for k, d, p, m, rt in cells]
    path = root / "results" / hw / "cp_predicted"
    path.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(path / "validation.csv", index=False)


def test_the_section_reports_errors_ranking_and_scatter(tmp_path):
    _validation(tmp_path, "h200x2", [
        ("magi", "fwd", 550.0, 500.0, 1.0), ("ulysses", "fwd", 380.0, 400.0, 2.0),
        ("usp", "fwd", 300.0, 300.0, 3.0), ("ring_p2p", "fwd", 300.0, 240.0, 3.0),
        ("magi", "bwd", 500.0, 500.0, 1.0), ("ulysses", "bwd", 460.0, 400.0, 2.0)])
    text = results_section(tmp_path)
    # fwd: errors +10%, -5%, 0%, +25% -> median 7.5%, largest 25.0%
    assert "| h200x2 | fwd | 4 | 7.5% | 25.0% | met |" in text
    assert "| h200x2 | bwd | 2 | 7.5% | 15.0% | met |" in text
    assert "right on 2 of 2 non-tie cells" in text
    # usp and ring_p2p run one program (equal predicted time) and measured 300 and 240
    assert "up to 25.0%" in text and "ring_p2p,usp" in text
    # ... and the cell is listed with both measurements
    assert "| ring_p2p 240, usp 300 | 25.0% |" in text
    assert "### Predicted scale-out" not in text  # no scale-out file


def test_replicate_spread_groups_equal_predictions_only(tmp_path):
    table = pd.DataFrame([dict(hardware_dir="h", local_kernel="fa4", mask="m", seqlen=1,
                               cp_size=2, direction="fwd", kernel=k, predicted_runtime_ms=rt,
                               measured_tflops_per_s=m)
                          for k, rt, m in (("a", 1.0, 100.0), ("b", 1.0, 110.0),
                                           ("c", 2.0, 50.0))])
    spread = replicate_spread(table)
    assert list(spread["strategies"]) == ["a,b"]
    assert abs(spread["spread"].iloc[0] - 0.10) < 1e-12


def test_scale_out_tables_link_their_figures(tmp_path):
    path = tmp_path / "results" / "h100" / "cp_predicted"
    path.mkdir(parents=True)
    rows = [dict(status="predicted", kernel=k, mask="causal", direction="fwd", cp_size=cp,
                 seqlen=8192 * cp, num_heads_q=64, num_heads_kv=8, head_dim=128,
                 kernel_version="bench.cp.predict[magi] local=fa4", tflops_per_s=t,
                 message=f"predicted (model, not measured): comm_bytes_per_rank={cp * 10**9}")
            for k, t in (("magi", 600.0), ("ulysses", 500.0)) for cp in (8, 16)]
    pd.DataFrame(rows).to_csv(path / "cp_scale_out.csv", index=False)
    text = results_section(tmp_path)
    assert "### Predicted scale-out: h100, local fa4, 8k tokens a GPU" in text
    assert "| magi | 600 (8.00) | 600 (16.00) |" in text
    assert "(../plots/h100/cp_predicted/causal/fwd/flops_report_8k_per_gpu.png)" in text


def test_an_outlier_is_far_from_the_median_of_three_identical_programs():
    rows = [dict(hardware_dir="h", local_kernel="triton", mask="m", seqlen=1, cp_size=2,
                 direction="fwd", kernel=k, predicted_runtime_ms=rt, measured_tflops_per_s=m)
            for k, rt, m in (("ring_p2p", 1.0, 400.0), ("usp", 1.0, 300.0),
                             ("loongtrain", 1.0, 410.0), ("a", 2.0, 100.0), ("b", 2.0, 150.0))]
    out = replicate_outliers(pd.DataFrame(rows))
    # usp is 25% below the median (400) of its three; a pair ("a", "b") names no outlier
    assert list(out["kernel"]) == ["usp"] and out["off"].iloc[0] == -0.25


def test_the_section_names_the_commit_the_validation_was_made_at(tmp_path):
    cells = [("magi", "fwd", 550.0, 500.0, 1.0), ("ulysses", "fwd", 380.0, 400.0, 2.0)]
    _validation(tmp_path, "h200x2", cells)
    _validation(tmp_path, "h200x4", cells, git_sha="abc123456789-dirty",
                time="2026-12-07T10:00:00+00:00")
    text = results_section(tmp_path)
    assert ("Made by `python -m bench.cp.predict.validation`: "
            "`results/h200x2/cp_predicted/validation.csv | commit not recorded`; "
            "`results/h200x4/cp_predicted/validation.csv | commit abc123456789-dirty | "
            "2026-12-07 | DIRTY`.") in text
