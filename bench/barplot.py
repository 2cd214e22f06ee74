"""Grouped bar figures of result rows, the base of the kernel figures (``bench.plot``) and the CP
figures (``bench.cp.plot``): one group per x value, one bar per series (kernel or strategy), the
value on each bar, and a marked cell where a series did not run.

The figure stays readable at any number of series: its width grows with the number of bars, the
legend sits right of the axes inside the figure and lists every series, a title wider than the
axes is broken at a " | " and then shrunk, and a bar value too wide for its bar is turned
upright rather than made smaller. Cells are told apart by status:

- ``x`` with ``n/a``, ``OOM``, ``err`` or ``wrong``: the series ran here, or tried to, and could
  not (a real limit, out of memory, an exception, a failed correctness gate);
- hollow diamond, ``missing``: its package is not installed on this machine;
- hollow circle, ``not measured``: the sweep has no row for the cell (it stopped early).
"""
from __future__ import annotations

import io
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from PIL import Image  # noqa: E402  (matplotlib's own dependency)

from bench.status import MISSING, NOT_MEASURED, with_missing  # noqa: E402

__all__ = ["FIGURES", "STATUS_MARKS", "Mark", "add_footer", "bar_figure", "label_x", "palette_png",
           "plot_bars", "save_figure", "text_boxes", "texts_outside_canvas"]

# value column -> (file name, y label)
FIGURES = {"tflops_per_s": ("flops_report.png", "TFLOPs/s"),
           "peak_mem_gb": ("mem_report.png", "peak memory (GiB)")}
DPI = 120
VALUE_FONTSIZE = 7  # 6 was hard to read at DPI 120
# inches per bar: a bar stays wider than an upright 7-pt label (~0.1 in), so labels never touch
BAR_WIDTH_IN = 0.19
LEGEND_WIDTH_IN = 2.2
MIN_WIDTH_IN, MAX_WIDTH_IN, HEIGHT_IN = 8.0, 36.0, 5.5
HEADROOM = 1.3  # y limit over the tallest bar: room for an upright value label


@dataclass(frozen=True)
class Mark:
    """How a cell that did not run is drawn: marker, label on the figure, key in the legend."""

    marker: str
    label: str
    key: str
    hollow: bool = False


_FAILED = "could not run (n/a, OOM, err, wrong)"
STATUS_MARKS = {
    "unsupported": Mark("x", "n/a", _FAILED),
    "oom": Mark("x", "OOM", _FAILED),
    "error": Mark("x", "err", _FAILED),
    "wrong": Mark("x", "wrong", _FAILED),
    MISSING: Mark("D", "missing", "package not installed", hollow=True),
    NOT_MEASURED: Mark("o", "not measured", "not measured (no row)", hollow=True),
}


def label_x(value) -> str:
    """1024 -> '1k'; other values as they are."""
    if isinstance(value, (int, np.integer)) and value >= 1024 and value % 1024 == 0:
        return f"{value // 1024}k"
    return str(value)


def _draw_series(ax, cells: dict, name: str, xs: list, offset: float, width: float, color,
                 value: str, top: float) -> tuple[list, set[str]]:
    """One series' bars, their value labels and the marks of its failed cells; returns the
    value labels and the statuses it marked."""
    positions = np.arange(len(xs)) + offset
    heights, failed = [], []
    for pos, xv in zip(positions, xs):
        row = cells.get((name, xv))
        status = row["status"] if row is not None else NOT_MEASURED
        if status == "ok" and pd.notna(row[value]):
            heights.append(float(row[value]))
        else:
            heights.append(0.0)
            if status != "ok":  # ok without a value (no peak memory on CPU) draws nothing
                failed.append((pos, status))
    ax.bar(positions, heights, width, label=name, color=color)
    labels = [ax.text(pos, h, f"{h:.3g}", ha="center", va="bottom", fontsize=VALUE_FONTSIZE)
              for pos, h in zip(positions, heights) if h > 0]
    used = set()
    for pos, status in failed:
        mark = STATUS_MARKS.get(status, Mark("x", str(status), _FAILED))
        used.add(status)
        ax.plot(pos, top * 0.02, marker=mark.marker, markersize=7, markeredgewidth=2,
                color=color, markerfacecolor="none" if mark.hollow else color)
        ax.text(pos, top * 0.06, mark.label, ha="center", va="bottom", rotation=90,
                fontsize=VALUE_FONTSIZE, color="dimgray" if status == NOT_MEASURED else "black")
    return labels, used


