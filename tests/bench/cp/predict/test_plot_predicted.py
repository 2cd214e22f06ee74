"""Predicted rows in the CP figures: hatched bars, named in the legend, never over a measurement."""
from __future__ import annotations

import pandas as pd

from bench.barplot import texts_outside_canvas
from bench.cp import plot as cp_plot

BASE = dict(run_id="r", git_sha="abc", hardware="h100", gpu_name="g", torch_version="2",
            mask="causal", batch=1, num_heads_q=64, num_heads_kv=8, head_dim=128,
            dtype="bfloat16", direction="fwd", mask_area=1.0, flops=1e12, runtime_ms=1.0,
            peak_mem_gb=None, build_ms=None, message="", env="")


def _row(kernel: str, cp: int, status: str, tflops: float, minute: int = 1) -> dict:
    return dict(BASE, time=f"2025-01-01T00:0{minute}:00+00:00", kernel=kernel,
                kernel_version=f"bench.cp.{kernel} local=fa4", seqlen=8192 * cp, cp_size=cp,
                status=status, tflops_per_s=tflops)


def _write(tmp_path, rows) -> None:
    (tmp_path / "cp").mkdir(exist_ok=True)
    pd.DataFrame(rows).to_csv(tmp_path / "cp" / "a.csv", index=False)


def test_a_measured_row_wins_over_a_prediction_of_its_cell(tmp_path):
    # the prediction is newer, yet the figure keeps the measurement
    _write(tmp_path, [_row("magi", 2, "ok", 500.0, 1), _row("magi", 2, "predicted", 600.0, 2),
                      _row("magi", 8, "predicted", 550.0, 2)])
    rows = cp_plot.cp_rows(tmp_path / "cp").set_index("cp_size")
    assert rows.loc[2, "status"] == "ok" and rows.loc[2, "tflops_per_s"] == 500.0
    assert rows.loc[8, "status"] == "predicted"


def test_predicted_bars_are_hatched_and_the_legend_says_so(tmp_path, monkeypatch):
    _write(tmp_path, [_row("magi", 2, "ok", 500.0), _row("ulysses", 2, "ok", 400.0),
                      _row("magi", 8, "predicted", 550.0), _row("ulysses", 8, "predicted", 300.0)])
    figures = {}

    def keep(fig, path):
        figures[path.name] = fig
        return path
    monkeypatch.setattr(cp_plot, "save_figure", keep)
    cp_plot.plot_cp_results(tmp_path / "cp", tmp_path / "plots", values=("tflops_per_s",))
    fig = figures["flops_report_8k_per_gpu.png"]
    hatched = {(c.get_label(), x): bool(bar.get_hatch())
               for c in fig.axes[0].containers for x, bar in zip((2, 8), c.patches)}
    assert hatched == {("magi", 2): False, ("ulysses", 2): False, ("magi", 8): True,
                       ("ulysses", 8): True}
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["ulysses", "magi", cp_plot.PREDICTED_KEY]  # registry order, then the hatch


def test_a_long_title_and_the_hatch_key_stay_on_the_canvas(tmp_path, monkeypatch):
    """The hatch key widens the legend: the title is fitted to the axes that are left (the
    full-mask backward of the H100 scale-out, whose title ran off the canvas)."""
    tflops = {"magi": (699, 707, 685, 619), "ulysses": (703, 695, 700, 706),
              "ring_p2p": (631, 626, 630, 632), "ring_allgather": (688, 599, 597, 597),
              "usp": (666, 685, 692, 707), "loongtrain": (662, 683, 690, 699),
              "hybrid_cp": (631, 626, 630, 632)}
    _write(tmp_path, [dict(_row(k, cp, "predicted", t), mask="full", direction="bwd")
                      for k, values in tflops.items() for cp, t in zip((8, 16, 32, 64), values)])
    figures = []
    monkeypatch.setattr(cp_plot, "save_figure", lambda fig, path: figures.append(fig) or path)
    cp_plot.plot_cp_results(tmp_path / "cp", tmp_path / "plots", values=("tflops_per_s",),
                            footer="results/h100/cp_predicted/x.csv | commit abc | 2026-12-07")
    assert len(figures) == 1 and texts_outside_canvas(figures[0]) == []


def test_the_ratio_tables_hold_measured_rows_only(tmp_path):
    _write(tmp_path, [_row("magi", 2, "ok", 500.0), _row("ulysses", 2, "ok", 400.0),
                      _row("magi", 8, "predicted", 550.0), _row("ulysses", 8, "predicted", 300.0)])
    table = cp_plot.ratio_table(tmp_path / "cp")
    assert list(table["cp_size"]) == [2] and table["ratio"].iloc[0] == 500.0 / 400.0
