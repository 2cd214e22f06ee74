"""flops_report figures from result files: per (mask, direction), grouped bars (one group per x
value, one bar per kernel), values on the bars, a mark with a short reason where a kernel did not
run (unsupported, missing, oom, error, wrong, not measured). Drawing is ``bench.barplot``.

    python -m bench.plot --results results/h200 --out plots/h200

writes ``<out>/<mask>/<fwd|bwd>/flops_report.png`` (and ``mem_report.png`` where some row
recorded peak memory: none does on the CPU, where the tables say why); with rows of several
hardware names, ``<out>/<hardware>/<mask>/...``. A figure of a job's report (rows that carry
their file, some of them measured by other jobs) names the files under its axes. ``--kind cp`` draws the CP figures instead (``bench.cp.plot``).
"""
from __future__ import annotations

import argparse
import os
import textwrap
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure

from bench.barplot import FIGURES, bar_figure, save_figure, series_colors, series_order
from bench.cp.plot import plot_cp_results, write_ratios
from bench.kernels import KERNEL_NAMES
from bench.report import source_lines
from bench.results import kind_sources, latest_rows, read_results
from bench.status import experiment_cells

__all__ = ["CUSTOM_COLORS", "KERNEL_COLORS", "plot_results", "kernel_title", "write_figure", "main"]

_TAB10 = colormaps["tab10"].colors
# A colour per registered kernel, the same in every figure. The nine kernels of the published
# GPU figures take nine tab10 hues (FFA's two backends green and red); the others, drawn in the
# dense sweep or on the CPU, hues of their own. No two are closer than 0.26 in RGB (the palette
# in registry order drew sdpa and flex in two oranges, fa3 and flashinfer in two pinks).
KERNEL_COLORS: dict[str, tuple] = {
    "fa2_torch": _TAB10[0], "flex": _TAB10[1], "ffa": _TAB10[2], "ffa_fa4": _TAB10[3],
    "fa3": _TAB10[4], "sdpa": _TAB10[5], "flashinfer": _TAB10[6], "fa4": _TAB10[7],
    "cudnn": _TAB10[8], "naive": _TAB10[9], "sdpa_math": (0.6, 0.78, 0.95),
    "fa2_sdpa": (0.5, 0.0, 0.15), "fa2": (0.6, 0.9, 0.3), "cudnn_sdpa": (0.1, 0.15, 0.45),
    "cudnn_te": (0.15, 0.15, 0.15), "flashmask": (0.0, 0.45, 0.45),
}
# Custom kernels (series ``custom:<target>`` or their label): gold first, then black and Dark2
CUSTOM_COLORS = ((1.0, 0.85, 0.0), (0.0, 0.0, 0.0), *colormaps["Dark2"].colors)


def kernel_title(mask: str, direction: str, hardware: str, shapes) -> str:
    """The title of one kernel figure; ``shapes`` a row with dtype, heads and head_dim."""
    return (f"{mask} {direction} | {hardware} | {shapes['dtype']} | heads "
            f"{shapes['num_heads_q']}:{shapes['num_heads_kv']} | head_dim {shapes['head_dim']}")


NOTE_FONTSIZE = 7
# a 7-pt character of the default sans font is at most ~0.6 of its size wide
NOTE_CHAR_IN = NOTE_FONTSIZE * 0.6 / 72


def _add_note(fig: Figure, lines: list[str]) -> None:
    """``lines`` at the bottom left, wrapped to the figure's width. As the figure's supxlabel,
    so the constrained layout keeps room for it under the axes."""
    width = max(40, int(fig.get_figwidth() / NOTE_CHAR_IN) - 4)
    text = "\n".join(textwrap.fill(line, width, subsequent_indent="    ") for line in lines)
    fig.supxlabel(text, x=0.01, ha="left", fontsize=NOTE_FONTSIZE, color="dimgray")


def write_figure(rows: pd.DataFrame, path: str | os.PathLike, note: list[str], **kwargs) -> Path:
    """``bench.barplot.bar_figure(rows, **kwargs)`` with the ``note`` lines under its axes,
    written to ``path``."""
    fig = bar_figure(rows, **kwargs)
    if note:
        _add_note(fig, note)
    return save_figure(fig, path)


def plot_results(results: str | os.PathLike | Iterable | pd.DataFrame,
                 out_dir: str | os.PathLike, x: str = "seqlen", series: str = "kernel",
                 values: Iterable[str] = ("tflops_per_s", "peak_mem_gb"),
                 kind: str | None = "kernels", footer: str = "") -> list[Path]:
    """One figure per (mask, direction) and value; returns the written paths. ``results``: rows
    already read (a DataFrame: rows of status ``not measured`` stand for cells without a row,
    a SOURCE column names each row's file), or result files and folders, a hardware folder
    narrowed to its ``<kind>/`` subfolder when it has one (None: read all). A value after the
    first that no row of a figure recorded (peak memory on the CPU) gets no figure; one left at
    its path by an earlier call is removed. ``footer``: the one source line of a published
    figure (file, commit, stale mark; ``bench.barplot.bar_figure``), in place of the note that
    lists the files a job's rows came from."""
    if isinstance(results, pd.DataFrame):
        frame = latest_rows(results)
    else:
        frame = latest_rows(read_results(kind_sources(results, kind) if kind else results))
    if frame.empty:
        return []
    out_dir = Path(out_dir)
    several = frame["hardware"].nunique() > 1
    written = []
    extra = ["cp_size"] if x != "cp_size" else []
    experiment = experiment_cells(frame, ["hardware", "mask", *extra], x, series)
    # one place (registry order) and one colour per kernel in every figure
    order = series_order(frame[series], KERNEL_NAMES)
    colors = series_colors(order, fixed=KERNEL_COLORS, palette=CUSTOM_COLORS)
    for key, rows in frame.groupby(["hardware", "mask", "direction", *extra], sort=True):
        hardware, mask, direction = key[:3]
        xs, names = experiment[(hardware, mask, *key[3:])]
        names = [n for n in order if n in names]
        folder = (out_dir / str(hardware) if several else out_dir) / str(mask) / str(direction)
        title = kernel_title(mask, direction, hardware, rows.iloc[0])
        note = [f"rows from {line}" for line in source_lines(rows, x, series)]
        for i, value in enumerate(values):
            filename, ylabel = FIGURES.get(value, (f"{value}.png", value))
            # the first value's figure carries the marks of the cells that did not run; another
            # value's figure would only repeat them where no row recorded it (memory on a CPU)
            if i > 0 and not rows[value].notna().any():
                (folder / filename).unlink(missing_ok=True)
                continue
            written.append(write_figure(rows, folder / filename, [] if footer else note,
                                        value=value, x=x, series=series, title=title,
                                        ylabel=ylabel, xs=xs, names=names, colors=colors,
                                        footer=footer))
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
        sources = kind_sources(args.results, "cp")
        paths = plot_cp_results(sources, args.out)
        write_ratios(sources, args.out)
    else:
        paths = plot_results(args.results, args.out, x=args.x, kind=args.kind)
    print(f"wrote {len(paths)} figures under {args.out}")


if __name__ == "__main__":
    main()