def _status_key(used: set[str]) -> list[Line2D]:
    """Legend entries for the marks on the figure, one per kind of mark."""
    handles = {}
    for status in STATUS_MARKS:
        if status in used:
            mark = STATUS_MARKS[status]
            handles.setdefault(mark.key, Line2D(
                [], [], linestyle="none", marker=mark.marker, color="dimgray", markeredgewidth=2,
                markerfacecolor="none" if mark.hollow else "dimgray", label=mark.key))
    return list(handles.values())


def _upright_if_wider_than_bar(fig: Figure, labels: list, bar_px: float) -> None:
    renderer = fig.canvas.get_renderer()
    for text in labels:
        if text.get_window_extent(renderer).width > bar_px:
            text.set_rotation(90)


def _fit_title(fig: Figure, title, limit: float) -> None:
    """Keep the title within ``limit`` pixels (the axes' width, so that it clears the legend):
    break it at the ' | ' nearest its middle, then shrink it if a half is still too wide."""
    width = title.get_window_extent(fig.canvas.get_renderer()).width
    text = title.get_text()
    if width > limit and " | " in text and "\n" not in text:
        parts = text.split(" | ")
        cut = min(range(1, len(parts)),
                  key=lambda i: abs(len(" | ".join(parts[:i])) - len(text) / 2))
        title.set_text(" | ".join(parts[:cut]) + "\n" + " | ".join(parts[cut:]))
        width = title.get_window_extent(fig.canvas.get_renderer()).width
    if width > limit:
        title.set_fontsize(title.get_fontsize() * limit / width)


# 18 distinct strong colours (tab20 pairs a dark and a light shade of one hue, which read as one)
PALETTE = plt.get_cmap("tab10").colors + plt.get_cmap("Dark2").colors


def series_order(names: Iterable[str], known: Iterable[str] = ()) -> list[str]:
    """The distinct ``names``: those in ``known`` (a registry) in its order, then the others in
    first-seen order. Used for every figure of one call, so that a series keeps its place."""
    seen = list(dict.fromkeys(names))
    rank = {name: i for i, name in enumerate(known)}
    return sorted(seen, key=lambda name: (rank.get(name, len(rank)), seen.index(name)))


def series_colors(names: Iterable[str], known: Iterable[str] = (),
                  fixed: dict[str, tuple] | None = None,
                  palette: Iterable[tuple] = PALETTE) -> dict[str, tuple]:
    """One colour per series: those of ``fixed``, then for every other name of ``known`` (a
    registry), in its order, and of ``names`` the next ``palette`` colour that ``fixed`` does not
    use; so a registered kernel has one colour in every figure and every folder."""
    fixed = dict(fixed or {})
    spare = [color for color in palette if color not in fixed.values()] or list(palette)
    order = [name for name in dict.fromkeys([*known, *names]) if name not in fixed]
    return {**fixed, **{name: spare[i % len(spare)] for i, name in enumerate(order)}}


def bar_figure(rows: pd.DataFrame, value: str = "tflops_per_s", x: str = "seqlen",
               series: str = "kernel", title: str = "", ylabel: str | None = None,
               xs: Iterable | None = None, names: Iterable[str] | None = None,
               colors: dict[str, tuple] | None = None, footer: str = "",
               keys: Iterable = ()) -> Figure:
    """The grouped bar figure of ``value`` by ``x`` (groups) and ``series`` (bars).

    ``rows`` holds at most one row per (x, series), with ``status`` and ``message``. ``xs`` and
    ``names`` add x values and series that the experiment had, so that a cell without a row is
    drawn ``not measured`` (by default the cells are those of ``rows``). ``colors``: a colour per
    series name (from :func:`series_colors`, shared by a set of figures); by default the
    palette in bar order. ``footer``: a line under the axes naming where the rows come from
    (the results file, its commit, a stale mark); a line with "STALE" or "MIXED" is red.
    ``keys``: more legend entries (labelled artists, e.g. a hatch), before the layout is fixed.
    """
    rows = with_missing(rows)
    xs = sorted(set(rows[x]) | set(xs or ()))
    names = list(dict.fromkeys([*(names or ()), *rows[series]]))
    cells = {(r[series], r[x]): r for r in rows.to_dict("records")}
    n_bars = max(1, len(xs) * len(names))
    fig_width = min(MAX_WIDTH_IN, max(MIN_WIDTH_IN, BAR_WIDTH_IN * n_bars + LEGEND_WIDTH_IN))
    fig = plt.figure(figsize=(fig_width, HEIGHT_IN), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ok_values = rows.loc[rows["status"] == "ok", value].dropna()
    top = float(ok_values.max()) if len(ok_values) and ok_values.max() > 0 else 1.0
    width = 0.8 / max(1, len(names))
    colors = colors or series_colors(names)
    labels, used = [], set()
    for i, name in enumerate(names):
        series_labels, series_used = _draw_series(
            ax, cells, name, xs, (i - (len(names) - 1) / 2) * width, width,
            colors[name], value, top)
        labels += series_labels
        used |= series_used
    ax.set_xticks(np.arange(len(xs)), [label_x(v) for v in xs])
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel or value)
    ax.set_ylim(0, top * HEADROOM)
    handles = ax.get_legend_handles_labels()[0] + _status_key(used) + list(keys)
    fig.legend(handles=handles, loc="outside right upper", fontsize=8,
               ncol=1 if len(handles) <= 26 else 2)
    title_text = ax.set_title(title, fontsize=11)
    if footer:
        add_footer(fig, footer)
    fig.canvas.draw()  # lays the figure out, so widths below are the final ones
    _fit_title(fig, title_text, ax.bbox.width)
    bar_px = ax.transData.transform((width, 0))[0] - ax.transData.transform((0, 0))[0]
    _upright_if_wider_than_bar(fig, labels, bar_px)
    return fig


