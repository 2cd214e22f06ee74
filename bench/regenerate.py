"""Redraw every published figure and rewrite docs/results.md from the committed results files.

    python -m bench.regenerate          # what scripts/regenerate.sh runs

- ``results/<hw>/kernels/<experiment>.csv`` -> ``plots/<hw>/kernels/<experiment>/<mask>/<dir>/
  flops_report.png`` (and ``mem_report.png`` where memory was recorded);
- ``results/<hw>/cp/<experiment>.csv`` -> ``plots/<hw>/cp/<experiment>/<mask>/<dir>/...``
  (TFLOPs/s/GPU by cp size) and the magi ratio tables beside them;
- ``results/<hw>/cp_predicted/<experiment>.csv`` (the CP predictor's rows, status ``predicted``)
  -> ``plots/<hw>/cp_predicted/`` (hatched bars, comm volume, the scale-out overview);
- the dispatch solver's figures (no results file): ``plots/dispatch/``;
- ``docs/results.md`` and the README's headline table (``bench.results_page``).

A figure is one run: a file whose rows come from several commits is refused (named on the
terminal, with what to do) and draws nothing; each figure's footer names its file, commit, date
and, when stale, the measured code that changed since. The figure folders of kernels and cp are
drawn afresh, so a figure never outlives the rows it was drawn from.
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from bench.published import ROOT, MixedRuns, published_files, require_one_run, run_info
from bench.results import read_results

__all__ = ["draw_published", "main"]


def _draw_one(path: Path, kind: str, out: Path, footer: str) -> list[Path]:
    if kind == "kernels":
        from bench.plot import plot_results
        return plot_results([path], out, kind=None, footer=footer)
    from bench.cp.plot import plot_cp_results, write_ratios
    return plot_cp_results([path], out, footer=footer) + write_ratios([path], out)


def draw_published(root: Path = ROOT, plots: Path | None = None) -> tuple[list[Path], list[str]]:
    """Draw the figures of every published results file that is one run; returns the written
    paths and one line per refused file."""
    plots = plots or root / "plots"
    written, refused = [], []
    for hardware, kind, path in published_files(root / "results"):
        out = plots / hardware / kind / path.stem
        if out.exists():
            shutil.rmtree(out)
        rows = read_results([path])
        try:
            require_one_run(rows, path.relative_to(root))
        except MixedRuns as e:
            refused.append(f"not drawn: {e}")
            continue
        info = run_info(path, kind, rows, root)
        written += _draw_one(path, kind, out, info.label(root))
    return written, refused


# files under results/<hw>/cp_predicted/ that hold no prediction rows
PREDICTION_SIDE_FILES = ("validation.csv", "rate_table.csv")


def _clear_drawn(plots: Path) -> None:
    """Remove the kernel, cp and prediction figure folders, so that no figure of a removed or
    refused file is left behind (dispatch/ is drawn afresh by its own tool)."""
    for kind in ("kernels", "cp", "cp_predicted"):
        for folder in plots.glob(f"*/{kind}"):
            shutil.rmtree(folder)


def draw_predictions(root: Path = ROOT, plots: Path | None = None) -> list[Path]:
    """The CP predictor's figures from its committed rows (``bench.cp.predict.figures``)."""
    from bench.cp.predict.figures import plot_predictions
    from bench.cp.predict.report import made_at
    from bench.results import read_results
    plots = plots or root / "plots"
    written = []
    for path in sorted((root / "results").glob("*/cp_predicted/*.csv")):
        if path.name not in PREDICTION_SIDE_FILES:
            footer = made_at(path, read_results([path]), root)
            written += plot_predictions(path, plots / path.parent.parent.name / "cp_predicted",
                                        footer)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-dispatch", action="store_true",
                        help="skip the dispatch solver's figures (the slowest part)")
    args = parser.parse_args(argv)
    plots = ROOT / "plots"
    _clear_drawn(plots)
    written, refused = draw_published(ROOT, plots)
    written += draw_predictions(ROOT, plots)
    print(f"drew {len(written)} files under {plots.relative_to(ROOT)}/")
    for line in refused:
        print(line)
    if not args.no_dispatch:
        from bench.cp.dispatch_plot import main as dispatch_main
        dispatch_main(["--out", str(plots / "dispatch")])
    from bench.results_page import main as docs_main
    return docs_main([])


if __name__ == "__main__":
    raise SystemExit(main())
