"""Figures of predicted CP rows: the CP bar figures (hatched) and the scale-out overview.

    plot_predictions("results/h100/cp_predicted/cp_scale_out.csv", "plots/h100/cp_predicted")

writes, per mask and direction, ``<mask>/<dir>/flops_report_<N>_per_gpu.png`` (TFLOPs/s/GPU
against cp_size, one hatched bar per strategy: ``bench.cp.plot``) and
``comm_report_<N>_per_gpu.png`` (the GB a GPU sends a step, the largest rank's); and one
overview per tokens-a-GPU, ``scale_out_<N>_per_gpu.png``: TFLOPs/s/GPU against the number of
GPUs, a panel per (direction, mask), a line per strategy, titled as a prediction.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from bench.barplot import (add_footer, label_x, save_figure, series_colors,  # noqa: E402
                           series_order)
from bench.cp import STRATEGIES  # noqa: E402
from bench.cp.plot import PREDICTED, cp_rows, plot_cp_frame  # noqa: E402

__all__ = ["plot_predictions", "with_comm_volume", "scale_out_figure"]

_COMM = re.compile(r"comm_bytes_per_rank=(\d+)")


def with_comm_volume(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``comm_gb_per_gpu``: the message's comm_bytes_per_rank in GB."""
    frame = frame.copy()
    found = frame["message"].astype(str).str.extract(_COMM, expand=False)
    frame["comm_gb_per_gpu"] = pd.to_numeric(found, errors="coerce") / 1e9
    return frame


def scale_out_figure(rows: pd.DataFrame, title: str, footer: str = ""):
    """TFLOPs/s/GPU against GPUs: a panel per (direction, mask), a line per strategy;
    ``footer``: the file and commit the rows come from."""
    masks = list(dict.fromkeys(rows["mask"]))
    directions = [d for d in ("fwd", "bwd") if d in set(rows["direction"])]
    order = series_order(rows["kernel"], STRATEGIES)
    colors = series_colors(order, STRATEGIES)
    fig, axes = plt.subplots(len(directions), len(masks), squeeze=False, sharex=True,
                             figsize=(3.6 * len(masks) + 1.5, 3.2 * len(directions) + 0.8),
                             layout="constrained")
    sizes = sorted(set(rows["cp_size"]))
    for i, direction in enumerate(directions):
        for j, mask in enumerate(masks):
            ax = axes[i][j]
            cell = rows[(rows["direction"] == direction) & (rows["mask"] == mask)]
            for name in order:
                line = cell[cell["kernel"] == name].sort_values("cp_size")
                if line["tflops_per_s"].notna().any():
                    ax.plot(line["cp_size"], line["tflops_per_s"], marker="o", markersize=3,
                            label=name, color=colors[name], linestyle="--")
            ax.set_xscale("log", base=2)
            ax.set_xticks(sizes, [str(s) for s in sizes])
            ax.set_ylim(bottom=0)
            ax.set_title(f"{mask} {direction}", fontsize=10)
            ax.grid(alpha=0.3)
            if j == 0:
                ax.set_ylabel("TFLOPs/s/GPU (predicted)")
            if i == len(directions) - 1:
                ax.set_xlabel("GPUs (cp_size)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=8)
    fig.suptitle(title, fontsize=11)
    if footer:
        add_footer(fig, footer)
    return fig


def plot_predictions(results: str | os.PathLike, out_dir: str | os.PathLike,
                     footer: str = "") -> list[Path]:
    """The figures of the predicted rows in ``results`` (module doc); returns their paths.
    ``footer``: the line under each figure naming the file, its commit and state."""
    frame = cp_rows(results)
    frame = frame[frame["status"].isin([PREDICTED, "unsupported"])]
    if frame.empty:
        return []
    frame = with_comm_volume(frame)
    written = plot_cp_frame(frame, out_dir, values=("tflops_per_s", "comm_gb_per_gpu"),
                            footer=footer)
    out_dir = Path(out_dir)
    ok = frame[frame["status"] == PREDICTED]
    for (hardware, per_gpu, local), rows in ok.groupby(["hardware", "seqlen_per_gpu",
                                                        "local_kernel"]):
        first = rows.iloc[0]
        title = (f"PREDICTED (model, not measured) | {hardware} | local {local} | "
                 f"{label_x(int(per_gpu))} tokens/GPU | {first['dtype']} | heads "
                 f"{first['num_heads_q']}:{first['num_heads_kv']} | head_dim {first['head_dim']}")
        several = ok["local_kernel"].nunique() > 1
        name = f"scale_out_{label_x(int(per_gpu))}_per_gpu" + (f"_{local}" if several else "")
        written.append(save_figure(scale_out_figure(rows, title, footer),
                                   out_dir / f"{name}.png"))
    return written