FOOTER_FONTSIZE = 7
FOOTER_LINE = 0.03  # of the figure's height per footer line, kept free of the axes
ALERTS = ("STALE", "MIXED", "DIRTY", "INFERRED")


def add_footer(fig: Figure, footer: str) -> None:
    """``footer`` in the figure's bottom strip, which the constrained layout leaves free: the
    source on one line, an alert (stale, mixed) on the next, in red; shrunk to the width."""
    lines = footer.split(" | ", 3)
    head = " | ".join(p for p in lines if not p.startswith(ALERTS))
    alert = " | ".join(p for p in lines if p.startswith(ALERTS))
    texts = [t for t in (head, alert) if t]
    strip = FOOTER_LINE * len(texts) + 0.01
    fig.get_layout_engine().set(rect=(0, strip, 1, 1 - strip))
    for i, text in enumerate(reversed(texts)):
        artist = fig.text(0.005, 0.005 + i * FOOTER_LINE, text, fontsize=FOOTER_FONTSIZE,
                          ha="left", va="bottom",
                          color="firebrick" if text.startswith(ALERTS) else "dimgray")
        width = artist.get_window_extent(fig.canvas.get_renderer()).width
        if width > fig.bbox.width * 0.99:
            artist.set_fontsize(FOOTER_FONTSIZE * fig.bbox.width * 0.98 / width)


def palette_png(image: Image.Image) -> Image.Image:
    """An opaque figure as 256 palette colours: flat fills and anti-aliased edges look the same
    at about a third of the RGBA file (the committed plots/ travel with every device call, whose
    working tree is capped). An image with real transparency is returned as it is."""
    if image.mode != "RGBA" or image.getextrema()[3][0] < 255:
        return image
    return image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT,
                                         dither=Image.Dither.NONE)


def save_figure(fig: Figure, path: str | os.PathLike) -> Path:
    """Write ``fig`` to ``path`` (folders made; a .png as :func:`palette_png`) and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".png":
        rendered = io.BytesIO()
        fig.savefig(rendered, dpi=DPI, format="png")
        palette_png(Image.open(rendered)).save(path, optimize=True)
    else:
        fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def plot_bars(rows: pd.DataFrame, path: str | os.PathLike, **kwargs) -> Path:
    """:func:`bar_figure` of ``rows`` (same keyword arguments) written to ``path``."""
    return save_figure(bar_figure(rows, **kwargs), path)


def _drawn_tick_labels(ax) -> list[Text]:
    """Tick labels inside the view limits (the others exist but are not drawn)."""
    drawn = []
    for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        drawn += [t.label1 for t in axis.get_major_ticks()
                  if min(low, high) <= t.get_loc() <= max(low, high)]
    return drawn


def text_boxes(fig: Figure) -> list[tuple[Text, object]]:
    """Every text drawn on ``fig`` (titles, labels, drawn tick labels, legend, values) with its
    window extent, after the layout that ``savefig`` runs."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for tick in axis.get_major_ticks() + axis.get_minor_ticks()
             for t in (tick.label1, tick.label2)}
    texts = [t for t in fig.findobj(Text) if id(t) not in ticks]
    texts += [t for ax in fig.axes for t in _drawn_tick_labels(ax)]
    return [(t, t.get_window_extent(renderer)) for t in texts
            if t.get_visible() and t.get_text().strip()]


def texts_outside_canvas(fig: Figure, tolerance_px: float = 1.0) -> list[str]:
    """The texts of ``fig`` that stick out of its canvas (clipped in the saved file)."""
    canvas = fig.bbox
    return [t.get_text() for t, box in text_boxes(fig)
            if box.x0 < canvas.x0 - tolerance_px or box.y0 < canvas.y0 - tolerance_px
            or box.x1 > canvas.x1 + tolerance_px or box.y1 > canvas.y1 + tolerance_px]
