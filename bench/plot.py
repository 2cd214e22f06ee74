"""flops_report figures from result files: per (mask, direction), grouped bars (one group per x
value, one bar per kernel), values on the bars, an X with a short reason where a kernel did not
run (unsupported, oom, error, wrong).

    python -m bench.plot --results results/h200 --out plots/h200

writes ``<out>/<mask>/<fwd|bwd>/flops_report.png`` (and ``mem_report.png``); with rows of several
hardware names, ``<out>/<hardware>/<mask>/...``. The plotting function is generic over the x
column and the value column, so CP figures use it with ``x="cp_size"``.
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bench.results import kind_sources, latest_rows, read_results  # noqa: E402

__all__ = ["plot_bars", "plot_results", "main"]

SHORT_STATUS = {"unsupported": "n/a", "oom": "OOM", "error": "err", "wrong": "wrong"}
FIGURES = {"tflops_per_s": ("flops_report.png", "TFLOPs/s"),
           "peak_mem_gb": ("mem_report.png", "peak memory (GiB)")}


def _label_x(value) -> str:
    if isinstance(value, (int, np.integer)) and value >= 1024 and value % 1024 == 0:
        return f"{value // 1024}k"
    return str(value)


def plot_bars(rows: pd.DataFrame, path: str | os.PathLike, value: str = "tflops_per_s",
              x: str = "seqlen", series: str = "kernel", title: str = "",
              ylabel: str | None = None) -> Path:
    """Grouped bar chart of ``value`` by ``x`` (groups) and ``series`` (bars) to ``path``.

    ``rows`` holds one row per (x, series) with ``status`` and ``message``; non-ok rows are
    drawn as an X at the axis with a short status label.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    xs = sorted(rows[x].unique())
    names = list(dict.fromkeys(rows[series]))
    width = 0.8 / max(1, len(names))
    # one distinct colour per series (tab10 repeats past ten kernels); width capped so a
    # 7-seqlen x 13-kernel figure stays readable
    colors = plt.get_cmap("tab20").colors
    fig, ax = plt.subplots(figsize=(min(22.0, max(6.0, 0.24 * len(xs) * max(1, len(names)))), 5.5))
    ok_values = rows.loc[rows["status"] == "ok", value].dropna()
    top = float(ok_values.max()) if len(ok_values) else 1.0
    for i, name in enumerate(names):
        sub = rows[rows[series] == name].set_index(x)
        positions = np.arange(len(xs)) + (i - (len(names) - 1) / 2) * width
        heights, failed = [], []
        for pos, xv in zip(positions, xs):
            if xv in sub.index and sub.loc[xv, "status"] == "ok" and pd.notna(sub.loc[xv, value]):
                heights.append(float(sub.loc[xv, value]))
            else:
                heights.append(0.0)
                status = sub.loc[xv, "status"] if xv in sub.index else None
                if status is not None:
                    failed.append((pos, SHORT_STATUS.get(status, status)))
        bars = ax.bar(positions, heights, width, label=name, color=colors[i % len(colors)])
        for bar, h in zip(bars, heights):
            if h > 0:
                ax.text(bar.get_x() + bar.get_width() / 2, h, f"{h:.3g}", ha="center",
                        va="bottom", fontsize=6, rotation=90)
        for pos, short in failed:
            ax.plot(pos, top * 0.02, marker="x", color=bars.patches[0].get_facecolor(),
                    markersize=8, markeredgewidth=2)
            ax.text(pos, top * 0.06, short, ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(np.arange(len(xs)), [_label_x(v) for v in xs])
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel or value)
    ax.set_ylim(0, top * 1.25)
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=min(7, len(names)), loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_results(results: str | os.PathLike | Iterable, out_dir: str | os.PathLike,
                 x: str = "seqlen", series: str = "kernel",
                 values: Iterable[str] = ("tflops_per_s", "peak_mem_gb"),
                 kind: str | None = "kernels") -> list[Path]:
    """One figure per (mask, direction) and value; returns the written paths. A hardware folder
    in ``results`` is narrowed to its ``<kind>/`` subfolder when it has one (None: read all)."""
    frame = latest_rows(read_results(kind_sources(results, kind) if kind else results))
    if frame.empty:
        return []
    out_dir = Path(out_dir)
    several = frame["hardware"].nunique() > 1
    written = []
    groups = ["hardware", "mask", "direction"] + (["cp_size"] if x != "cp_size" else [])
    for key, rows in frame.groupby(groups, sort=True):
        hardware, mask, direction = key[:3]
        folder = (out_dir / str(hardware) if several else out_dir) / str(mask) / str(direction)
        shapes = rows.iloc[0]
        title = (f"{mask} {direction} | {hardware} | {shapes['dtype']} | heads "
                 f"{shapes['num_heads_q']}:{shapes['num_heads_kv']} | head_dim {shapes['head_dim']}")
        for value in values:
            filename, ylabel = FIGURES.get(value, (f"{value}.png", value))
            written.append(plot_bars(rows, folder / filename, value=value, x=x, series=series,
                                     title=title, ylabel=ylabel))
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", nargs="+", required=True, help="result CSV files or folders (a hardware folder means its kernels/ rows)")
    parser.add_argument("--out", required=True, help="figure folder, e.g. plots/h200")
    parser.add_argument("--x", default="seqlen", help="x column (cp_size for CP results)")
    parser.add_argument("--kind", default="kernels", choices=["kernels", "cp"],
                        help="kernels: flops_report per seqlen; cp: TFLOPs/s/GPU per cp_size "
                             "(bench.cp.plot, with the magi ratio tables)")
    args = parser.parse_args(argv)
    if args.kind == "cp":
        from bench.cp.plot import plot_cp_results, write_ratios  # it imports this module

        sources = kind_sources(args.results, "cp")
        paths = plot_cp_results(sources, args.out)
        write_ratios(sources, args.out)
    else:
        paths = plot_results(args.results, args.out, x=args.x, kind=args.kind)
    print(f"wrote {len(paths)} figures under {args.out}")


if __name__ == "__main__":
    main()
