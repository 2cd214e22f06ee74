"""The fullest figures (every kernel of the registry, every CP strategy, every status, cells with
no row) keep every text inside the canvas, list every series in the legend and keep bar values
readable: upright-or-flat at 7 pt, none overlapping another."""
import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from bench.barplot import STATUS_MARKS, VALUE_FONTSIZE, bar_figure, text_boxes, texts_outside_canvas
from bench.cp import STRATEGIES
from bench.cp.plot import cp_title
from bench.kernels import KERNEL_NAMES
from bench.masks import PATTERNS
from bench.plot import kernel_title

LONGEST_MASK = max(PATTERNS, key=len)
SHAPES = {"dtype": "bfloat16", "num_heads_q": 64, "num_heads_kv": 8, "head_dim": 128}
FAILED = ("unsupported", "missing", "oom", "error", "wrong")
SEQLENS = [1024 * 2 ** i for i in range(7)]  # 1k..64k, the kernel_masks sweep
CP_SIZES = [1, 2, 4, 8]


def _rows(names, xs, x, seed=0):
    """Every (x, name) cell: mostly ok with values from 0.0123 to 987, every failed status
    somewhere, and the last name's largest x without a row (a sweep that stopped early)."""
    rng = np.random.default_rng(seed)
    records = []
    for (i, name), (j, xv) in itertools.product(enumerate(names), enumerate(xs)):
        if (i, j) == (len(names) - 1, len(xs) - 1):
            continue
        cell = i * len(xs) + j
        status = FAILED[cell // 3 % len(FAILED)] if cell % 3 == 0 else "ok"
        value = float(rng.choice([0.0123, 7.5, 123.0, 987.0])) if status == "ok" else None
        records.append({x: xv, "kernel": name, "status": status, "tflops_per_s": value,
                        "message": "No module named 'peer'" if status == "missing" else "why"})
    return pd.DataFrame(records)


FIGURES = {
    "kernels": dict(names=list(KERNEL_NAMES), xs=SEQLENS, x="seqlen",
                    title=kernel_title(LONGEST_MASK, "bwd", "h200", SHAPES)),
    "cp": dict(names=list(STRATEGIES), xs=CP_SIZES, x="cp_size",
               title=cp_title(LONGEST_MASK, "bwd", "64k", "h200x4", SHAPES)),
}


@pytest.fixture(params=list(FIGURES), scope="module")
def fullest(request):
    spec = FIGURES[request.param]
    rows = _rows(spec["names"], spec["xs"], spec["x"])
    fig = bar_figure(rows, x=spec["x"], title=spec["title"], ylabel="TFLOPs/s", xs=spec["xs"],
                     names=spec["names"])
    yield fig, spec
    plt.close(fig)


def test_every_text_inside_the_canvas(fullest):
    fig, spec = fullest
    assert texts_outside_canvas(fig) == []
    assert fig.axes[0].get_title().replace("\n", " | ") == spec["title"]


def test_every_series_and_every_mark_in_the_legend(fullest):
    fig, spec = fullest
    (legend,) = fig.legends
    entries = [t.get_text() for t in legend.get_texts()]
    assert set(spec["names"]) <= set(entries)
    assert {m.key for m in STATUS_MARKS.values()} <= set(entries)  # every status is drawn
    axes_box = fig.axes[0].get_window_extent()
    assert legend.get_window_extent().x0 >= axes_box.x1  # beside the bars, not over them


def test_bar_values_readable_and_no_text_over_another(fullest):
    fig, _ = fullest
    ax = fig.axes[0]
    boxes = text_boxes(fig)
    values = [t for t, _ in boxes if t in ax.texts and t.get_text()[0].isdigit()]
    assert len(values) > 0 and {t.get_fontsize() for t in values} == {VALUE_FONTSIZE}
    assert VALUE_FONTSIZE >= 7
    labels = {t.get_text() for t, _ in boxes}
    assert {"n/a", "missing", "OOM", "err", "wrong", "not measured"} <= labels
    overlaps = [(a.get_text(), b.get_text())
                for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]
    assert overlaps == []


def test_the_check_sees_a_clipped_title():
    """The canvas check is not vacuous: the old layout (a long title on a narrow figure, the
    legend anchored past the axes) fails it."""
    fig, ax = plt.subplots(figsize=(6, 5.5))
    for i, name in enumerate(STRATEGIES):
        ax.bar([i], [1], label=name)
    ax.set_title(FIGURES["cp"]["title"])
    ax.legend(fontsize=7, ncol=len(STRATEGIES), loc="upper left")
    fig.tight_layout()
    outside = texts_outside_canvas(fig)
    plt.close(fig)
    assert FIGURES["cp"]["title"] in outside and list(STRATEGIES)[-1] in outside


@pytest.mark.parametrize("module", ["bench.barplot", "bench.cp.plot"])
def test_figure_modules_form_no_import_circle(module):
    """bench.plot imports bench.cp.plot (for --kind cp); both sit on bench.barplot; neither of
    those two imports bench.plot back."""
    import ast
    import importlib

    tree = ast.parse(open(importlib.import_module(module).__file__).read())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for a in node.names}
    assert "bench.plot" not in imported and not any(m.startswith("bench.plot.") for m in imported)
