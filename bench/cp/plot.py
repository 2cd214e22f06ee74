"""CP figures: per (hardware, tokens per GPU, mask, direction), TFLOPs/s/GPU against cp_size as
grouped bars, one bar per strategy, values on the bars, an X with the status where a strategy
did not run (unsupported, oom, error, wrong). Drawing is ``bench.plot.plot_bars``.

    python -m bench.cp.plot --results results/h200/cp --out plots/h200/cp

writes ``<out>/<mask>/<fwd|bwd>/flops_report_<N>_per_gpu.png`` and ``mem_report_<N>_per_gpu.png``
(N the tokens per GPU, e.g. 8k); with rows of several hardware names, ``<out>/<hardware>/...``.
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from pathlib import Path

from bench.plot import FIGURES, _label_x, plot_bars
from bench.results import latest_rows, read_results

__all__ = ["plot_cp_results", "main"]


def plot_cp_results(results: str | os.PathLike | Iterable, out_dir: str | os.PathLike,
                    values: Iterable[str] = ("tflops_per_s", "peak_mem_gb")) -> list[Path]:
    """One figure per (hardware, seqlen per GPU, mask, direction) and value, from the rows with
    cp_size set (CP rows); returns the written paths."""
    frame = latest_rows(read_results(results))
    if frame.empty:
        return []
    frame = frame[frame["cp_size"].notna()].copy()
    frame["cp_size"] = frame["cp_size"].astype(int)
    frame["seqlen_per_gpu"] = frame["seqlen"].astype(int) // frame["cp_size"]
    out_dir = Path(out_dir)
    several = frame["hardware"].nunique() > 1
    written = []
    for (hardware, per_gpu, mask, direction), rows in frame.groupby(
            ["hardware", "seqlen_per_gpu", "mask", "direction"], sort=True):
        folder = (out_dir / str(hardware) if several else out_dir) / str(mask) / str(direction)
        first = rows.iloc[0]
        per_gpu_label = _label_x(int(per_gpu))
        title = (f"{mask} {direction} | {per_gpu_label} tokens/GPU | {hardware} | "
                 f"{first['dtype']} | heads {first['num_heads_q']}:{first['num_heads_kv']} | "
                 f"head_dim {first['head_dim']}")
        for value in values:
            filename, ylabel = FIGURES.get(value, (f"{value}.png", value))
            stem, suffix = filename.rsplit(".", 1)
            ylabel = "TFLOPs/s/GPU" if value == "tflops_per_s" else f"{ylabel} (max over ranks)"
            written.append(plot_bars(rows, folder / f"{stem}_{per_gpu_label}_per_gpu.{suffix}",
                                     value=value, x="cp_size", series="kernel", title=title,
                                     ylabel=ylabel))
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", nargs="+", required=True, help="CP result CSV files or folders")
    parser.add_argument("--out", required=True, help="figure folder, e.g. plots/h200/cp")
    args = parser.parse_args(argv)
    paths = plot_cp_results(args.results, args.out)
    print(f"wrote {len(paths)} figures under {args.out}")


if __name__ == "__main__":
    main()
