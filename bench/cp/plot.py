"""CP figures: per (hardware, tokens per GPU, mask, direction), TFLOPs/s/GPU against cp_size as
grouped bars, one bar per strategy, values on the bars, a mark with the status where a strategy
did not run (unsupported, missing, oom, error, wrong, not measured). Drawing is
``bench.barplot``.

    python -m bench.cp.plot --results results/h200/cp --out plots/h200/cp

writes ``<out>/<mask>/<fwd|bwd>/flops_report_<N>_per_gpu.png`` and ``mem_report_<N>_per_gpu.png``
(N the tokens per GPU, e.g. 8k); with rows of several hardware names, ``<out>/<hardware>/...``;
and ``<out>/ratios_magi.csv`` / ``.md``: MagiAttention's TFLOPs/s/GPU over each other strategy's,
per cell where both are ok (``--reference`` picks another strategy).

Predicted rows (status ``predicted``, ``bench.cp.predict``) are drawn as hatched bars, and the
legend says so; where a cell has a measured row too, the measured one is drawn. The ratio
tables hold measured rows only.
"""
from __future__ import annotations

import argparse
import math
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from matplotlib.patches import Patch

from bench.barplot import (FIGURES, bar_figure, label_x, plot_bars, save_figure, series_colors,
                           series_order)
from bench.cp import STRATEGIES
from bench.cp.hybrid_cp import unequal_token_share
from bench.results import LOCAL_KERNEL, TABLE_KEY, latest_rows, read_results, seqlen_per_gpu
from bench.status import experiment_cells

__all__ = ["plot_cp_results", "plot_cp_frame", "ratio_table", "write_ratios", "cp_title",
           "cp_rows", "PREDICTED", "main"]

PREDICTED = "predicted"  # the status of a model's row (bench.results.STATUSES)
PREDICTED_HATCH = "//"
PREDICTED_KEY = "hatched: predicted (model, not measured)"
# the CP figures' values beyond the kernel figures' (bench.barplot.FIGURES)
CP_FIGURES = {**FIGURES, "comm_gb_per_gpu": ("comm_report.png", "GB a GPU sends a step")}


def cp_title(mask: str, direction: str, per_gpu_label: str, hardware: str, shapes,
             local_kernel: str = "") -> str:
    """The title of one CP figure; ``shapes`` a row with dtype, heads and head_dim."""
    local = f" | local {local_kernel}" if local_kernel else ""
    return (f"{mask} {direction} | {per_gpu_label} tokens/GPU | {hardware}{local} | "
            f"{shapes['dtype']} | heads {shapes['num_heads_q']}:{shapes['num_heads_kv']} | "
            f"head_dim {shapes['head_dim']}")


def cp_rows(results) -> pd.DataFrame:
    """The newest CP row per cell of ``results`` (files or folders), with ``seqlen_per_gpu``;
    a predicted row only where the cell has no measured one."""
    frame = read_results(results)
    if frame.empty:
        return frame
    predicted = frame["status"] == PREDICTED
    measured = latest_rows(frame[~predicted])
    model = latest_rows(frame[predicted])
    if len(model) and len(measured):
        key = [k for k in TABLE_KEY if k in frame.columns]
        have = set(map(tuple, measured[key].astype(str).values))
        model = model[[tuple(v) not in have for v in model[key].astype(str).values]]
    frame = pd.concat([measured, model], ignore_index=True)
    frame = frame[frame["cp_size"].notna()].copy()
    frame["cp_size"] = frame["cp_size"].astype(int)
    frame["seqlen_per_gpu"] = seqlen_per_gpu(frame)
    return frame


def ratio_table(results, reference: str = "magi") -> pd.DataFrame:
    """``reference``'s TFLOPs/s/GPU divided by each other strategy's, per (hardware,
    seqlen_per_gpu, mask, direction, cp_size), where both rows are ok. Columns: those keys,
    ``baseline``, ``reference_tflops``, ``baseline_tflops``, ``ratio`` and
    ``baseline_tokens_per_rank`` ("low-high" where the baseline's ranks held unequal token
    counts, as HybridCP's placement does; else "")."""
    frame = cp_rows(results)
    keys = ["hardware", "seqlen_per_gpu", "mask", "direction", "cp_size"]
    keys += [LOCAL_KERNEL] if LOCAL_KERNEL in frame else []  # ratios within one local kernel
    columns = keys + ["baseline", "reference_tflops", "baseline_tflops", "ratio",
                      "baseline_tokens_per_rank"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    ok = frame[frame["status"] == "ok"]
    ref = ok[ok["kernel"] == reference][keys + ["tflops_per_s"]]
    others = ok[ok["kernel"] != reference][keys + ["kernel", "tflops_per_s"]].copy()
    others["baseline_tokens_per_rank"] = ok.loc[others.index, "message"].map(unequal_token_share)
    merged = others.merge(ref, on=keys, suffixes=("_baseline", "_reference"))
    merged = merged.rename(columns={"kernel": "baseline",
                                    "tflops_per_s_baseline": "baseline_tflops",
                                    "tflops_per_s_reference": "reference_tflops"})
    merged["ratio"] = merged["reference_tflops"] / merged["baseline_tflops"]
    return merged[columns].sort_values(keys + ["baseline"]).reset_index(drop=True)


def write_ratios(results, out_dir: str | os.PathLike, reference: str = "magi") -> list[Path]:
    """``<out_dir>/ratios_<reference>.csv`` and a Markdown table per (seqlen_per_gpu, direction):
    rows mask x cp_size, columns the baselines, cells the ratio."""
    table = ratio_table(results, reference)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / f"ratios_{reference}.csv", out_dir / f"ratios_{reference}.md"
    table.to_csv(csv_path, index=False)
    lines = [f"# {reference} TFLOPs/s/GPU / baseline TFLOPs/s/GPU (> 1: {reference} faster)", ""]
    local = [LOCAL_KERNEL] if LOCAL_KERNEL in table else []
    for key, rows in table.groupby(["hardware", "seqlen_per_gpu", "direction", *local]):
        hw, per_gpu, direction = key[:3]
        kernel = f", local {key[3]}" if local and key[3] else ""
        wide = rows.pivot_table(index=["mask", "cp_size"], columns="baseline", values="ratio")
        lines += [f"## {hw}, {label_x(int(per_gpu))} tokens/GPU, {direction}{kernel}", "",
                  "| mask | cp | " + " | ".join(wide.columns) + " |",
                  "|---|---|" + "---|" * len(wide.columns)]
        unequal = rows[rows.baseline_tokens_per_rank != ""]
        marked = set(zip(unequal["mask"], unequal.cp_size, unequal.baseline))
        for (mask, cp), values in wide.iterrows():
            cells = ["" if math.isnan(v) else f"{v:.2f}" + ("*" if (mask, cp, b) in marked else "")
                     for b, v in values.items()]
            lines.append(f"| {mask} | {cp} | " + " | ".join(cells) + " |")
        if marked:
            shares = ", ".join(sorted(set(unequal.baseline_tokens_per_rank)))
            lines.append(f"\n\\* the baseline's ranks held unequal token counts "
                         f"(tokens_per_rank {shares}): it balanced attention work, not tokens")
        lines.append("")
    md_path.write_text("\n".join(lines))
    return [csv_path, md_path]


def plot_cp_results(results: str | os.PathLike | Iterable, out_dir: str | os.PathLike,
                    values: Iterable[str] = ("tflops_per_s", "peak_mem_gb"),
                    footer: str = "") -> list[Path]:
    """One figure per (hardware, seqlen per GPU, mask, direction) and value, from the rows with
    cp_size set (CP rows); returns the written paths. ``footer``: the source line under each
    figure (see ``bench.barplot.bar_figure``)."""
    return plot_cp_frame(cp_rows(results), out_dir, values, footer)


def _hatch_predicted(fig, rows: pd.DataFrame, x: str, series: str, xs) -> None:
    """Hatch the bars of predicted cells (``bar_figure`` draws one container per series, its
    bars in the order of the sorted x values); ``bar_figure``'s legend names the hatch."""
    predicted = set(zip(rows.loc[rows["predicted"], series], rows.loc[rows["predicted"], x]))
    ax = fig.axes[0]
    xs = sorted(set(rows[x]) | set(xs or ()))
    for container in ax.containers:
        name = container.get_label()
        for xv, bar in zip(xs, container.patches):
            if (name, xv) in predicted:
                bar.set_hatch(PREDICTED_HATCH)
                bar.set_edgecolor("white")


def plot_cp_frame(frame: pd.DataFrame, out_dir: str | os.PathLike,
                  values: Iterable[str] = ("tflops_per_s", "peak_mem_gb"),
                  footer: str = "") -> list[Path]:
    """``plot_cp_results`` of rows already read (``cp_rows``), e.g. with a derived value
    column; predicted rows (status ``predicted``) are drawn hatched."""
    if frame.empty:
        return []
    frame = frame.copy()
    frame["predicted"] = frame["status"] == PREDICTED
    frame.loc[frame["predicted"], "status"] = "ok"  # drawn as bars, hatched after
    out_dir = Path(out_dir)
    several = frame["hardware"].nunique() > 1
    written = []
    local = [LOCAL_KERNEL] if LOCAL_KERNEL in frame else []  # one figure per local kernel
    several_local = bool(local) and frame[LOCAL_KERNEL].nunique() > 1  # then named in the file
    experiment = experiment_cells(frame, ["hardware", "seqlen_per_gpu", "mask", *local],
                                  "cp_size", "kernel")
    order = series_order(frame["kernel"], STRATEGIES)  # one place and colour per strategy
    colors = series_colors(order, STRATEGIES)
    for key, rows in frame.groupby(["hardware", "seqlen_per_gpu", "mask", "direction", *local],
                                   sort=True):
        hardware, per_gpu, mask, direction = key[:4]
        kernel = key[4] if local else ""
        folder = (out_dir / str(hardware) if several else out_dir) / str(mask) / str(direction)
        per_gpu_label = label_x(int(per_gpu))
        title = cp_title(mask, direction, per_gpu_label, hardware, rows.iloc[0], kernel)
        xs, names = experiment[(hardware, per_gpu, mask, *key[4:])]
        names = [n for n in order if n in names]
        tail = f"{per_gpu_label}_per_gpu" + (f"_{kernel}" if several_local else "")
        for value in values:
            if value not in rows or rows[value].isna().all():
                continue  # e.g. no peak memory in predicted rows
            filename, ylabel = CP_FIGURES.get(value, (f"{value}.png", value))
            stem, suffix = filename.rsplit(".", 1)
            ylabel = "TFLOPs/s/GPU" if value == "tflops_per_s" else f"{ylabel} (max over ranks)"
            path = folder / f"{stem}_{tail}.{suffix}"
            kwargs = dict(value=value, x="cp_size", series="kernel", title=title,
                          ylabel=ylabel, xs=xs, names=names, colors=colors, footer=footer)
            if not rows["predicted"].any():
                written.append(plot_bars(rows, path, **kwargs))
                continue
            fig = bar_figure(rows, keys=[Patch(facecolor="lightgray", edgecolor="white",
                                               hatch=PREDICTED_HATCH, label=PREDICTED_KEY)],
                             **kwargs)
            _hatch_predicted(fig, rows, "cp_size", "kernel", xs)
            written.append(save_figure(fig, path))
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", nargs="+", required=True, help="CP result CSV files or folders")
    parser.add_argument("--out", required=True, help="figure folder, e.g. plots/h200/cp")
    parser.add_argument("--reference", default="magi", help="strategy of the ratio tables")
    args = parser.parse_args(argv)
    paths = plot_cp_results(args.results, args.out)
    tables = write_ratios(args.results, args.out, args.reference)
    print(f"wrote {len(paths)} figures and {tables[1]} under {args.out}")


if __name__ == "__main__":
    main()
